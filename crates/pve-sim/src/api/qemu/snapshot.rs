//! `.../{qemu,lxc}/{vmid}/snapshot`: list, create (`qmsnapshot`/
//! `vzsnapshot`, `lock: snapshot`), rollback (`qmrollback`/`vzrollback`,
//! `lock: rollback`), delete (`qmdelsnapshot`/`vzdelsnapshot`, `lock:
//! snapshot-delete`) and the snapshot's config, after pve-guest-common's
//! `AbstractConfig` snapshot functions, which qemu-server and pve-container
//! share. A container has no `vmstate` (pve-container's create takes no
//! such parameter, so the schema refuses it); a rollback stops a running
//! guest and starts it again only with `start` or, for a VM, from a
//! snapshot with RAM.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{NODE_VMID, spawn_locked};
use crate::clock::Clock;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::{Named, Param};
use crate::state::StorageKind;
use crate::state::vm::GuestKind;
use crate::state::vm::Snapshot;
use crate::tasks::TaskCtx;

const SNAPNAME: Param = Param::string("snapname")
    .format(Named::PveConfigid)
    .max_len(40);
pub const CREATE: &[&[Param]] = &[
    NODE_VMID,
    &[
        SNAPNAME,
        Param::string("description").opt(),
        Param::boolean("vmstate").opt(),
    ],
];
/// A container's create: no `vmstate`.
pub const CREATE_CT: &[&[Param]] = &[NODE_VMID, &[SNAPNAME, Param::string("description").opt()]];
pub const ONE: &[&[Param]] = &[NODE_VMID, &[SNAPNAME]];
pub const ROLLBACK: &[&[Param]] = &[NODE_VMID, &[SNAPNAME, Param::boolean("start").opt()]];
pub const DELETE: &[&[Param]] = &[NODE_VMID, &[SNAPNAME, Param::boolean("force").opt()]];
pub const UPDATE: &[&[Param]] = &[NODE_VMID, &[SNAPNAME, Param::string("description").opt()]];

fn vm_path(call: &Call) -> String {
    format!("/vms/{}", call.params.vmid("vmid"))
}

/// The task type of `what` (`snapshot`, `rollback`, `delsnapshot`) on a
/// guest of `kind`: `qm...` or `vz...`.
fn task_type(kind: GuestKind, what: &str) -> String {
    match kind {
        GuestKind::Qemu => format!("qm{what}"),
        GuestKind::Lxc => format!("vz{what}"),
    }
}

/// The handlers of one guest kind (`QEMU` and `LXC` below).
macro_rules! handlers {
    ($module:ident, $kind:expr) => {
        pub mod $module {
            use std::sync::Arc;

            use crate::http::{ApiError, Call, Reply};
            use crate::instance::Instance;

            pub async fn list(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
                super::list(inst, call, $kind).await
            }
            pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
                super::index(inst, call, $kind).await
            }
            pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
                super::create(inst, call, $kind).await
            }
            pub async fn rollback(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
                super::rollback(inst, call, $kind).await
            }
            pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
                super::delete(inst, call, $kind).await
            }
            pub async fn config_get(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
                super::config_get(inst, call, $kind).await
            }
            pub async fn config_put(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
                super::config_put(inst, call, $kind).await
            }
        }
    };
}
handlers!(qemu, super::GuestKind::Qemu);
handlers!(lxc, super::GuestKind::Lxc);

pub async fn list(inst: Arc<Instance>, call: Call, kind: GuestKind) -> Result<Reply, ApiError> {
    inst.auth
        .check(&call.identity, &vm_path(&call), &["VM.Audit"])?;
    let cluster = inst.cluster();
    let vm = cluster.guest(call.params.node(), call.params.vmid("vmid"), kind)?;
    let mut out: Vec<Value> = vm
        .snapshots
        .iter()
        .map(|(name, s)| {
            let mut v = json!({
                "name": name,
                "snaptime": s.snaptime,
                "vmstate": u8::from(s.vmstate),
                "description": s.description,
            });
            if let Some(p) = &s.parent {
                v["parent"] = json!(p);
            }
            v
        })
        .collect();
    let mut current = json!({
        "name": "current",
        "digest": vm.digest(),
        "running": u8::from(vm.is_running()),
        "description": "You are here!",
    });
    if let Some(p) = vm.config.get("parent") {
        current["parent"] = json!(p);
    }
    out.push(current);
    Ok(Reply::data(out))
}

pub async fn index(inst: Arc<Instance>, call: Call, kind: GuestKind) -> Result<Reply, ApiError> {
    let cluster = inst.cluster();
    cluster.guest(call.params.node(), call.params.vmid("vmid"), kind)?;
    Ok(Reply::data(json!([{"cmd": "rollback"}, {"cmd": "config"}])))
}

