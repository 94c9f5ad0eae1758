//! `GET/POST .../qemu/{vmid}/migrate` (`qmigrate`, `lock: migrate`, local
//! disks copied to the target node, `hamigrate` for HA-managed VMs) and
//! `POST .../move_disk` (`qmmove` under the config flock), after
//! qemu-server's `migrate_vm`, `PVE::QemuMigrate` and `move_vm_disk`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::disks::{allocate, copy_with_progress, print_drive, render_bytes};
use super::{NODE_VMID, spawn_locked};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::{format_size, parse_size};
use crate::schema::{Named, Param, qemu};
use crate::state::{Cluster, Vm};
use crate::tasks::{self, TaskCtx};

mod scan;

pub const MIGRATE: &[&[Param]] = &[
    NODE_VMID,
    &[
        Param::string("target").format(Named::PveNode),
        Param::boolean("online").opt(),
        Param::boolean("force").opt(),
        Param::boolean("with-local-disks").opt(),
        Param::string("targetstorage").opt(),
        Param::string("migration_type")
            .enums(&["secure", "insecure"])
            .opt(),
        Param::string("migration_network").opt(),
        Param::integer("bwlimit").min(0).opt(),
        Param::boolean("with-conntrack-state").opt(),
    ],
];
pub const PRECONDITION: &[&[Param]] = &[
    NODE_VMID,
    &[Param::string("target").format(Named::PveNode).opt()],
];
pub const MOVE_DISK: &[&[Param]] = &[
    NODE_VMID,
    &[
        Param::string("disk").enums(super::lifecycle::DISK_KEYS),
        Param::string("storage").format(Named::PveStorageId).opt(),
        Param::boolean("delete").opt(),
        Param::string("format")
            .enums(&["raw", "qcow2", "vmdk"])
            .opt(),
        Param::string("digest").max_len(40).opt(),
        Param::integer("bwlimit").min(0).opt(),
        Param::integer("target-vmid")
            .format(Named::PveVmid)
            .min(100)
            .max(999_999_999)
            .opt(),
        Param::string("target-digest").max_len(40).opt(),
        Param::string("target-disk").opt(),
    ],
];

/// The volumes of a VM on non-shared storages: (drive key, volid, size).
fn local_disks(cluster: &Cluster, vm: &Vm) -> Vec<(String, String, u64)> {
    vm.drives()
        .into_iter()
        .filter_map(|(key, d)| {
            let file = d.get("file")?.clone();
            let (sid, name) = file.split_once(':')?;
            let s = cluster.storage(&vm.node, sid)?;
            let vol = s.volumes.get(name)?;
            (!s.shared).then_some((key, file.clone(), vol.size))
        })
        .collect()
}

pub async fn precondition(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Migrate"])?;
    let cluster = inst.cluster();
    let vm = cluster.vm(call.params.node(), vmid)?;
    let allowed: Vec<&str> = cluster
        .nodes
        .iter()
        .filter(|n| n.name != vm.node && n.online)
        .map(|n| n.name.as_str())
        .collect();
    let disks: Vec<Value> = local_disks(&cluster, vm)
        .into_iter()
        .map(|(key, volid, size)| {
            let mut d = json!({"volid": volid, "size": size, "drivename": key});
            if key.starts_with("unused") {
                d["is_unused"] = json!(1);
            }
            if vm
                .config
                .get(&key)
                .is_some_and(|v| v.contains("media=cdrom"))
            {
                d["cdrom"] = json!(1);
            }
            d
        })
        .collect();
    let mut res = json!({
        "running": u8::from(vm.is_running()),
        "allowed_nodes": allowed,
        "not_allowed_nodes": {},
        "local_disks": disks,
        "local_resources": [],
        "mapped-resources": [],
        "mapped-resource-info": {},
    });
    if inst.pve_version >= 9 {
        // qemu-server 9 migrates the D-Bus VM state along.
        res["has-dbus-vmstate"] = json!(1);
    }
    Ok(Reply::data(res))
}

pub async fn migrate(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let vmid = p.vmid("vmid");
    let node = p.node().to_owned();
    let target = p.get("target").unwrap_or_default().to_owned();
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Migrate"])?;
    if target == node {
        return Err(ApiError::param("target", "target is local node."));
    }
    for opt in ["force", "migration_type", "migration_network"] {
        if p.has(opt) && !call.identity.is_root() && p.get(opt) != Some("0") {
            return Err(ApiError::param(opt, "Only root may use this option."));
        }
    }
    let (online, ha) = {
        let cluster = inst.cluster();
        if !cluster.has_node(&target) {
            return Err(ApiError::internal(format!(
                "no such cluster node '{target}'"
            )));
        }
        let vm = cluster.vm(&node, vmid)?;
        vm.check_lock().map_err(ApiError::Internal)?;
        let online = vm.is_running();
        if online && p.flag("online") != Some(true) {
            return Err(ApiError::internal(
                "can't migrate running VM without --online",
            ));
        }
        (online, cluster.ha.is_managed(vm))
    };
    if ha {
        return Ok(Reply::data(crate::api::ha::request_migration(
            &inst, &call, &node, vmid, &target,
        )));
    }
    let with_local = p.flag("with-local-disks") == Some(true);
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmigrate",
        &vmid.to_string(),
        move |ctx| async move { run(&ctx, vmid, &target, online, with_local).await },
    );
    Ok(Reply::data(upid))
}

