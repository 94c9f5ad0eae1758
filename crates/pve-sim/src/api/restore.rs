//! A guest created from a vzdump archive: `POST /nodes/{node}/qemu` with
//! `archive=<volid>` (`qmrestore`, qemu-server's `create_vm` and
//! `restore_file_archive`) and `POST /nodes/{node}/lxc` with
//! `ostemplate=<volid>` and `restore=1` (`vzrestore`).
//!
//! As PVE: `VM.Allocate` on the guest (or its pool), or, to restore over an
//! existing guest with `force`, `VM.Backup` on it; reading the archive needs
//! `Datastore.Allocate` on its storage or `Datastore.AllocateSpace` there and
//! `VM.Backup` on the guest it was taken of; a VM's drives conflict with
//! `archive`; an existing VMID is refused without `force` (`unable to
//! restore VM 100 - VM 100 already exists on node 'pve1'`). The task
//! allocates each archived disk anew (on `storage`; without it a VM's where
//! it was, a container's on `local`, as pve-container) with the contents it
//! held, and writes the archived config without `lock`,
//! `parent` and unused volumes, a new `vmgenid`, new MAC addresses and
//! SMBIOS UUID with `unique`, and the call's other options over it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::qemu::disks::{allocate, copy_with_progress, set_contents, wrote};
use super::qemu::settle_new_vm;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::storage::ArchivedDisk;
use crate::state::{GuestKind, Vm};
use crate::tasks::{self, TaskCtx};

/// The restore parameters of `POST /nodes/{node}/qemu`.
pub const QEMU: &[Param] = &[
    Param::string("archive").max_len(255).opt(),
    Param::boolean("force").requires("archive").opt(),
    Param::boolean("unique").requires("archive").opt(),
];

/// What a restore recreates.
struct Plan {
    vmid: u32,
    kind: GuestKind,
    archive: String,
    storage: Option<String>,
    unique: bool,
    config: BTreeMap<String, String>,
    disks: BTreeMap<String, ArchivedDisk>,
    overrides: Vec<(String, String)>,
    /// The existing guest's volumes, replaced with `force`.
    replaced: Vec<String>,
}

fn kind_name(kind: GuestKind) -> &'static str {
    match kind {
        GuestKind::Qemu => "VM",
        GuestKind::Lxc => "CT",
    }
}

/// Starts a restore of `archive` into the call's VMID as a guest of
/// `kind`; `overrides` are the call's guest options, set over the
/// archived config.
pub fn start(
    inst: &Arc<Instance>,
    call: &Call,
    kind: GuestKind,
    archive: &str,
    overrides: Vec<(String, String)>,
) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node().to_owned();
    let vmid = p.vmid("vmid");
    let id = &call.identity;
    let force = p.flag("force") == Some(true);
    let name = kind_name(kind);
    let exists = inst.cluster().vms.contains_key(&vmid);
    let vm_path = format!("/vms/{vmid}");
    let allowed = inst.auth.has(id, &vm_path, "VM.Allocate")
        || p.get("pool")
            .is_some_and(|pool| inst.auth.has(id, &format!("/pool/{pool}"), "VM.Allocate"))
        || (force && exists && inst.auth.has(id, &vm_path, "VM.Backup"));
    if !allowed {
        return Err(ApiError::Forbidden(None));
    }
    if let Some(storage) = p.get("storage") {
        inst.auth.check(
            id,
            &format!("/storage/{storage}"),
            &["Datastore.AllocateSpace"],
        )?;
    }
    let (backup, archive_storage, owner) = {
        let cluster = inst.cluster();
        let (storage, vol) = cluster
            .volume(&node, archive)
            .filter(|(_, v)| v.content == "backup")
            .ok_or_else(|| ApiError::internal(format!("volume '{archive}' does not exist")))?;
        let backup = vol
            .backup
            .clone()
            .ok_or_else(|| ApiError::internal(format!("volume '{archive}' is not a backup")))?;
        (backup, storage.id.clone(), vol.vmid)
    };
    // `check_volume_access` for a backup volume.
    let storage_path = format!("/storage/{archive_storage}");
    if !inst.auth.has(id, &storage_path, "Datastore.Allocate") {
        inst.auth
            .check(id, &storage_path, &["Datastore.AllocateSpace"])?;
        if let Some(owner) = owner {
            inst.auth
                .check(id, &format!("/vms/{owner}"), &["VM.Backup"])?;
        }
    }
    if backup.subtype != kind {
        return Err(ApiError::internal(format!(
            "unable to restore {name} {vmid} - archive '{archive}' is a {} backup",
            backup.subtype.type_name()
        )));
    }
    let replaced = {
        let mut cluster = inst.cluster();
        let replaced = match cluster.vms.get(&vmid) {
            Some(existing) if !force || existing.node != node || existing.kind != kind => {
                return Err(ApiError::internal(format!(
                    "unable to restore {name} {vmid} - {} {vmid} already exists on node '{}'",
                    kind_name(existing.kind),
                    existing.node
                )));
            }
            Some(existing) => {
                existing.check_lock().map_err(|e| {
                    ApiError::internal(format!("unable to restore {name} {vmid} - {e}"))
                })?;
                if existing.is_running() {
                    return Err(ApiError::internal(format!(
                        "unable to restore {name} {vmid} - {} is running",
                        name.to_lowercase()
                    )));
                }
                existing.volumes()
            }
            None => Vec::new(),
        };
        let mut placeholder = Vm::locked(vmid, &node, "create");
        placeholder.kind = kind;
        placeholder.pool = p.get("pool").map(str::to_owned);
        cluster.vms.insert(vmid, placeholder);
        replaced
    };
    let plan = Plan {
        vmid,
        kind,
        archive: archive.to_owned(),
        // pve-container restores a container's volumes to `storage`, else
        // to `local` (`extract_param($param, 'storage') // 'local'`);
        // qemu-server puts a VM's where the archive says they were.
        storage: p.get("storage").map(str::to_owned).or_else(|| match kind {
            GuestKind::Lxc => Some("local".to_owned()),
            GuestKind::Qemu => None,
        }),
        unique: p.flag("unique") == Some(true),
        config: backup.config.clone(),
        disks: backup.disks.clone(),
        overrides,
        replaced,
    };
    let task_type = match kind {
        GuestKind::Qemu => "qmrestore",
        GuestKind::Lxc => "vzrestore",
    };
    let upid = tasks::spawn(
        inst,
        call,
        &node,
        task_type,
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = match ctx.flock(vmid, Duration::from_secs(1)).await {
                Ok(flock) => flock,
                Err(e) => return settle_new_vm(&ctx, vmid, Err(e), Vec::new()),
            };
            let replaced = plan.replaced.clone();
            let mut created = Vec::new();
            let built = build(&ctx, plan, &mut created).await;
            let ok = built.is_ok();
            let result = settle_new_vm(&ctx, vmid, built, created);
            if ok {
                let mut cluster = ctx.inst.cluster();
                for volid in replaced {
                    cluster.free_volume(&ctx.node, &volid);
                }
            }
            result.map_err(|e| format!("unable to restore {name} {vmid} - {e}"))
        },
    );
    Ok(Reply::data(upid))
}

