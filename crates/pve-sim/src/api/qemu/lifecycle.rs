//! `DELETE .../qemu/{vmid}`, `POST .../template` and `PUT .../resize`.

use std::sync::Arc;

use super::{NODE_VMID, SKIPLOCK, check_lock_sync, check_root_only, spawn_locked};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::{format_size, parse_size};
use crate::schema::{Param, qemu};
use crate::state::StorageKind;

pub const DISK_KEYS: &[&str] = &[
    "ide0",
    "ide1",
    "ide2",
    "ide3",
    "scsi0",
    "scsi1",
    "scsi2",
    "scsi3",
    "scsi4",
    "scsi5",
    "scsi6",
    "scsi7",
    "scsi8",
    "scsi9",
    "scsi10",
    "scsi11",
    "scsi12",
    "scsi13",
    "scsi14",
    "scsi15",
    "scsi16",
    "scsi17",
    "scsi18",
    "scsi19",
    "scsi20",
    "scsi21",
    "scsi22",
    "scsi23",
    "scsi24",
    "scsi25",
    "scsi26",
    "scsi27",
    "scsi28",
    "scsi29",
    "scsi30",
    "virtio0",
    "virtio1",
    "virtio2",
    "virtio3",
    "virtio4",
    "virtio5",
    "virtio6",
    "virtio7",
    "virtio8",
    "virtio9",
    "virtio10",
    "virtio11",
    "virtio12",
    "virtio13",
    "virtio14",
    "virtio15",
    "sata0",
    "sata1",
    "sata2",
    "sata3",
    "sata4",
    "sata5",
    "efidisk0",
    "tpmstate0",
];

pub const DESTROY: &[Param] = &[
    SKIPLOCK,
    Param::boolean("purge").opt(),
    Param::boolean("destroy-unreferenced-disks").opt(),
];
pub const TEMPLATE: &[Param] = &[Param::string("disk").enums(DISK_KEYS).opt()];
pub const RESIZE: &[Param] = &[
    Param::string("disk").enums(DISK_KEYS),
    Param::string("size").pattern(r"\+?\d+(\.\d+)?[KMGT]?"),
    Param::string("digest").max_len(40).opt(),
    SKIPLOCK,
];
pub const PARAMS_DESTROY: &[&[Param]] = &[NODE_VMID, DESTROY];
pub const PARAMS_TEMPLATE: &[&[Param]] = &[NODE_VMID, TEMPLATE];
pub const PARAMS_RESIZE: &[&[Param]] = &[NODE_VMID, RESIZE];

