//! Disk parameters: the synchronous checks PVE makes before a task starts
//! (`check_storage_access`, the `import-from` syntax) and the work a task
//! does (allocate, import with progress, cloud-init drive).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::sim::auth::Identity;
use crate::sim::http::ApiError;
use crate::sim::instance::Instance;
use crate::sim::schema::format::{format_size, parse_size};
use crate::sim::schema::qemu;
use crate::sim::state::{StorageKind, Volume};
use crate::sim::tasks::TaskCtx;

/// What a task must do for one drive parameter.
#[derive(Clone, Debug)]
pub enum DiskOp {
    /// `storage:N`: a new empty disk of N GiB.
    Alloc {
        key: String,
        storage: String,
        bytes: u64,
        opts: BTreeMap<String, String>,
    },
    /// `storage:0,import-from=<source>`: a new disk with the source's content.
    Import {
        key: String,
        storage: String,
        source: String,
        opts: BTreeMap<String, String>,
    },
    /// `storage:cloudinit`: the cloud-init drive.
    CloudInit {
        key: String,
        storage: String,
        opts: BTreeMap<String, String>,
    },
    /// Anything else (an existing volume, `none`, `cdrom`, an ISO): stored as given.
    Keep { key: String, value: String },
}

/// Checks drive parameters before the task starts. `params` are (key, value)
/// of validated drive options.
pub fn plan(
    inst: &Instance,
    id: &Identity,
    node: &str,
    params: &[(String, String)],
) -> Result<Vec<DiskOp>, ApiError> {
    let mut ops = Vec::new();
    let mut cloudinit_key: Option<String> = None;
    for (key, value) in params {
        let Some(format) = qemu::drive_format(key) else {
            continue;
        };
        let opts = format
            .parse(key, value)
            .map_err(|e| ApiError::param(key.clone(), format!("invalid format - {e}")))?;
        let file = opts.get("file").cloned().unwrap_or_default();
        let mut rest = opts.clone();
        rest.remove("file");
        let new_disk = file
            .split_once(':')
            .filter(|(s, n)| !s.is_empty() && !s.contains('/') && is_size(n));
        if let Some(source) = opts.get("import-from") {
            let Some((storage, "0")) = new_disk else {
                return Err(ApiError::param(
                    key.clone(),
                    "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>",
                ));
            };
            check_target(inst, id, node, storage)?;
            check_import_source(inst, id, node, key, source)?;
            rest.remove("import-from");
            ops.push(DiskOp::Import {
                key: key.clone(),
                storage: storage.to_owned(),
                source: source.clone(),
                opts: rest,
            });
        } else if let Some((storage, size)) = new_disk {
            check_target(inst, id, node, storage)?;
            let gib: f64 = size.parse().unwrap_or_default();
            ops.push(DiskOp::Alloc {
                key: key.clone(),
                storage: storage.to_owned(),
                bytes: (gib * (1u64 << 30) as f64) as u64,
                opts: rest,
            });
        } else if let Some((storage, "cloudinit")) = file.split_once(':') {
            check_target(inst, id, node, storage)?;
            if let Some(prev) = &cloudinit_key {
                return Err(ApiError::internal(format!(
                    "{key} - cloud-init drive is already attached at '{prev}'"
                )));
            }
            cloudinit_key = Some(key.clone());
            ops.push(DiskOp::CloudInit {
                key: key.clone(),
                storage: storage.to_owned(),
                opts: rest,
            });
        } else {
            if let Some((storage, _)) = file.split_once(':')
                && inst.cluster().storage(node, storage).is_none()
            {
                return Err(ApiError::internal(format!(
                    "storage '{storage}' does not exist"
                )));
            }
            ops.push(DiskOp::Keep {
                key: key.clone(),
                value: value.clone(),
            });
        }
    }
    Ok(ops)
}

fn is_size(s: &str) -> bool {
    crate::sim::schema::regex_matches(r"\d+(\.\d+)?", s)
}

fn check_target(inst: &Instance, id: &Identity, node: &str, storage: &str) -> Result<(), ApiError> {
    inst.auth.check(
        id,
        &format!("/storage/{storage}"),
        &["Datastore.AllocateSpace"],
    )?;
    let cluster = inst.cluster();
    let s = cluster
        .storage(node, storage)
        .ok_or_else(|| ApiError::internal(format!("storage '{storage}' does not exist")))?;
    if !s.supports("images") {
        return Err(ApiError::param(
            "storage",
            format!("storage '{storage}' does not support vm images"),
        ));
    }
    Ok(())
}