async fn build(
    ctx: &TaskCtx,
    plan: Plan,
    created: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, String> {
    let vmid = plan.vmid;
    ctx.log(format!("restore vma archive: {}", plan.archive));
    let mut new_volids = BTreeMap::new();
    for (key, disk) in &plan.disks {
        let target = plan.storage.clone().unwrap_or_else(|| disk.storage.clone());
        let volid = allocate(ctx, &target, vmid, None, disk.size, created)?;
        ctx.log(format!("new volume ID is '{volid}'"));
        new_volids.insert(key.clone(), volid);
    }
    let data: u64 = plan.disks.values().map(|d| d.data).sum();
    copy_with_progress(ctx, data.max(1 << 20), None)
        .await
        .map_err(|at| format!("restore failed at byte {at}"))?;
    ctx.checkpoint()?;
    for (key, disk) in &plan.disks {
        let volid = &new_volids[key];
        wrote(ctx, volid, disk.data)?;
        set_contents(ctx, volid, disk.contents.clone());
    }
    let mut config = plan.config;
    config.retain(|k, _| k != "lock" && k != "parent" && !k.starts_with("unused"));
    for (key, volid) in &new_volids {
        if let Some(value) = config.get_mut(key) {
            *value = with_volume(value, volid);
        }
    }
    if plan.kind == GuestKind::Qemu
        && let Some(vmgenid) = config.get_mut("vmgenid")
        && vmgenid != "0"
    {
        *vmgenid = ctx.inst.random_uuid();
    }
    if plan.unique {
        make_unique(ctx, plan.kind, &mut config);
    }
    for (key, value) in plan.overrides {
        config.insert(key, value);
    }
    ctx.log("rescan volumes...");
    Ok(config)
}

/// A disk's config value with another volume: `local-lvm:vm-101-disk-0,
/// size=4G` for `local-lvm:vm-100-disk-0,size=4G`.
fn with_volume(value: &str, volid: &str) -> String {
    match value.split_once(',') {
        Some((first, rest))
            if !first.contains('=')
                || first.starts_with("volume=")
                || first.starts_with("file=") =>
        {
            format!("{volid},{rest}")
        }
        Some(_) => value.to_owned(),
        None => volid.to_owned(),
    }
}

/// `unique`: new MAC addresses and, for a VM, a new SMBIOS UUID.
fn make_unique(ctx: &TaskCtx, kind: GuestKind, config: &mut BTreeMap<String, String>) {
    for (key, value) in config.iter_mut() {
        if key.starts_with("net") {
            *value = value
                .split(',')
                .map(|part| match (kind, part.split_once('=')) {
                    (GuestKind::Lxc, Some(("hwaddr", _))) => {
                        format!("hwaddr={}", ctx.inst.random_mac())
                    }
                    (GuestKind::Qemu, Some((model, mac)))
                        if mac.len() == 17 && mac.contains(':') =>
                    {
                        format!("{model}={}", ctx.inst.random_mac())
                    }
                    _ => part.to_owned(),
                })
                .collect::<Vec<_>>()
                .join(",");
        }
    }
    if kind == GuestKind::Qemu {
        config.insert("smbios1".into(), format!("uuid={}", ctx.inst.random_uuid()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_disk_names_its_new_volume() {
        assert_eq!(
            with_volume(
                "local-lvm:vm-100-disk-0,iothread=1,size=4G",
                "local-lvm:vm-101-disk-0"
            ),
            "local-lvm:vm-101-disk-0,iothread=1,size=4G"
        );
        assert_eq!(
            with_volume("local-lvm:vm-100-disk-0", "local-lvm:vm-101-disk-0"),
            "local-lvm:vm-101-disk-0"
        );
    }
}
