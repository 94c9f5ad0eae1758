//! Moving an existing VM: migrating it when `node` changes, moving a disk
//! when its `storage` changes.
//!
//! A VM found on another node than `node` names was either asked to move
//! (the user changed `node`) or was moved by HA, its load balancer or a
//! person. Only the first is migrated: `status.atProvider.targetNode`
//! records the `node` the provider last placed or migrated the VM to, so a
//! VM moved behind its back while `node` stayed the same is followed, never
//! moved back.

use pve_client::vm::{Drive, DriveFile};

use super::context::Ctx;
use super::decision::{Decision, Out, Say};
use super::input::{ObservedVm, Power};
use super::output::{Idle, PveCall};
use crate::api::Reason;

/// The migration the spec asks for, if any; records `targetNode` when the
/// VM is where `node` says. A migration Proxmox would refuse is refused
/// here, saying why (`Err`).
pub(super) fn migration(
    ctx: &Ctx,
    out: &mut Out,
    vm: &ObservedVm,
) -> Option<Result<(String, PveCall), Box<Decision>>> {
    let wanted = ctx.spec.node.as_ref()?;
    let at = &mut out.status.at_provider;
    if *wanted == vm.node {
        at.target_node = Some(wanted.clone());
        return None;
    }
    let followed = match &at.target_node {
        Some(target) => target == wanted,
        // Recorded by no earlier pass (a resource from before the record
        // existed): a spec acted on already did not ask for this move.
        None => ctx.status.observed_generation == ctx.vm.metadata.generation,
    };
    if followed {
        return None;
    }
    let vmid = ctx.vmid().unwrap_or_default();
    if let Some(storage) = local_seed(ctx, vm) {
        let say = Say::no(
            Reason::InvalidSpec,
            format!(
                "VM {vmid} cannot migrate to node {wanted}: its customCloudInit seed ISO is on storage {storage}, which is not shared, and Proxmox migrates no VM with a local CD-ROM; set customCloudInit.storage to a shared storage with content iso, or leave node as it is"
            ),
        );
        return Some(Err(Box::new(
            Decision::new(Idle::Refuse, None, say).keep_ready(),
        )));
    }
    let online = vm.power == Power::Running;
    let how = if online { "live" } else { "offline" };
    Some(Ok((
        format!(
            "migrating VM {vmid} from node {} to node {wanted} ({how})",
            vm.node
        ),
        PveCall::Migrate {
            node: vm.node.clone(),
            vmid,
            target: wanted.clone(),
            online,
        },
    )))
}

/// The storage of the seed ISO attached to the VM, when it is not shared.
fn local_seed(ctx: &Ctx, vm: &ObservedVm) -> Option<String> {
    let spec = ctx.spec.custom_cloud_init.as_ref()?;
    ctx.obs.seed.as_ref().filter(|s| !s.shared)?;
    let attached = vm.config.as_ref()?.current.get(&spec.drive_slot)?;
    let drive = Drive::parse(attached).ok()?;
    match drive.file {
        DriveFile::Volume { storage, name }
            if storage == spec.storage && seed_named(ctx, &name) =>
        {
            Some(storage)
        }
        DriveFile::Volume { .. }
        | DriveFile::None
        | DriveFile::HostCdrom
        | DriveFile::Path(_)
        | DriveFile::Alloc { .. }
        | DriveFile::AllocCloudInit { .. } => None,
    }
}

/// Whether a volume name is one of this VM's seed ISOs.
fn seed_named(ctx: &Ctx, name: &str) -> bool {
    let Some(vmid) = ctx.vmid() else {
        return false;
    };
    name.strip_prefix("iso/")
        .is_some_and(|file| file.starts_with(&super::seed::seed_prefix(vmid)))
}

/// The first disk move the drift asks for.
pub(super) fn disk_move(
    ctx: &Ctx,
    vm: &ObservedVm,
    moves: &[(String, String)],
    digest: Option<&String>,
) -> Option<(String, PveCall)> {
    let (slot, storage) = moves.first()?;
    let vmid = ctx.vmid().unwrap_or_default();
    Some((
        format!("moving disk {slot} of VM {vmid} to storage {storage}"),
        PveCall::MoveDisk {
            node: vm.node.clone(),
            vmid,
            slot: slot.clone(),
            storage: storage.clone(),
            digest: digest.cloned(),
        },
    ))
}