fn snapname(call: &Call) -> String {
    call.params.get("snapname").unwrap_or_default().to_owned()
}

pub async fn create(inst: Arc<Instance>, call: Call, kind: GuestKind) -> Result<Reply, ApiError> {
    inst.auth
        .check(&call.identity, &vm_path(&call), &["VM.Snapshot"])?;
    let name = snapname(&call);
    if name == "current" {
        return Err(ApiError::internal(
            "unable to use snapshot name 'current' (reserved name)",
        ));
    }
    if name.eq_ignore_ascii_case("pending") {
        return Err(ApiError::internal(
            "unable to use snapshot name 'pending' (reserved name)",
        ));
    }
    let vmid = call.params.vmid("vmid");
    inst.cluster().guest(call.params.node(), vmid, kind)?;
    let description = call
        .params
        .get("description")
        .unwrap_or_default()
        .to_owned();
    let vmstate = call.params.flag("vmstate") == Some(true);
    Ok(spawn_locked(
        &inst,
        &call,
        &task_type(kind, "snapshot"),
        vmid,
        move |ctx| async move {
            let config = {
                let mut cluster = ctx.inst.cluster();
                let vm = cluster.guest_mut(&ctx.node, vmid, kind)?;
                vm.check_lock()?;
                if vm.snapshots.contains_key(&name) {
                    return Err(format!("snapshot name '{name}' already used"));
                }
                vm.config.insert("lock".into(), "snapshot".into());
                let mut config = vm.config.clone();
                config.remove("lock");
                config
            };
            let result = take_disk_snapshots(&ctx, (vmid, kind), &name, &config, vmstate).await;
            let mut cluster = ctx.inst.cluster();
            let vm = cluster.guest_mut(&ctx.node, vmid, kind)?;
            vm.config.remove("lock");
            result?;
            let parent = config.get("parent").cloned();
            vm.snapshots.insert(
                name.clone(),
                Snapshot {
                    config,
                    snaptime: Clock::epoch_secs(),
                    description,
                    parent,
                    vmstate,
                },
            );
            vm.config.insert("parent".into(), name);
            Ok(())
        },
    ))
}

/// Logs the disk snapshots as `qemu-img`/LVM would; `vmstate` saves RAM first.
async fn take_disk_snapshots(
    ctx: &TaskCtx,
    (vmid, kind): (u32, GuestKind),
    name: &str,
    config: &BTreeMap<String, String>,
    vmstate: bool,
) -> Result<(), String> {
    if vmstate {
        ctx.log("saving VM state and RAM using storage 'local-lvm'");
        ctx.sleep(ctx.inst.durations.config * 3).await;
        ctx.log("completed saving the VM state in 3s, saved 1.02 GiB");
    }
    let disks = {
        let cluster = ctx.inst.cluster();
        let vm = cluster.guest(&ctx.node, vmid, kind)?;
        vm.drives()
            .into_iter()
            .filter(|(k, d)| {
                !k.starts_with("unused")
                    && d.get("media").is_none_or(|m| m != "cdrom")
                    && config.contains_key(k)
            })
            .filter_map(|(k, d)| d.get("file").cloned().map(|f| (k, f)))
            .filter(|(_, f)| f.contains(':'))
            .map(|(k, f)| {
                let lvm = f
                    .split_once(':')
                    .and_then(|(sid, _)| cluster.storage(&ctx.node, sid))
                    .and_then(|s| match &s.kind {
                        StorageKind::LvmThin { .. } => Some(()),
                        StorageKind::Dir { .. } => None,
                    })
                    .is_some();
                (k, f, lvm)
            })
            .collect::<Vec<_>>()
    };
    for (key, volid, lvm) in disks {
        ctx.log(format!("snapshotting 'drive-{key}' ({volid})"));
        if lvm {
            let vol = volid.split_once(':').map_or("", |(_, v)| v);
            ctx.log(format!("  Logical volume \"snap_{vol}_{name}\" created."));
        }
    }
    ctx.sleep(ctx.inst.durations.config).await;
    ctx.checkpoint()
}

