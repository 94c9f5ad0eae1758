//! Protection (`protection: 1`): Proxmox refuses to destroy a protected VM
//! (or remove its disks), whoever asks. The provider clears the flag only
//! to destroy a VM it created when its resource is being deleted and the
//! management policies include Delete; it never clears it otherwise.

use super::context::Ctx;
use super::decision::{Decision, Out, Say};
use super::input::{ObservedVm, VmConfig};
use super::output::{ConfigChanges, PveCall};
use super::task;
use crate::api::Reason;
use pve_client::vm::parse_bool;

/// Whether the VM is protected (a pending change counts once applied).
fn protected(config: &VmConfig) -> bool {
    config
        .current
        .get("protection")
        .is_some_and(|p| parse_bool(p) == Some(true))
}

/// Clears the protection of our stopped VM before it is destroyed. The
/// caller has checked that the VM is ours and the resource is being
/// deleted with Delete allowed.
pub(super) fn clear_before_destroy(
    ctx: &Ctx,
    out: &mut Out,
    vm: &ObservedVm,
    config: &VmConfig,
) -> Option<Decision> {
    if !protected(config) {
        return None;
    }
    let call = PveCall::Configure {
        node: vm.node.clone(),
        vmid: ctx.vmid()?,
        changes: Box::new(ConfigChanges {
            delete: vec!["protection".into()],
            digest: config.current.get("digest").cloned(),
            ..ConfigChanges::default()
        }),
    };
    if let Some(d) = task::gate(ctx, out, call.action()) {
        return Some(d);
    }
    let say = Say::yes(
        Reason::WaitingForTask,
        format!(
            "clearing the protection of VM {} to destroy it (the resource is being deleted)",
            ctx.vmid_text()
        ),
    );
    let note = format!(
        "VM {} is protected; clearing the protection to destroy it",
        ctx.vmid_text()
    );
    Some(
        Decision::new(call, Some(ctx.timing.poll_interval), say).event(
            false,
            "ClearingProtection",
            note,
        ),
    )
}