fn check_import_source(
    inst: &Instance,
    id: &Identity,
    node: &str,
    key: &str,
    source: &str,
) -> Result<(), ApiError> {
    if source.starts_with('/') {
        if !id.is_root() {
            return Err(ApiError::internal(
                "Only root can pass arbitrary filesystem paths. at /usr/share/perl5/PVE/Storage.pm line 565.",
            ));
        }
        return Ok(());
    }
    let (storage, volname) = source.split_once(':').unwrap_or_default();
    let vtype = volname.split_once('/').map_or("images", |(t, _)| t);
    let vtype = if volname.starts_with("vm-") || volname.starts_with("base-") {
        "images"
    } else {
        vtype
    };
    if vtype != "images" && vtype != "import" {
        return Err(ApiError::param(
            key,
            format!("{source} has wrong type '{vtype}' - needs to be 'images' or 'import'"),
        ));
    }
    if inst.cluster().storage(node, storage).is_none() {
        return Err(ApiError::internal(format!(
            "storage '{storage}' does not exist"
        )));
    }
    let path = format!("/storage/{storage}");
    if vtype == "import" {
        inst.auth.check(
            id,
            &path,
            &[
                "Datastore.Allocate",
                "Datastore.AllocateSpace",
                "Datastore.Audit",
            ],
        )?;
    } else if let Some(owner) = volname
        .split('-')
        .nth(1)
        .and_then(|v| v.parse::<u32>().ok())
    {
        inst.auth
            .check(id, &format!("/vms/{owner}"), &["VM.Clone"])?;
    }
    Ok(())
}

/// Prints a drive: the volume first, then the options sorted by name.
pub fn print_drive(file: &str, opts: &BTreeMap<String, String>) -> String {
    let mut parts = vec![file.to_owned()];
    parts.extend(
        opts.iter()
            .filter(|(k, _)| *k != "file")
            .map(|(k, v)| format!("{k}={v}")),
    );
    parts.join(",")
}

/// Runs one disk operation inside a task; returns the final (key, value)
/// and records new volume IDs in `created` for cleanup on failure.
pub async fn execute(
    ctx: &TaskCtx,
    vmid: u32,
    op: DiskOp,
    created: &mut Vec<String>,
) -> Result<(String, String), String> {
    match op {
        DiskOp::Keep { key, value } => Ok((key, value)),
        DiskOp::Alloc {
            key,
            storage,
            bytes,
            mut opts,
        } => {
            if bytes == 0 {
                return Err(format!("{key}: disk size must be greater than zero"));
            }
            let volid = allocate(ctx, &storage, vmid, None, bytes, created)?;
            ctx.sleep(ctx.inst.durations.disk_alloc).await;
            opts.insert("size".into(), format_size(bytes));
            Ok((key, print_drive(&volid, &opts)))
        }
        DiskOp::CloudInit {
            key,
            storage,
            mut opts,
        } => {
            let volid = allocate(
                ctx,
                &storage,
                vmid,
                Some(format!("vm-{vmid}-cloudinit")),
                4 << 20,
                created,
            )?;
            ctx.sleep(ctx.inst.durations.disk_alloc).await;
            opts.insert("media".into(), "cdrom".into());
            let value = print_drive(&volid, &opts);
            ctx.log(format!("{key}: successfully created disk '{value}'"));
            Ok((key, value))
        }
        DiskOp::Import {
            key,
            storage,
            source,
            mut opts,
        } => {
            let image = source_image(ctx, &source)?;
            ctx.log(format!("create full clone of drive {key} ({source})"));
            let volid = allocate(ctx, &storage, vmid, None, image.virtual_size, created)?;
            let dst_path = volume_path(ctx, &volid);
            copy_with_progress(ctx, image.virtual_size, image.corrupt.then_some(37)).await.map_err(|at| {
                ctx.log(format!("qemu-img: error while reading at byte {at}: Input/output error"));
                format!(
                    "cannot import from '{source}' - copy failed: command '/usr/bin/qemu-img convert -p -n -f {} -O raw {} zeroinit:{dst_path}' failed: exit code 1",
                    image.format, image.path
                )
            })?;
            opts.insert("size".into(), format_size(image.virtual_size));
            let value = print_drive(&volid, &opts);
            ctx.log(format!("{key}: successfully created disk '{value}'"));
            Ok((key, value))
        }
    }
}

struct SourceImage {
    virtual_size: u64,
    corrupt: bool,
    format: String,
    path: String,
}

