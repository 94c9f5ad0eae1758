//! `customCloudInit`: the seed ISO named by the digest of its data is
//! uploaded, attached as a CD-ROM (through the drift of its slot), older
//! seed ISOs of the VM are deleted once the VM no longer uses them, and all
//! of them go with the VM.
//!
//! Naming the ISO by its content makes a change of the data a new ISO:
//! nothing is overwritten while a VM may read it, and a lost status write
//! or a restart finds the same name again.

use pve_client::vm::{DriveFile, DriveKey};

use super::compare::Want;
use super::context::Ctx;
use super::decision::Out;
use super::input::{ObservedVm, Power, VmConfig};
use super::output::{ConfigChanges, PveCall};
use crate::reconcile::vm::nocloud::SeedFiles;

/// The file name prefix of VM `vmid`'s seed ISOs.
pub fn seed_prefix(vmid: u32) -> String {
    format!("crossplane-ci-{vmid}-")
}

/// The seed's files, once read (with a default `meta-data`).
fn files(ctx: &Ctx) -> Option<SeedFiles> {
    ctx.spec.custom_cloud_init.as_ref()?;
    let data = ctx.obs.seed.as_ref()?.data.as_ref().ok()?;
    Some(data.clone().with_default_meta_data(&ctx.vm_name()))
}

/// The ISO's file name and volume ID for these files.
fn named(ctx: &Ctx, files: &SeedFiles) -> Option<(String, String)> {
    let spec = ctx.spec.custom_cloud_init.as_ref()?;
    let vmid = ctx.vmid()?;
    let filename = format!("{}{}.iso", seed_prefix(vmid), &files.digest()[..16]);
    let volume = format!("{}:iso/{filename}", spec.storage);
    Some((filename, volume))
}

/// The CD-ROM the spec wants, once its ISO is on the storage.
pub(super) fn want(ctx: &Ctx) -> Result<Option<Want>, String> {
    let (Some(spec), Some(view)) = (&ctx.spec.custom_cloud_init, &ctx.obs.seed) else {
        return Ok(None);
    };
    let Some((_, volume)) = files(ctx).and_then(|f| named(ctx, &f)) else {
        return Ok(None);
    };
    if !view.volumes.contains(&volume) {
        return Ok(None);
    }
    let slot: DriveKey = spec
        .drive_slot
        .parse()
        .map_err(|e| format!("customCloudInit.driveSlot: {e}"))?;
    let file: DriveFile = volume
        .parse()
        .map_err(|e| format!("customCloudInit.storage: {e}"))?;
    Ok(Some(Want::Cdrom { slot, file }))
}

/// Why the seed cannot be built (a missing Secret, ConfigMap or key).
pub(super) fn unreadable(ctx: &Ctx) -> Option<String> {
    ctx.spec.custom_cloud_init.as_ref()?;
    let why = ctx.obs.seed.as_ref()?.data.as_ref().err()?;
    Some(format!("customCloudInit {why}"))
}

/// The upload of the wanted ISO, when `node`'s storage lacks it (any node
/// when `None`).
pub(super) fn upload(ctx: &Ctx, node: Option<&str>) -> Option<(String, PveCall)> {
    let spec = ctx.spec.custom_cloud_init.as_ref()?;
    let view = ctx.obs.seed.as_ref()?;
    if node.is_some_and(|n| n != view.node) {
        return None;
    }
    let files = files(ctx)?;
    let (filename, volume) = named(ctx, &files)?;
    if view.volumes.contains(&volume) {
        return None;
    }
    Some((
        format!("uploading the cloud-init seed ISO {volume}"),
        PveCall::UploadSeed {
            node: view.node.clone(),
            storage: spec.storage.clone(),
            filename,
            files,
        },
    ))
}

/// The deletion of a seed ISO of the VM that its config no longer names
/// (neither as it runs nor pending).
pub(super) fn cleanup(ctx: &Ctx, vm: &ObservedVm, config: &VmConfig) -> Option<(String, PveCall)> {
    let spec = ctx.spec.custom_cloud_init.as_ref()?;
    let view = ctx.obs.seed.as_ref()?;
    let (_, wanted) = files(ctx).and_then(|f| named(ctx, &f))?;
    let used = |volume: &str| {
        let names = |v: &str| v.split(',').next() == Some(volume);
        config.current.values().any(|v| names(v))
            || config.pending.values().flatten().any(|v| names(v))
    };
    let stale = view.volumes.iter().find(|v| **v != wanted && !used(v))?;
    Some((
        format!("deleting the old cloud-init seed ISO {stale}"),
        PveCall::DeleteVolume {
            node: vm.node.clone(),
            storage: spec.storage.clone(),
            volume: stale.clone(),
        },
    ))
}

/// Whether `changes` attach another seed ISO.
pub(super) fn attaches(ctx: &Ctx, changes: &ConfigChanges) -> bool {
    ctx.spec.custom_cloud_init.as_ref().is_some_and(|spec| {
        spec.drive_slot
            .parse::<DriveKey>()
            .is_ok_and(|slot| changes.set.disks.contains_key(&slot))
    })
}

/// Records the running QEMU process when a step changes the seed, and
/// lists `customCloudInit` in `pendingChanges` while that process runs:
/// the guest reads its seed at boot.
pub(super) fn pending(ctx: &Ctx, out: &mut Out, vm: &ObservedVm, changing: bool) {
    let pid = ctx
        .obs
        .seed
        .as_ref()
        .and_then(|s| s.pid)
        .filter(|_| vm.power == Power::Running);
    let at = &mut out.status.at_provider;
    if changing {
        at.seed_changed_under_pid = pid;
    }
    let listed = at.pending_changes.iter().any(|c| c == PENDING);
    match (at.seed_changed_under_pid, pid) {
        (Some(then), Some(now)) if then == now && !listed => {
            at.pending_changes.push(PENDING.to_owned());
        }
        (Some(then), Some(now)) if then == now => {}
        // Started again (or stopped): the guest reads the new seed.
        (Some(_), _) if ctx.obs.seed.is_some() => at.seed_changed_under_pid = None,
        (Some(_), _) | (None, _) => {}
    }
}

/// The `pendingChanges` entry of a seed the guest has not read yet.
const PENDING: &str = "customCloudInit";

/// Once the VM is gone: the deletion of a seed ISO left behind.
pub(super) fn leftover(ctx: &Ctx) -> Option<(String, PveCall)> {
    let spec = ctx.spec.custom_cloud_init.as_ref()?;
    let view = ctx.obs.seed.as_ref()?;
    let volume = view.volumes.first()?;
    Some((
        format!("deleting the cloud-init seed ISO {volume}"),
        PveCall::DeleteVolume {
            node: view.node.clone(),
            storage: spec.storage.clone(),
            volume: volume.clone(),
        },
    ))
}
