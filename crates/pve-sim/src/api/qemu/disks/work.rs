//! The work inside a task: allocation, import with progress, existing volumes.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{DiskOp, print_drive, render_bytes};
use crate::schema::format::format_size;
use crate::schema::qemu;
use crate::state::{StorageKind, Volume};
use crate::tasks::TaskCtx;

/// Runs one disk operation inside a task; returns the final (key, value)
/// and records new volume IDs in `created` for cleanup on failure.
pub async fn execute(
    ctx: &TaskCtx,
    vmid: u32,
    op: DiskOp,
    created: &mut Vec<String>,
) -> Result<(String, String), String> {
    match op {
        DiskOp::Keep { key, value } => keep(ctx, key, value),
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
            let size = ctx
                .inst
                .cluster()
                .volume(&ctx.node, &volid)
                .map_or(bytes, |(_, v)| v.virtual_size);
            opts.insert("size".into(), format_size(size));
            let value = print_drive(&volid, &opts);
            ctx.log(format!("{key}: successfully created disk '{value}'"));
            Ok((key, value))
        }
        DiskOp::CloudInit {
            key,
            storage,
            mut opts,
        } => {
            let volid = allocate_cloudinit(ctx, &storage, vmid, created)?;
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
            let image = source_image(ctx, &source)
                .map_err(|e| format!("cannot import from '{source}' - {e}"))?;
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
            // qemu-img writes the image's data, not its zeros.
            wrote(ctx, &volid, image.data)
                .map_err(|e| format!("cannot import from '{source}' - {e}"))?;
            set_contents(ctx, &volid, image.contents);
            opts.insert("size".into(), format_size(image.virtual_size));
            let value = print_drive(&volid, &opts);
            ctx.log(format!("{key}: successfully created disk '{value}'"));
            Ok((key, value))
        }
    }
}

/// An existing volume (or `none`/`cdrom`): it must exist; its size is recorded.
fn keep(ctx: &TaskCtx, key: String, value: String) -> Result<(String, String), String> {
    let Some(format) = qemu::drive_format(&key) else {
        return Ok((key, value));
    };
    let mut opts = format
        .parse(&key, &value)
        .map_err(|e| e.trim_end().to_owned())?;
    let file = opts.remove("file").unwrap_or_default();
    if file == "none" || file == "cdrom" || !file.contains(':') {
        opts.remove("size");
        return Ok((key, print_drive(&file, &opts)));
    }
    let cluster = ctx.inst.cluster();
    let (storage, vol) = cluster
        .volume(&ctx.node, &file)
        .ok_or_else(|| format!("volume {file} does not exist"))?;
    let size = if storage.is_file_based() && vol.content != "images" {
        vol.size
    } else {
        vol.virtual_size
    };
    opts.insert("size".into(), format_size(size));
    Ok((key, print_drive(&file, &opts)))
}

struct SourceImage {
    virtual_size: u64,
    /// What it holds ([`Volume::holds`]): the copy holds the same.
    contents: String,
    /// The data in it: what a copy writes (a qcow2 file holds no zeros).
    data: u64,
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
                    .map(|v| (v.clone(), s.path(&v.volname), s.volid(&v.volname)))
            });
        return found
            .map(|(v, path, volid)| image_of(&v, path, &volid))
            .ok_or_else(|| format!("could not get file size of {source}"));
    }
    let (storage, vol) = cluster
        .volume(&ctx.node, source)
        .ok_or_else(|| format!("could not get size of {source}"))?;
    let path = storage.path(&vol.volname);
    Ok(image_of(vol, path, source))
}

fn image_of(v: &Volume, path: String, volid: &str) -> SourceImage {
    SourceImage {
        contents: v.holds(volid),
        data: v.size,
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
    // LVM allocates whole 4 MiB extents.
    let bytes = match s.kind {
        StorageKind::LvmThin { .. } => bytes.div_ceil(4 << 20) * (4 << 20),
        StorageKind::Dir { .. } => bytes,
    };
    // A thin pool refuses new volumes once its data is full, whatever
    // their size (LVM's threshold check); other storages need the room.
    let full = if s.is_thin() {
        s.used() >= s.total
    } else {
        s.used() + bytes > s.total
    };
    if full {
        return Err(match &s.kind {
            StorageKind::LvmThin { vg } => format!(
                "lvcreate '{vg}/{volname}' error:   Cannot create new thin volume, free space in thin pool {vg}/data reached threshold."
            ),
            StorageKind::Dir { .. } => format!(
                "unable to create image: qemu-img: {}: Could not create image: No space left on device",
                s.path(&format!("{vmid}/{volname}.qcow2"))
            ),
        });
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
            size: if s.is_thin() { 0 } else { bytes },
            virtual_size: bytes,
            vmid: Some(vmid),
            ctime: crate::clock::Clock::epoch_secs(),
            corrupt: false,
            checksums: BTreeMap::new(),
            base: None,
            contents: None,
            backup: None,
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

/// Creates the VM's 4 MiB cloud-init volume, `vm-<vmid>-cloudinit`.
pub fn allocate_cloudinit(
    ctx: &TaskCtx,
    storage: &str,
    vmid: u32,
    created: &mut Vec<String>,
) -> Result<String, String> {
    let name = format!("vm-{vmid}-cloudinit");
    let volid = allocate(ctx, storage, vmid, Some(name), 4 << 20, created)?;
    wrote(ctx, &volid, 4 << 20)?;
    Ok(volid)
}

/// Records what a volume on the task's node holds (a copy of another's).
pub fn set_contents(ctx: &TaskCtx, volid: &str, contents: String) {
    let mut cluster = ctx.inst.cluster();
    let Some((sid, name)) = volid.split_once(':') else {
        return;
    };
    if let Some(vol) = cluster
        .storage_mut(&ctx.node, sid)
        .and_then(|s| s.volumes.get_mut(name))
    {
        vol.contents = Some(contents);
    }
}

/// Records `bytes` of data written to `volid` on the task's node (see
/// `Storage::wrote`); fails as the writer does when a thin pool is full.
pub fn wrote(ctx: &TaskCtx, volid: &str, bytes: u64) -> Result<(), String> {
    let mut cluster = ctx.inst.cluster();
    let Some((sid, name)) = volid.split_once(':') else {
        return Ok(());
    };
    let Some(storage) = cluster.storage_mut(&ctx.node, sid) else {
        return Ok(());
    };
    storage.wrote(name, bytes).map_err(|at| {
        format!("qemu-img: error while writing at byte {at}: No space left on device")
    })
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