fn source_image(ctx: &TaskCtx, source: &str) -> Result<SourceImage, String> {
    let cluster = ctx.inst.cluster();
    if source.starts_with('/') {
        let found = cluster
            .storages
            .get(&ctx.node)
            .into_iter()
            .flatten()
            .find_map(|s| {
                s.volumes
                    .values()
                    .find(|v| s.path(&v.volname) == source)
                    .map(|v| (v.clone(), s.path(&v.volname)))
            });
        return found.map(|(v, path)| image_of(&v, path)).ok_or_else(|| {
            format!("cannot import from '{source}' - qemu-img: Could not open '{source}': Could not open '{source}': No such file or directory")
        });
    }
    let (storage, vol) = cluster
        .volume(&ctx.node, source)
        .ok_or_else(|| format!("volume '{source}' does not exist"))?;
    let path = storage.path(&vol.volname);
    Ok(image_of(vol, path))
}

fn image_of(v: &Volume, path: String) -> SourceImage {
    SourceImage {
        virtual_size: v.virtual_size,
        corrupt: v.corrupt,
        format: v.format.clone(),
        path,
    }
}

fn volume_path(ctx: &TaskCtx, volid: &str) -> String {
    let cluster = ctx.inst.cluster();
    let (sid, name) = volid.split_once(':').unwrap_or_default();
    cluster
        .storage(&ctx.node, sid)
        .map(|s| s.path(name))
        .unwrap_or_default()
}

/// Creates a volume on `storage` for `vmid` and logs like lvcreate does.
pub fn allocate(
    ctx: &TaskCtx,
    storage: &str,
    vmid: u32,
    name: Option<String>,
    bytes: u64,
    created: &mut Vec<String>,
) -> Result<String, String> {
    let mut cluster = ctx.inst.cluster();
    let s = cluster
        .storage_mut(&ctx.node, storage)
        .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
    if !s.supports("images") {
        return Err(format!("storage '{storage}' does not support vm images"));
    }
    let volname = name.unwrap_or_else(|| s.free_disk_name(vmid));
    if s.volumes.contains_key(&volname) {
        return Err(format!(
            "lvcreate '{volname}' error:   Logical Volume \"{volname}\" already exists in volume group \"pve\""
        ));
    }
    let (volname, format) = match &s.kind {
        StorageKind::LvmThin { .. } => (volname, "raw"),
        StorageKind::Dir { .. } => (format!("{vmid}/{volname}.qcow2"), "qcow2"),
    };
    s.volumes.insert(
        volname.clone(),
        Volume {
            volname: volname.clone(),
            content: "images",
            format: format.into(),
            size: bytes,
            virtual_size: bytes,
            vmid: Some(vmid),
            ctime: crate::sim::clock::Clock::epoch_secs(),
            corrupt: false,
            checksums: BTreeMap::new(),
        },
    );
    let volid = s.volid(&volname);
    if matches!(s.kind, StorageKind::LvmThin { .. }) {
        ctx.log(format!("  Logical volume \"{volname}\" created."));
    } else {
        ctx.log(format!(
            "Formatting '{}', fmt=qcow2 size={bytes}",
            s.path(&volname)
        ));
    }
    created.push(volid.clone());
    Ok(volid)
}

/// Logs `transferred X of Y (pp.pp%)` about once per percent over the
/// simulated copy time. `fail_at` percent: stop there with the byte offset.
pub async fn copy_with_progress(
    ctx: &TaskCtx,
    total: u64,
    fail_at: Option<u32>,
) -> Result<(), u64> {
    let rate = ctx.inst.durations.import_bytes_per_sec.max(1);
    let step = Duration::from_secs_f64(total as f64 / rate as f64 / 100.0);
    let total_h = render_bytes(total);
    for pct in 0..=100u32 {
        let done = total / 100 * u64::from(pct);
        if fail_at == Some(pct) {
            return Err(done);
        }
        ctx.log(format!(
            "transferred {} of {total_h} ({pct}.00%)",
            render_bytes(if pct == 100 { total } else { done })
        ));
        if pct < 100 {
            ctx.sleep(step).await;
        }
    }
    Ok(())
}

/// PVE's `render_bytes` with one decimal: `3.5 GiB`, `0.0 B`.
pub fn render_bytes(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < units.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", units[unit])
}

/// The size of a drive value in bytes (from `size=`), 0 if unknown.
pub fn drive_size(opts: &BTreeMap<String, String>) -> u64 {
    opts.get("size").and_then(|s| parse_size(s)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bytes_like_pve() {
        assert_eq!(render_bytes(0), "0.0 B");
        assert_eq!(render_bytes(3584 << 20), "3.5 GiB");
        assert_eq!(render_bytes(36 << 20), "36.0 MiB");
    }
}
