//! A VM restored from a backup archive (`spec.forProvider.restore`): the
//! create is a `qmrestore` of the archive into the reserved VMID, never
//! with `force` (Proxmox refuses an existing VMID, reported as a taken VMID
//! is for a create); then the VM converges to the spec as any VM this
//! resource created.
//!
//! The restore call sets `name` and `description` (with this resource's
//! marker) over the archived config, as qemu-server applies a restore's
//! options but drives: the VM carries the marker from its first moment, as
//! a clone does, so a status write lost after the dispatch is harmless.
//! Should the restored notes still carry the archive's marker (another
//! resource's), the record `status.atProvider.restoredVmid`, written
//! together with the end of this resource's own restore task, is the proof
//! that lets the marker be written over it; only with it (and the create
//! still pending). Any other VM at the VMID is someone else's, as for
//! every create.

use super::context::Ctx;
use super::decision::{Decision, Out, Say};
use super::input::ObservedVm;
use super::output::{ConfigChanges, Idle, PveCall};
use crate::api::{
    Reason,
    vm::{RestoreSource, TaskAction},
};
use crate::reconcile::common::restore as shared;

/// The create step of a VM with `restore`: the archive, a node, the
/// finalizer, then the restore itself.
pub(super) fn restore_vm(ctx: &Ctx, out: &mut Out, vmid: u32, restore: &RestoreSource) -> Decision {
    // A proof from an earlier restore does not vouch for the next VM.
    out.status.at_provider.restored_vmid = None;
    let archive = match archive(ctx, restore) {
        Ok(archive) => archive,
        Err(d) => return *d,
    };
    let node = match super::create::placement(ctx, out) {
        Ok(node) => node,
        Err(d) => return *d,
    };
    out.status.at_provider.node = Some(node.clone());
    out.status.at_provider.target_node = ctx.spec.node.clone();
    if let Some(d) = super::task::gate(ctx, out, TaskAction::Restore) {
        return d;
    }
    if let Some(d) = super::create::finalizer(ctx, vmid) {
        return d;
    }
    let say = Say::yes(
        Reason::WaitingForTask,
        format!("restoring {archive} into VM {vmid} on node {node}"),
    );
    let step = PveCall::RestoreVm {
        node,
        vmid,
        archive,
        storage: restore.storage.clone(),
        pool: ctx.spec.pool.clone(),
        name: ctx.vm_name(),
        description: super::render::description_value(ctx),
    };
    Decision::new(step, Some(ctx.timing.poll_interval), say)
}

/// The archive to restore: named, or the volume of the Ready ProxmoxBackup
/// `backupRef` names (waited for, naming it, until it is).
fn archive(ctx: &Ctx, restore: &RestoreSource) -> Result<String, Box<Decision>> {
    let source = shared::Source {
        archive: restore.archive.as_deref(),
        backup_ref: restore.backup_ref.as_ref().map(|r| r.name.as_str()),
    };
    let ns = ctx.vm.metadata.namespace.as_deref().unwrap_or_default();
    shared::archive(source, ctx.obs.backup.as_ref(), ns, "the VM").map_err(|why| {
        let say = Say::synced(Reason::BackupNotReady, why);
        Box::new(Decision::new(Idle::Wait, Some(shared::BACKUP_RECHECK), say))
    })
}

/// The VM this resource's restore task created, not yet marked ours:
/// its owner marker is written (after the notes the spec declares, or the
/// archive's notes without their marker lines), based on the digest read.
/// `None` for any VM without that proof.
pub(super) fn claim(ctx: &Ctx, out: &Out, vm: &ObservedVm) -> Option<Decision> {
    let vmid = ctx.vmid()?;
    let restoring = ctx.spec.restore.is_some() && ctx.create_pending();
    let recorded = out.status.at_provider.restored_vmid;
    if !shared::proven(restoring, ctx.caps.create, recorded, vmid) {
        return None;
    }
    let doing = format!("writing the owner marker of restored VM {vmid}");
    if let Some(d) = super::converge::held(ctx, out, vm, &doing, TaskAction::Configure) {
        return Some(d);
    }
    let config = vm.config.as_ref()?;
    let description = shared::claimed_description(
        ctx.spec.description.as_deref(),
        config.current.get("description").map(String::as_str),
        &ctx.marker_line(),
    );
    let mut changes = ConfigChanges {
        digest: config.current.get("digest").cloned(),
        ..ConfigChanges::default()
    };
    changes.set.description = Some(description.as_str().into());
    let call = PveCall::Configure {
        node: vm.node.clone(),
        vmid,
        changes: Box::new(changes),
    };
    Some(Decision::new(
        call,
        Some(ctx.timing.poll_interval),
        Say::yes(Reason::WaitingForTask, doing),
    ))
}