pub async fn destroy(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let node = call.params.node().to_owned();
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Allocate"])?;
    let skiplock = call.params.flag("skiplock") == Some(true);
    if skiplock {
        check_lock_sync(&call, None)?;
    }
    {
        let cluster = inst.cluster();
        let vm = cluster.vm(&node, vmid)?;
        if vm.config.get("protection").is_some_and(|p| p == "1") {
            return Err(ApiError::internal(format!(
                "can't remove VM {vmid} - protection mode enabled"
            )));
        }
        if call.params.flag("purge") != Some(true) && cluster.ha.is_managed(vm) {
            return Err(ApiError::internal(format!(
                "unable to remove VM {vmid} - used in HA resources and purge parameter not set."
            )));
        }
        if vm.is_running() {
            return Err(ApiError::internal(format!(
                "VM {vmid} is running - destroy failed"
            )));
        }
    }
    let unreferenced = call.params.flag("destroy-unreferenced-disks") == Some(true);
    let purge = call.params.flag("purge") == Some(true);
    Ok(spawn_locked(
        &inst,
        &call,
        "qmdestroy",
        vmid,
        move |ctx| async move {
            let volumes = {
                let mut cluster = ctx.inst.cluster();
                let vm = cluster.vm_mut(&ctx.node, vmid)?;
                if !skiplock {
                    vm.check_lock()?;
                }
                if vm.is_running() {
                    return Err(format!("VM {vmid} is running - destroy failed"));
                }
                ctx.checkpoint()?;
                let mut volumes = vm.volumes();
                if vm.is_template() {
                    let storages = cluster.storages.get(&ctx.node).into_iter().flatten();
                    for s in storages {
                        if let Some(base) = volumes.iter().find(|volid| {
                            volid
                                .split_once(':')
                                .is_some_and(|(sid, name)| sid == s.id && s.base_in_use(name))
                        }) {
                            return Err(format!(
                                "base volume '{base}' is still in use by linked cloned"
                            ));
                        }
                    }
                }
                let vm = cluster.vm_mut(&ctx.node, vmid)?;
                vm.config = [("lock".to_owned(), "destroyed".to_owned())].into();
                vm.pending.clear();
                vm.pending_delete.clear();
                if unreferenced {
                    for s in cluster.storages.get(&ctx.node).into_iter().flatten() {
                        let owned = s
                            .volumes
                            .values()
                            .filter(|v| v.vmid == Some(vmid))
                            .map(|v| s.volid(&v.volname));
                        volumes.extend(owned.filter(|v| !volumes.contains(v)).collect::<Vec<_>>());
                    }
                }
                volumes
            };
            ctx.sleep(ctx.inst.durations.destroy).await;
            let mut cluster = ctx.inst.cluster();
            for volid in volumes {
                if cluster.free_volume(&ctx.node, &volid) {
                    let name = volid.split_once(':').map_or(volid.as_str(), |(_, n)| n);
                    ctx.log(format!("  Logical volume \"{name}\" successfully removed."));
                }
            }
            let sid = format!("vm:{vmid}");
            cluster.vms.remove(&vmid);
            if purge {
                ctx.log(format!("purging VM {vmid} from related configurations.."));
                if cluster.ha.remove_resource(&sid) {
                    ctx.log(format!(
                        "NOTE: removed VM {vmid} from HA resource configuration."
                    ));
                }
            }
            Ok(())
        },
    ))
}

pub async fn template(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let node = call.params.node().to_owned();
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Allocate"])?;
    {
        let cluster = inst.cluster();
        let vm = cluster.vm(&node, vmid)?;
        check_lock_sync(&call, vm.lock())?;
        if vm.is_template() {
            return Err(ApiError::internal(
                "you can't convert a template to a template",
            ));
        }
        if vm.is_running() {
            return Err(ApiError::internal(
                "you can't convert a VM to template if VM is running",
            ));
        }
    }
    let only = call.params.get("disk").map(str::to_owned);
    Ok(spawn_locked(
        &inst,
        &call,
        "qmtemplate",
        vmid,
        move |ctx| async move {
            ctx.sleep(ctx.inst.durations.config).await;
            ctx.checkpoint()?;
            let mut cluster = ctx.inst.cluster();
            let node = ctx.node.clone();
            let drives = cluster.vm(&node, vmid)?.drives();
            let mut renamed = Vec::new();
            for (key, drive) in drives {
                let Some(file) = drive.get("file") else {
                    continue;
                };
                if key.starts_with("unused")
                    || file.contains("-cloudinit")
                    || drive.get("media").is_some_and(|m| m == "cdrom")
                {
                    continue;
                }
                if only.as_ref().is_some_and(|d| *d != key) {
                    continue;
                }
                let Some((sid, name)) = file.split_once(':') else {
                    continue;
                };
                let Some(storage) = cluster.storage_mut(&node, sid) else {
                    continue;
                };
                let Some(mut vol) = storage.volumes.remove(name) else {
                    continue;
                };
                let base = name.replacen("vm-", "base-", 1);
                vol.volname = base.clone();
                storage.volumes.insert(base.clone(), vol);
                if let StorageKind::LvmThin { vg } = &storage.kind {
                    ctx.log(format!(
                        "  Renamed \"{name}\" to \"{base}\" in volume group \"{vg}\""
                    ));
                    ctx.log(format!("  Logical volume {vg}/{base} changed."));
                }
                renamed.push((key, file.replacen(name, &base, 1)));
            }
            let vm = cluster.vm_mut(&node, vmid)?;
            for (key, new_file) in renamed {
                if let Some(value) = vm.config.get(&key).cloned() {
                    let rest = value
                        .split_once(',')
                        .map(|(_, r)| format!(",{r}"))
                        .unwrap_or_default();
                    vm.config.insert(key, format!("{new_file}{rest}"));
                }
            }
            vm.config.insert("template".into(), "1".into());
            Ok(())
        },
    ))
}