pub async fn rollback(inst: Arc<Instance>, call: Call, kind: GuestKind) -> Result<Reply, ApiError> {
    let path = vm_path(&call);
    inst.auth.check(
        &call.identity,
        &path,
        &["VM.Snapshot", "VM.Snapshot.Rollback"],
    )?;
    let start = call.params.flag("start") == Some(true);
    if start {
        inst.auth.check(&call.identity, &path, &["VM.PowerMgmt"])?;
    }
    let vmid = call.params.vmid("vmid");
    let name = snapname(&call);
    Ok(spawn_locked(
        &inst,
        &call,
        &task_type(kind, "rollback"),
        vmid,
        move |ctx| async move {
            {
                let mut cluster = ctx.inst.cluster();
                let vm = cluster.guest_mut(&ctx.node, vmid, kind)?;
                if !vm.snapshots.contains_key(&name) {
                    return Err(format!("can't rollback, snapshot '{name}' does not exist"));
                }
                vm.check_lock()?;
                vm.config.insert("lock".into(), "rollback".into());
                if vm.is_running() {
                    vm.running = None;
                }
            }
            ctx.sleep(ctx.inst.durations.config).await;
            let restart = {
                let mut cluster = ctx.inst.cluster();
                let vm = cluster.guest_mut(&ctx.node, vmid, kind)?;
                let snap = vm.snapshots.get(&name).cloned().unwrap_or_default();
                vm.config = snap.config;
                vm.pending.clear();
                vm.pending_delete.clear();
                vm.config.insert("parent".into(), name.clone());
                start || snap.vmstate
            };
            {
                let mut cluster = ctx.inst.cluster();
                cluster
                    .guest_mut(&ctx.node, vmid, kind)?
                    .config
                    .remove("lock");
            }
            ctx.checkpoint()?;
            match (restart, kind) {
                (false, _) => {}
                (true, GuestKind::Qemu) => super::power::start_unlocked(&ctx, vmid).await?,
                (true, GuestKind::Lxc) => crate::api::lxc::start_unlocked(&ctx, vmid).await?,
            }
            Ok(())
        },
    ))
}

pub async fn delete(inst: Arc<Instance>, call: Call, kind: GuestKind) -> Result<Reply, ApiError> {
    inst.auth
        .check(&call.identity, &vm_path(&call), &["VM.Snapshot"])?;
    let vmid = call.params.vmid("vmid");
    let name = snapname(&call);
    let force = call.params.flag("force") == Some(true);
    Ok(spawn_locked(
        &inst,
        &call,
        &task_type(kind, "delsnapshot"),
        vmid,
        move |ctx| async move {
            {
                let mut cluster = ctx.inst.cluster();
                let vm = cluster.guest_mut(&ctx.node, vmid, kind)?;
                if !vm.snapshots.contains_key(&name) {
                    return Err(format!("snapshot '{name}' does not exist"));
                }
                if !force {
                    vm.check_lock()?;
                }
                vm.config.insert("lock".into(), "snapshot-delete".into());
            }
            ctx.sleep(ctx.inst.durations.config).await;
            let mut cluster = ctx.inst.cluster();
            let vm = cluster.guest_mut(&ctx.node, vmid, kind)?;
            vm.config.remove("lock");
            ctx.checkpoint()?;
            let removed = vm.snapshots.remove(&name).unwrap_or_default();
            for s in vm.snapshots.values_mut() {
                if s.parent.as_deref() == Some(name.as_str()) {
                    s.parent = removed.parent.clone();
                }
            }
            if vm.config.get("parent") == Some(&name) {
                match removed.parent {
                    Some(p) => vm.config.insert("parent".into(), p),
                    None => vm.config.remove("parent"),
                };
            }
            Ok(())
        },
    ))
}

pub async fn config_get(
    inst: Arc<Instance>,
    call: Call,
    kind: GuestKind,
) -> Result<Reply, ApiError> {
    inst.auth
        .check(&call.identity, &vm_path(&call), &["VM.Audit"])?;
    let name = snapname(&call);
    let cluster = inst.cluster();
    let vm = cluster.guest(call.params.node(), call.params.vmid("vmid"), kind)?;
    let snap = vm
        .snapshots
        .get(&name)
        .ok_or_else(|| ApiError::internal(format!("snapshot '{name}' does not exist")))?;
    let mut v = json!(snap.config);
    v["snaptime"] = json!(snap.snaptime);
    v["description"] = json!(snap.description);
    if let Some(p) = &snap.parent {
        v["parent"] = json!(p);
    }
    Ok(Reply::data(v))
}

pub async fn config_put(
    inst: Arc<Instance>,
    call: Call,
    kind: GuestKind,
) -> Result<Reply, ApiError> {
    inst.auth
        .check(&call.identity, &vm_path(&call), &["VM.Snapshot"])?;
    let name = snapname(&call);
    let mut cluster = inst.cluster();
    let vm = cluster.guest_mut(call.params.node(), call.params.vmid("vmid"), kind)?;
    let snap = vm
        .snapshots
        .get_mut(&name)
        .ok_or_else(|| ApiError::internal(format!("snapshot '{name}' does not exist")))?;
    if let Some(d) = call.params.get("description") {
        snap.description = d.to_owned();
    }
    Ok(Reply::null())
}