/// A migration as PVE's `QemuMigrate` logs it, timestamped lines.
pub async fn run(
    ctx: &TaskCtx,
    vmid: u32,
    target: &str,
    online: bool,
    with_local: bool,
) -> Result<(), String> {
    let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
    let (disks, memory) = {
        let mut cluster = ctx.inst.cluster();
        let target_ip = cluster
            .node(target)
            .filter(|n| n.online)
            .map(|n| n.ip())
            .ok_or_else(|| {
                "migration aborted: Can't connect to destination address using public key"
                    .to_owned()
            })?;
        let vm = cluster.vm(&ctx.node, vmid)?;
        vm.check_lock()?;
        ctx.log(stamp(&format!(
            "starting migration of VM {vmid} to node '{target}' ({target_ip})"
        )));
        let mut lines = Vec::new();
        let scanned = scan::scan(&cluster, vm, online, with_local, &mut lines);
        for line in &lines {
            ctx.log(stamp(line));
        }
        let disks = scanned.map_err(|e| {
            // phase1 dies; AbstractMigrate logs the error twice and ends the task.
            let err = format!("Problem found while scanning volumes - {e}");
            ctx.log(stamp(&format!("ERROR: {err}")));
            ctx.log(stamp(&format!(
                "ERROR: migration aborted (duration 00:00:00): {err}"
            )));
            "migration aborted".to_owned()
        })?;
        let memory = vm.memory_mib() << 20;
        let vm = cluster.vm_mut(&ctx.node, vmid)?;
        vm.config.insert("lock".into(), "migrate".into());
        (disks, memory)
    };
    let result = transfer(ctx, &disks, online, memory).await;
    let mut cluster = ctx.inst.cluster();
    if let Err(e) = result {
        if let Ok(vm) = cluster.vm_mut(&ctx.node, vmid) {
            vm.config.remove("lock");
        }
        return Err(format!("migration problems: {e}"));
    }
    for disk in &disks {
        let (sid, name) = disk.volid.split_once(':').unwrap_or_default();
        let vol = cluster
            .storage_mut(&ctx.node, sid)
            .and_then(|s| s.volumes.remove(name));
        if let (Some(vol), Some(dest)) = (vol, cluster.storage_mut(target, sid)) {
            dest.volumes.insert(name.to_owned(), vol);
        }
    }
    let vm = cluster.vm_mut(&ctx.node, vmid)?;
    vm.config.remove("lock");
    vm.node = target.to_owned();
    ctx.log(stamp("migration finished successfully (duration 00:00:05)"));
    Ok(())
}

async fn transfer(
    ctx: &TaskCtx,
    disks: &[scan::LocalVolume],
    online: bool,
    memory: u64,
) -> Result<(), String> {
    if !disks.is_empty() {
        ctx.log(stamp("copying local disk images"));
        for disk in disks {
            let volid = &disk.volid;
            ctx.log(stamp(&format!(
                "volume '{volid}' is '{volid}' on the target"
            )));
            copy_with_progress(ctx, disk.size, None)
                .await
                .map_err(|_| format!("storage migration for '{volid}' failed"))?;
        }
    }
    if online {
        ctx.log(stamp(
            "starting online/live migration on unix:/run/qemu-server/migrate",
        ));
        // QemuMigrate polls query-migrate and logs the memory transferred
        // so far (no percentage), then the completion summary.
        let rate = ctx.inst.durations.import_bytes_per_sec.max(1);
        let step = Duration::from_secs_f64(memory as f64 / rate as f64 / 10.0);
        let total_h = render_bytes(memory);
        for tenth in 1..=9u64 {
            ctx.sleep(step).await;
            ctx.log(stamp(&format!(
                "migration active, transferred {} of {total_h} VM-state, {}/s",
                render_bytes(memory / 10 * tenth),
                render_bytes(rate)
            )));
        }
        ctx.sleep(step).await;
        ctx.log(stamp(&format!(
            "migration completed, transferred {} VM-state",
            render_bytes(memory)
        )));
        ctx.log(stamp("migration status: completed"));
    } else {
        ctx.sleep(ctx.inst.durations.config).await;
    }
    ctx.checkpoint()
}

