//! Templates: converting the VM into one once it is created and configured
//! (`template: true`), and deleting one whose base disks linked clones
//! still use.
//!
//! Proxmox converts only a stopped VM without snapshots, and cannot turn a
//! template back into a VM. Destroying a template whose base volumes back
//! linked clones fails on storages whose clones reference the base (ZFS,
//! RBD, qcow2 on directories: "base volume ... is still in use by linked
//! cloned"); on LVM-thin the clones are independent thin snapshots and
//! Proxmox destroys the template. The provider looks for such clones first
//! and waits for them to go instead of retrying a destroy that must fail.

use super::context::Ctx;
use super::decision::{Decision, Say};
use super::drift::Diff;
use super::input::{ObservedVm, Power};
use super::output::{Idle, PveCall};
use crate::api::Reason;

/// Whether the spec asks for a template.
fn wanted(ctx: &Ctx) -> bool {
    ctx.spec.lifecycle.template == Some(true)
}

/// The conversion, once the VM is ours, created, configured as the spec
/// says (nothing left to set or grow, nothing reported) and stopped.
pub(super) fn conversion(ctx: &Ctx, vm: &ObservedVm, diff: &Diff) -> Option<(String, PveCall)> {
    let done = vm.template || !wanted(ctx);
    if done || !diff.problems.is_empty() || !diff.pending.is_empty() || vm.power != Power::Stopped {
        return None;
    }
    let vmid = ctx.vmid()?;
    Some((
        format!("converting VM {vmid} into a template"),
        PveCall::ConvertToTemplate {
            node: vm.node.clone(),
            vmid,
        },
    ))
}

/// A template the spec does not call one (converted in Proxmox): Proxmox
/// will not start it, and nothing makes it a VM again.
pub(super) fn unexpected(ctx: &Ctx, vm: &ObservedVm) -> Option<Decision> {
    if !vm.template || wanted(ctx) {
        return None;
    }
    let say = Say::no(
        Reason::InvalidSpec,
        format!(
            "VM {} is a template (Proxmox cannot start it or turn it back into a VM); set template: true and powerState: Stopped, or delete this resource",
            ctx.vmid_text()
        ),
    );
    Some(Decision::new(Idle::Refuse, None, say))
}

/// A template whose base disks linked clones still use: its deletion waits
/// for them, saying which they are.
pub(super) fn held(ctx: &Ctx, vm: &ObservedVm) -> Option<Decision> {
    if !vm.template {
        return None;
    }
    let clones = ctx.obs.linked_clones.as_ref().filter(|c| !c.is_empty())?;
    let list = clones
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    // Looked at again at the drift-check pace: a listing, not a destroy.
    let recheck = ctx.resync_interval();
    let message = format!(
        "VM {} is a template whose base disks linked clones use (VM {list}); Proxmox refuses to destroy it until they are gone: delete them first (checking again every {}s)",
        ctx.vmid_text(),
        recheck.as_secs()
    );
    let d = Decision::new(
        Idle::Wait,
        Some(recheck),
        Say::no(Reason::TemplateInUse, message.clone()),
    );
    Some(ctx.event_on_change(d, Reason::TemplateInUse, "TemplateInUse", message))
}
