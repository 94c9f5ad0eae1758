//! `POST /nodes/{node}/storage/{storage}/upload` (pve-storage
//! `PVE::API2::Storage::Status::upload`): a multipart body whose file part
//! becomes an ISO, a container template or an import image, copied by an
//! `imgcopy` task that verifies the optional checksum first.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::download::file_target;
use super::storage::STORAGE;
use crate::clock::Clock;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::qemu::NODE;
use crate::schema::{Named, Param};
use crate::state::Volume;
use crate::tasks;

pub const PARAMS: &[Param] = &[
    NODE,
    STORAGE,
    Param::string("content").format(Named::PveStorageContent),
    Param::string("filename").max_len(255),
    Param::string("checksum")
        .requires("checksum-algorithm")
        .opt(),
    Param::string("checksum-algorithm")
        .enums(&["md5", "sha1", "sha224", "sha256", "sha384", "sha512"])
        .requires("checksum")
        .opt(),
    Param::string("tmpfilename")
        .pattern(r"/var/tmp/pveupload-[0-9a-f]+")
        .opt(),
];

pub async fn upload(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node().to_owned();
    let storage = p.get("storage").unwrap_or_default().to_owned();
    inst.auth.check(
        &call.identity,
        &format!("/storage/{storage}"),
        &["Datastore.AllocateTemplate"],
    )?;
    let Some(file) = call.upload.clone() else {
        return Err(ApiError::internal("missing temporary file name"));
    };
    let content = p.get("content").unwrap_or_default().to_owned();
    if !["iso", "vztmpl", "import"].contains(&content.as_str()) {
        return Err(ApiError::param(
            "content",
            format!("upload content type '{content}' not allowed"),
        ));
    }
    let (volname, format) = file_target(
        &inst,
        &node,
        &storage,
        &content,
        p.get("filename").unwrap_or_default(),
    )?;
    let checksum = p.get("checksum").map(|c| {
        (
            p.get("checksum-algorithm").unwrap_or_default().to_owned(),
            c.to_ascii_lowercase(),
        )
    });
    let tmp = format!(
        "/var/tmp/pveupload-{}",
        file.digests.get("md5").cloned().unwrap_or_default()
    );
    let upid = tasks::spawn(&inst, &call, &node, "imgcopy", "", move |ctx| async move {
        let dest = {
            let cluster = ctx.inst.cluster();
            let s = cluster
                .storage(&ctx.node, &storage)
                .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
            s.path(&volname)
        };
        ctx.log(format!("starting file import from: {tmp}"));
        if let Some((algo, want)) = &checksum {
            ctx.log("calculating checksum...");
            let got = file.digests.get(algo.as_str()).cloned().unwrap_or_default();
            if got == *want {
                ctx.append("OK, checksum verified");
            } else {
                ctx.log("");
                return Err(format!("checksum mismatch: got '{got}' != expect '{want}'"));
            }
        }
        ctx.log(format!("target node: {}", ctx.node));
        ctx.log(format!("target file: {dest}"));
        ctx.log(format!("file size is: {}", file.size));
        ctx.log(format!("command: cp -- {tmp} {dest}"));
        let rate = ctx.inst.durations.import_bytes_per_sec.max(1);
        ctx.sleep(Duration::from_secs_f64(file.size as f64 / rate as f64))
            .await;
        ctx.checkpoint()?;
        let mut cluster = ctx.inst.cluster();
        let s = cluster
            .storage_mut(&ctx.node, &storage)
            .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
        let replaced = s.volumes.get(&volname).map_or(0, |v| v.size);
        if s.used() - replaced + file.size > s.total {
            return Err(format!(
                "cp: error writing '{dest}': No space left on device"
            ));
        }
        let virtual_size = qcow2_virtual_size(&file.head).unwrap_or(file.size);
        let content: &'static str = match content.as_str() {
            "iso" => "iso",
            "vztmpl" => "vztmpl",
            _ => "import",
        };
        let checksums: BTreeMap<String, String> = file
            .digests
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        s.volumes.insert(
            volname.clone(),
            Volume {
                volname,
                content,
                format,
                size: file.size,
                virtual_size,
                vmid: None,
                ctime: Clock::epoch_secs(),
                corrupt: false,
                checksums,
                base: None,
                contents: None,
                backup: None,
            },
        );
        ctx.log("finished file import successfully");
        Ok(())
    });
    Ok(Reply::data(upid))
}

/// The virtual size in a qcow2 header (`QFI\xfb`, size at byte 24).
fn qcow2_virtual_size(head: &[u8]) -> Option<u64> {
    if head.get(..4)? != b"QFI\xfb" {
        return None;
    }
    let size: [u8; 8] = head.get(24..32)?.try_into().ok()?;
    Some(u64::from_be_bytes(size))
}