pub async fn resize(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Config.Disk"])?;
    let disk = call.params.get("disk").unwrap_or_default().to_owned();
    let size = call.params.get("size").unwrap_or_default().to_owned();
    check_root_only(&call, &["skiplock"])?;
    let skiplock = call.params.flag("skiplock") == Some(true);
    let digest = call.params.get("digest").map(str::to_owned);
    let caller = call.identity.clone();
    Ok(spawn_locked(
        &inst,
        &call,
        "resize",
        vmid,
        move |ctx| async move {
            let (volid, old, drive) = {
                let cluster = ctx.inst.cluster();
                let vm = cluster.vm(&ctx.node, vmid)?;
                if digest.as_ref().is_some_and(|d| *d != vm.digest()) {
                    return Err("checksum mismatch (file change by other user?)".into());
                }
                if !skiplock {
                    vm.check_lock()?;
                }
                let value = vm
                    .config
                    .get(&disk)
                    .cloned()
                    .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
                let format = qemu::drive_format(&disk)
                    .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
                let drive = format
                    .parse(&disk, &value)
                    .map_err(|e| e.trim_end().to_owned())?;
                if drive.get("media").is_some_and(|m| m == "cdrom") {
                    return Err("you can't resize a cdrom".into());
                }
                let volid = drive.get("file").cloned().unwrap_or_default();
                let (sid, _) = volid
                    .split_once(':')
                    .ok_or_else(|| format!("disk '{disk}' has no associated volume"))?;
                let allowed = ctx.inst.auth.has(
                    &caller,
                    &format!("/storage/{sid}"),
                    "Datastore.AllocateSpace",
                );
                if !allowed {
                    return Err(format!(
                        "Permission check failed (/storage/{sid}, Datastore.AllocateSpace)"
                    ));
                }
                let old = drive.get("size").and_then(|s| parse_size(s)).unwrap_or(0);
                (volid, old, drive)
            };
            let new = match size.strip_prefix('+') {
                Some(delta) => old + parse_size(delta).unwrap_or(0),
                None => parse_size(&size).unwrap_or(0),
            };
            if new < old {
                return Err("shrinking disks is not supported".into());
            }
            ctx.checkpoint()?;
            if new == old {
                return Ok(());
            }
            ctx.sleep(ctx.inst.durations.resize).await;
            let mut cluster = ctx.inst.cluster();
            let node = ctx.node.clone();
            if let Some((sid, name)) = volid.split_once(':')
                && let Some(storage) = cluster.storage_mut(&node, sid)
            {
                let thin = storage.is_thin();
                if let Some(vol) = storage.volumes.get_mut(name) {
                    // A thin volume grows without writing anything.
                    if !thin {
                        vol.size = new;
                    }
                    vol.virtual_size = new;
                }
                if let StorageKind::LvmThin { vg } = &storage.kind {
                    let ext = |b: u64| b.div_ceil(4 << 20);
                    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
                    ctx.log(format!(
                        "  Size of logical volume {vg}/{name} changed from {:.2} GiB ({} extents) to {:.2} GiB ({} extents).",
                        gib(old),
                        ext(old),
                        gib(new),
                        ext(new)
                    ));
                    ctx.log(format!(
                        "  Logical volume {vg}/{name} successfully resized."
                    ));
                }
            }
            let vm = cluster.vm_mut(&node, vmid)?;
            let mut opts = drive;
            opts.remove("file");
            opts.insert("size".into(), format_size(new));
            vm.config
                .insert(disk.clone(), super::disks::print_drive(&volid, &opts));
            Ok(())
        },
    ))
}