pub async fn move_disk(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let vmid = p.vmid("vmid");
    let node = p.node().to_owned();
    let disk = p.get("disk").unwrap_or_default().to_owned();
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Config.Disk"])?;
    let Some(storage) = p.get("storage").map(str::to_owned) else {
        if p.has("target-vmid") {
            return Err(ApiError::NotImplemented(format!(
                "{}: disk reassignment to another VM",
                crate::api::generic::NOT_SIMULATED
            )));
        }
        let msg = "both 'storage' and 'target-vmid' missing, either needs to be set";
        return Err(ApiError::Param(
            [
                ("target-vmid".into(), msg.into()),
                ("storage".into(), msg.into()),
            ]
            .into(),
        ));
    };
    inst.auth.check(
        &call.identity,
        &format!("/storage/{storage}"),
        &["Datastore.AllocateSpace"],
    )?;
    let delete = p.flag("delete") == Some(true);
    let digest = p.get("digest").map(str::to_owned);
    let check = {
        let node = node.clone();
        let disk = disk.clone();
        let storage = storage.clone();
        move |cluster: &Cluster| -> Result<(String, u64), String> {
            let vm = cluster.vm(&node, vmid)?;
            vm.check_lock()?;
            if digest.as_ref().is_some_and(|d| *d != vm.digest()) {
                return Err(
                    "detected modified configuration - file changed by other user? Try again."
                        .into(),
                );
            }
            let value = vm
                .config
                .get(&disk)
                .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
            if super::is_cdrom(value) {
                return Err("you can't move a cdrom".into());
            }
            let volid = value.split(',').next().unwrap_or_default().to_owned();
            if volid.split_once(':').map(|(s, _)| s) == Some(storage.as_str()) {
                return Err("you can't move to the same storage with same format".into());
            }
            let size = value
                .split(',')
                .find_map(|o| o.strip_prefix("size="))
                .and_then(parse_size)
                .unwrap_or(0);
            Ok((volid, size))
        }
    };
    {
        let cluster = inst.cluster();
        check(&cluster).map_err(ApiError::Internal)?;
        crate::api::qemu::disks::check_images_storage(&cluster, &node, &storage)?;
    }
    Ok(spawn_locked(
        &inst,
        &call,
        "qmmove",
        vmid,
        move |ctx| async move {
            let (old, size) = check(&ctx.inst.cluster())?;
            let old_sid = old.split_once(':').map_or("", |(s, _)| s);
            ctx.log(format!(
            "copying volume '{old}' from current storage '{old_sid}' to target storage '{storage}'"
        ));
            ctx.log(format!("create full clone of drive {disk} ({old})"));
            let mut created = Vec::new();
            let volid = allocate(&ctx, &storage, vmid, None, size, &mut created)?;
            if copy_with_progress(&ctx, size, None).await.is_err() || ctx.checkpoint().is_err() {
                let mut cluster = ctx.inst.cluster();
                cluster.free_volume(&ctx.node, &volid);
                return Err(format!("storage migration failed: copy of '{old}' failed"));
            }
            let data = ctx
                .inst
                .cluster()
                .volume(&ctx.node, &old)
                .map_or(size, |(_, v)| v.size);
            if let Err(e) = crate::api::qemu::disks::wrote(&ctx, &volid, data) {
                ctx.inst.cluster().free_volume(&ctx.node, &volid);
                return Err(format!("storage migration failed: {e}"));
            }
            let mut cluster = ctx.inst.cluster();
            let vm = cluster.vm_mut(&ctx.node, vmid)?;
            let value = vm.config.get(&disk).cloned().unwrap_or_default();
            let mut opts = qemu::drive_format(&disk)
                .and_then(|f| f.parse(&disk, &value).ok())
                .unwrap_or_default();
            opts.remove("file");
            opts.insert("size".into(), format_size(size));
            vm.config.insert(disk.clone(), print_drive(&volid, &opts));
            if delete {
                ctx.log(format!(
                    "removing source volume '{old}' after successful copy"
                ));
                cluster.free_volume(&ctx.node, &old);
            } else {
                let slot = (0..256)
                    .map(|i| format!("unused{i}"))
                    .find(|k| !vm.config.contains_key(k))
                    .unwrap_or_default();
                ctx.log(format!(
                    "adding source volume '{old}' as '{slot}' to config"
                ));
                vm.config.insert(slot, old);
            }
            Ok(())
        },
    ))
}

/// Migration log lines carry a timestamp.
fn stamp(msg: &str) -> String {
    format!("{} {msg}", crate::api::download::wget_time())
}
