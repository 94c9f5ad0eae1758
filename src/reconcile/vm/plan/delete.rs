//! Deleting: out of HA → shutdown (with a timeout) → stop → destroy with
//! purge → verify gone → delete its cloud-init seed ISOs → remove the
//! finalizer. A VM that is already gone is success; a VM
//! that is not ours is left alone.
//!
//! Orphaning (policies without Delete) and "nothing to clean up" are decided
//! before Proxmox is contacted (see `gate` in the parent module).

use std::time::Duration;

use super::context::Ctx;
use super::decision::{Decision, Out, Say};
use super::input::{ObservedVm, Power, VmState};
use super::output::{Idle, KubeWrite, PveCall};
use super::owner::{Ownership, ownership};
use super::task;
use super::{protection, template};
use crate::api::{Reason, vm::TaskAction};

/// Decides for a resource being deleted that still holds our finalizer.
pub(super) fn decide(ctx: &Ctx, out: &mut Out) -> Decision {
    let vm = match &ctx.obs.vm {
        VmState::Present(vm) => vm,
        VmState::Absent | VmState::Unknown => return gone(ctx, out),
    };
    let vmid = ctx.vmid_text();
    if vm.creation_locked() && vm.config.is_none() {
        if ctx.create_pending() {
            let say = Say::yes(
                Reason::WaitingForTask,
                format!("waiting for the create of VM {vmid} to finish before destroying it"),
            );
            return Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say);
        }
        return release(ctx, vm, "is being created by someone else");
    }
    let Some(config) = &vm.config else {
        let say = Say::no(
            Reason::ReconcileError,
            format!("cannot read the config of VM {vmid}"),
        );
        return Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say);
    };
    match ownership(config, ctx.uid()) {
        Ownership::Ours => {}
        Ownership::Foreign(_) => return release(ctx, vm, "belongs to another resource"),
        Ownership::Unmarked => return release(ctx, vm, "was not created by this resource"),
    }
    if let Some(lock) = &vm.lock {
        let say = Say::synced(
            Reason::VmLocked,
            format!("VM {vmid} is locked ({lock}); waiting to destroy it"),
        );
        return Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say);
    }
    if let Some((doing, call)) = super::ha::remove(ctx) {
        if let Some(d) = task::gate(ctx, out, TaskAction::ConfigureHa) {
            return d;
        }
        let say = Say::yes(Reason::ReconcileSuccess, doing);
        return Decision::new(call, Some(Duration::ZERO), say);
    }
    if let Some(d) = template::held(ctx, vm) {
        return d;
    }
    if vm.power == Power::Stopped
        && let Some(d) = protection::clear_before_destroy(ctx, out, vm, config)
    {
        return d;
    }
    let node = vm.node.clone();
    let vmid = ctx.vmid().unwrap_or_default();
    let (doing, call) = match vm.power {
        Power::Running if !stops_hard(ctx) && !shutdown_failed_since_deletion(ctx, out) => (
            format!("shutting VM {vmid} down before destroying it"),
            PveCall::Shutdown {
                node,
                vmid,
                timeout: ctx.timing.shutdown_timeout,
            },
        ),
        // A paused VM cannot shut down; one whose shutdown timed out, or
        // whose spec says so, is stopped hard.
        Power::Running | Power::Paused => (
            format!("stopping VM {vmid} before destroying it"),
            PveCall::Stop { node, vmid },
        ),
        Power::Stopped => (
            format!("destroying VM {vmid}"),
            PveCall::Destroy { node, vmid },
        ),
        Power::Unknown => {
            let say = Say::no(
                Reason::ReconcileError,
                format!(
                    "the state of VM {vmid} is unknown (is node {} online?); waiting",
                    vm.node
                ),
            );
            return Decision::new(Idle::Wait, Some(Duration::from_secs(30)), say);
        }
    };
    if let Some(d) = task::gate(ctx, out, call.action()) {
        return d;
    }
    Decision::new(
        call,
        Some(ctx.timing.poll_interval),
        Say::yes(Reason::WaitingForTask, doing),
    )
}

/// `lifecycle.stopOnDelete`: no graceful shutdown first.
fn stops_hard(ctx: &Ctx) -> bool {
    ctx.spec.lifecycle.stop_on_delete == Some(true)
}

fn shutdown_failed_since_deletion(ctx: &Ctx, out: &Out) -> bool {
    let Some(failure) = &out.status.at_provider.last_failure else {
        return false;
    };
    failure.action == TaskAction::Shutdown
        && ctx
            .deletion_time()
            .is_none_or(|deleted| failure.at.0 >= deleted)
}

/// The VM is gone (or was never created): delete its seed ISOs, then let
/// the resource go.
fn gone(ctx: &Ctx, out: &mut Out) -> Decision {
    if let Some((doing, call)) = super::seed::leftover(ctx) {
        if let Some(d) = task::gate(ctx, out, call.action()) {
            return d;
        }
        let say = Say::yes(Reason::WaitingForTask, doing);
        return Decision::new(call, Some(ctx.timing.poll_interval), say);
    }
    let say = Say::yes(
        Reason::ReconcileSuccess,
        format!("VM {} is gone; removing the finalizer", ctx.vmid_text()),
    );
    Decision::new(KubeWrite::RemoveFinalizer, None, say)
}

/// The VM is not ours: let the resource go and leave the VM alone.
fn release(ctx: &Ctx, vm: &ObservedVm, whose: &str) -> Decision {
    let note = format!(
        "VM {} on node {} {whose}; it was left untouched",
        ctx.vmid_text(),
        vm.node
    );
    let say = Say::yes(Reason::ReconcileSuccess, note.clone());
    Decision::new(KubeWrite::RemoveFinalizer, None, say).event(true, "NotOwned", note)
}
