//! Moving an existing VM: migrating it when `node` changes, moving a disk
//! when its `storage` changes.
//!
//! A VM found on another node than `node` names was either asked to move
//! (the user changed `node`) or was moved by HA, its load balancer or a
//! person. Only the first is migrated: `status.atProvider.targetNode`
//! records the `node` the provider last placed or migrated the VM to, so a
//! VM moved behind its back while `node` stayed the same is followed, never
//! moved back.

use super::context::Ctx;
use super::decision::Out;
use super::input::{ObservedVm, Power};
use super::output::PveCall;

/// The migration the spec asks for, if any; records `targetNode` when the
/// VM is where `node` says.
pub(super) fn migration(ctx: &Ctx, out: &mut Out, vm: &ObservedVm) -> Option<(String, PveCall)> {
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
    let online = vm.power == Power::Running;
    let how = if online { "live" } else { "offline" };
    Some((
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
    ))
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
