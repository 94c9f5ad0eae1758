//! `POST /nodes/{node}/storage/{storage}/oci-registry-pull` (PVE 9.1,
//! pve-storage `PVE::API2::Storage::Status::oci_registry_pull`): an
//! `ociregistrypull` task that would run `skopeo copy docker://REF
//! oci-archive:DIR/FILE.tmp.PID` and rename the file into place. Loopback
//! only: the reference resolves against nothing; the sim fabricates the
//! archive (its size derived from the reference) under the same checks and
//! names: the file is `normalize_content_filename(filename // reference)
//! . ".tar"`, an existing file is never overwritten (refused before the
//! task starts, as PVE does), and the volume appears only at the rename.

use std::sync::Arc;
use std::time::Duration;

use super::storage::STORAGE;
use crate::clock::Clock;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::schema::qemu::NODE;
use crate::state::Volume;
use crate::tasks::{self, TaskCtx};
use crate::upid::encode_task_id;

/// The reference's pattern, as pve-storage declares it.
const REFERENCE: &str = r"(?:(?:[a-zA-Z\d]|[a-zA-Z\d][a-zA-Z\d-]*[a-zA-Z\d])(?:\.(?:[a-zA-Z\d]|[a-zA-Z\d][a-zA-Z\d-]*[a-zA-Z\d]))*(?::\d+)?/)?[a-z\d]+(?:(?:[._]|__|[-]*)[a-z\d]+)*(?:/[a-z\d]+(?:(?:[._]|__|[-]*)[a-z\d]+)*)*:\w[\w.-]{0,127}";

pub const PARAMS: &[Param] = &[
    NODE,
    STORAGE,
    Param::string("reference").pattern(REFERENCE),
    Param::string("filename").max_len(255).opt(),
];

pub async fn pull(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node().to_owned();
    let storage = p.get("storage").unwrap_or_default().to_owned();
    let id = &call.identity;
    inst.auth.check(
        id,
        &format!("/storage/{storage}"),
        &["Datastore.AllocateTemplate"],
    )?;
    inst.auth
        .check(id, &format!("/nodes/{node}"), &["Sys.AccessNetwork"])?;
    let reference = p.get("reference").unwrap_or_default().to_owned();
    let filename = format!(
        "{}.tar",
        super::download::normalize(p.get("filename").unwrap_or(&reference))
    );
    let volname = format!("vztmpl/{filename}");
    {
        let cluster = inst.cluster();
        let s = cluster
            .storage(&node, &storage)
            .ok_or_else(|| ApiError::internal(format!("storage '{storage}' does not exist")))?;
        if !s.is_file_based() {
            return Err(ApiError::internal(format!(
                "can't upload to storage type '{}', not a file based storage!",
                s.type_name()
            )));
        }
        if !s.supports("vztmpl") {
            return Err(ApiError::internal(format!(
                "storage '{storage}' is not configured for content-type 'vztmpl'"
            )));
        }
        if s.volumes.contains_key(&volname) {
            return Err(ApiError::internal(format!(
                "refusing to override existing file '{filename}'"
            )));
        }
    }
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "ociregistrypull",
        &encode_task_id(&filename),
        move |ctx| async move { run(&ctx, &storage, &reference, &volname).await },
    );
    Ok(Reply::data(upid))
}

/// What the pull leaves: a few MiB per reference, the same for the same
/// reference.
fn archive_size(reference: &str) -> u64 {
    let spread = reference
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31) + u64::from(b))
        % 8;
    (3 + spread) << 20
}

async fn run(ctx: &TaskCtx, storage: &str, reference: &str, volname: &str) -> Result<(), String> {
    let (path, tmp) = {
        let cluster = ctx.inst.cluster();
        let s = cluster
            .storage(&ctx.node, storage)
            .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
        let path = s.path(volname);
        let tmp = format!("{path}.tmp.{}", 4000 + ctx.upid.len());
        (path, tmp)
    };
    ctx.log(format!(
        "/usr/bin/skopeo copy docker://{reference} oci-archive:{tmp}"
    ));
    ctx.log("Getting image source signatures");
    let size = archive_size(reference);
    let rate = ctx.inst.durations.download_bytes_per_sec.max(1);
    ctx.sleep(Duration::from_secs_f64(size as f64 / rate as f64))
        .await;
    ctx.log("Copying blob sha256:5f0f1a1e0c4b0a6d3f0f4e1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f");
    ctx.log("Writing manifest to image destination");
    ctx.checkpoint()?;
    let mut cluster = ctx.inst.cluster();
    let s = cluster
        .storage_mut(&ctx.node, storage)
        .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
    // The rename: a file that appeared meanwhile is replaced by `rename`
    // on PVE too; only the check before the task refuses.
    s.volumes.insert(
        volname.to_owned(),
        Volume {
            volname: volname.to_owned(),
            content: "vztmpl",
            format: "tar".into(),
            size,
            virtual_size: size,
            vmid: None,
            ctime: Clock::epoch_secs(),
            corrupt: false,
            checksums: Default::default(),
            base: None,
            contents: None,
            backup: None,
        },
    );
    drop(cluster);
    ctx.log(format!("renamed '{tmp}' to '{path}'"));
    Ok(())
}
