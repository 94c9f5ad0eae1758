//! An existing VM: check ownership, then correct drift, grow disks and
//! enforce the power state, one step per pass.
//!
//! A VM without our owner marker is never changed: it may be someone's
//! hand-made VM that happens to have the VMID.

use std::time::Duration;

use super::context::Ctx;
use super::decision::{Decision, Out, Say};
use super::drift::{self, Diff};
use super::firewall::{FirewallWrite, NotYet};
use super::input::{AgentState, ObservedVm, Power, VmState};
use super::late_init;
use super::observed;
use super::output::{ConfigChanges, Idle, KubeWrite, PveCall, Step};
use super::owner::{Ownership, ownership};
use super::task;
use super::template;
use crate::api::meta::{self, ConfigUser};
use crate::api::{Reason, vm::TaskAction};
use crate::reconcile::common::owner::{Takeover, takeover};

/// Decides for a VM that exists.
pub(super) fn decide(ctx: &Ctx, out: &mut Out, vm: &ObservedVm) -> Decision {
    let vmid = ctx.vmid_text();
    if vm.creation_locked() && vm.config.is_none() {
        return being_created(ctx, vm);
    }
    let Some(config) = &vm.config else {
        let say = Say::no(
            Reason::ReconcileError,
            format!("cannot read the config of VM {vmid}"),
        );
        return Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say);
    };
    let managing = ctx.caps.update || ctx.caps.create;
    let owner = ownership(config, ctx.uid());
    let ours = owner == Ownership::Ours;
    // The VM the status may describe: ours, or any while only observing.
    if (ours || !managing)
        && !ctx.deleting()
        && ctx.vm.spec.managed.late_initializes()
        && let Some(fields) = late_init::fields(ctx.spec, &observed::config(config, vm.power))
    {
        let say = Say::yes(
            Reason::ReconcileSuccess,
            format!("filling unset spec.forProvider fields from VM {vmid} (LateInitialize)"),
        );
        return Decision::new(
            KubeWrite::LateInitialize(Box::new(fields)),
            Some(Duration::ZERO),
            say,
        )
        .keep_ready();
    }
    if !managing {
        let say = Say::yes(
            Reason::ReconcileSuccess,
            format!("observing VM {vmid}; managementPolicies do not allow changing it"),
        );
        return Decision::new(Idle::UpToDate, Some(ctx.resync_interval()), say);
    }
    if !ours {
        return not_ours(ctx, out, vm, owner);
    }
    // Marked ours: the restore's proof has served.
    out.status.at_provider.restored_vmid = None;
    if !ctx.create_succeeded() {
        // Our VM exists but its creation was never recorded (the write was
        // lost, or the create task was not observed to its end).
        return recording_creation(ctx);
    }
    if !ctx.caps.update {
        let say = Say::yes(
            Reason::ReconcileSuccess,
            format!("VM {vmid} exists; managementPolicies do not allow Update"),
        );
        return Decision::new(Idle::UpToDate, Some(ctx.resync_interval()), say);
    }
    let diff = match drift::diff(ctx, config) {
        Ok(diff) => diff,
        Err(why) => return Decision::new(Idle::Refuse, None, Say::no(Reason::InvalidSpec, why)),
    };
    out.status.at_provider.pending_changes = diff.pending.clone();
    change(ctx, out, vm, diff)
}

/// Records the creation of our VM (`external-create-succeeded`).
fn recording_creation(ctx: &Ctx) -> Decision {
    let say = Say::yes(
        Reason::ReconcileSuccess,
        format!("VM {} exists; recording its creation", ctx.vmid_text()),
    );
    Decision::new(KubeWrite::RecordCreateSucceeded, Some(Duration::ZERO), say)
}

/// A create or clone that ended OK, of a VM that is ours and whose
/// creation is not recorded yet: the creation is recorded first, and the
/// task's end is left to the next pass (it follows at once, and the
/// observer keeps the end). That pass consumes the end and goes on (the
/// resize, the start) in one status write: consumed here, the end would
/// need a status write of its own before the metadata write's pass.
pub(super) fn record_creation_first(ctx: &Ctx, action: TaskAction) -> Option<Decision> {
    if !matches!(action, TaskAction::Create | TaskAction::Clone)
        || ctx.create_succeeded()
        || ctx.deleting()
        || !ctx.caps.create
    {
        return None;
    }
    let config = match &ctx.obs.vm {
        VmState::Present(vm) => vm.config.as_ref()?,
        VmState::Absent | VmState::Unknown => return None,
    };
    (ownership(config, ctx.uid()) == Ownership::Ours).then(|| recording_creation(ctx))
}

/// The VM is locked `create`/`clone` and its config cannot be read yet.
fn being_created(ctx: &Ctx, vm: &ObservedVm) -> Decision {
    let lock = vm.lock.as_deref().unwrap_or_default();
    let vmid = ctx.vmid_text();
    if ctx.create_pending() {
        let say = Say::yes(
            Reason::WaitingForTask,
            format!("Proxmox is creating VM {vmid} (lock: {lock}); waiting for it"),
        );
        return Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say);
    }
    let message = format!(
        "VM {vmid} is being created by someone else (lock: {lock}); waiting to see whose it is"
    );
    let d = Decision::new(
        Idle::Wait,
        Some(ctx.timing.poll_interval),
        Say::no(Reason::NotOwned, message.clone()),
    );
    ctx.event_on_change(d, Reason::NotOwned, "NotOwned", message)
}

fn not_ours(ctx: &Ctx, out: &Out, vm: &ObservedVm, owner: Ownership) -> Decision {
    let vmid = ctx.vmid_text();
    if let Some(d) = super::restore::claim(ctx, out, vm) {
        return d;
    }
    if ctx.create_pending() && ctx.spec.vmid.is_none() && ctx.caps.create {
        // The VMID we allocated was taken by another VM before ours was
        // created (Proxmox's next free ID is not a reservation). Ours would
        // carry our marker from its first moment, so this one is not ours:
        // forget the VMID and allocate another.
        let say = Say::yes(
            Reason::ReconcileSuccess,
            format!(
                "VMID {vmid} was taken by another VM before ours was created; allocating another"
            ),
        );
        let ready = Say::no(
            Reason::Creating,
            format!("VMID {vmid} is taken; allocating another"),
        );
        return Decision::new(KubeWrite::ForgetExternalName, Some(Duration::ZERO), say)
            .ready(ready)
            .event(
                true,
                "VmidTaken",
                format!(
                    "VMID {vmid} on node {} belongs to another VM; allocating another VMID",
                    vm.node
                ),
            );
    }
    let guest = format!("VM {vmid} on node {}", vm.node);
    let observed = vm
        .config
        .as_ref()
        .and_then(|c| c.current.get("description"))
        .map(String::as_str);
    let adopt = ctx.vm.adopt_requested();
    let why = match takeover(&guest, &owner, observed, adopt, &ctx.marker_line()) {
        Takeover::Adopt(description) if ctx.caps.update => {
            return adoption(ctx, out, vm, description);
        }
        Takeover::Adopt(_) => format!(
            "{guest} was not created by this resource; taking it over ({}) writes its owner marker, which managementPolicies without Update do not allow",
            meta::ADOPT
        ),
        Takeover::Refuse(why) => why,
    };
    let ready = Say::no(
        Reason::Unavailable,
        format!("VM {vmid} is not managed by this resource"),
    );
    let d = Decision::new(
        Idle::Wait,
        Some(ctx.resync_interval()),
        Say::no(Reason::NotOwned, why.clone()),
    )
    .ready(ready);
    // Once per change, not per pass: `kubectl describe` and alerts on
    // Warning events see it without a new event every resync.
    ctx.event_on_change(d, Reason::NotOwned, "NotOwned", why)
}

/// Takes over an unmarked VM the resource asked for: one config update
/// writing the owner marker after its notes, based on the digest read (a
/// VM changed meanwhile refuses it, and the next pass looks again). The
/// passes after it find the VM ours and go on as after a create: its
/// creation is recorded, then drift is corrected.
fn adoption(ctx: &Ctx, out: &Out, vm: &ObservedVm, description: String) -> Decision {
    let vmid = ctx.vmid().unwrap_or_default();
    if !ctx.has_finalizer() {
        // As before a create: a VM this resource will destroy on deletion
        // is never marked before the finalizer holds the resource.
        let say = Say::yes(
            Reason::ReconcileSuccess,
            format!("adding the finalizer before taking over VM {vmid}"),
        );
        return Decision::new(KubeWrite::AddFinalizer, Some(Duration::ZERO), say);
    }
    let doing = format!("taking over VM {vmid}: writing its owner marker");
    if let Some(d) = held(ctx, out, vm, &doing, TaskAction::Configure) {
        return d;
    }
    let config = vm.config.as_ref();
    let mut changes = ConfigChanges {
        digest: config.and_then(|c| c.current.get("digest").cloned()),
        ..ConfigChanges::default()
    };
    changes.set.description = Some(description.as_str().into());
    let call = PveCall::Configure {
        node: vm.node.clone(),
        vmid,
        changes: Box::new(changes),
    };
    let note = format!(
        "taking over VM {vmid} on node {} ({}=true): writing this resource's owner marker into its notes",
        vm.node,
        meta::ADOPT
    );
    Decision::new(
        call,
        Some(ctx.timing.poll_interval),
        Say::yes(Reason::WaitingForTask, doing),
    )
    .event(false, "Adopting", note)
}

/// One step towards the spec: configure, then grow disks, then power.
fn change(ctx: &Ctx, out: &mut Out, vm: &ObservedVm, diff: Diff) -> Decision {
    // Whatever this pass does (even waiting for a lock), a seed the guest
    // has not read stays listed.
    super::seed::pending(ctx, out, vm, false);
    let vmid = ctx.vmid().unwrap_or_default();
    let node = vm.node.clone();
    if let Some((doing, pool)) = super::pool::converge(ctx) {
        // Before anything else: cheap, and it may be what grants the rest.
        return sync_write(
            ctx,
            out,
            vm,
            doing,
            (TaskAction::MovePool, Step::Pool(pool)),
        );
    }
    let call = if let Some((doing, ha)) = super::ha::converge(ctx) {
        // Before a migration: a strict rule must already allow the target.
        return sync_write(ctx, out, vm, doing, (TaskAction::ConfigureHa, Step::Ha(ha)));
    } else if let Some(next) = super::firewall::converge(ctx, &vm.node) {
        // Before a start: a VM does not run without the firewall it asks for.
        return firewall_write(ctx, out, vm, next);
    } else if let Some(migration) = super::motion::migration(ctx, out, vm) {
        match migration {
            Ok(migration) => Some(migration),
            Err(refused) => return *refused,
        }
    } else if let Some(upload) = super::seed::upload(ctx, Some(&vm.node)) {
        // Before the config names it.
        Some(upload)
    } else if !diff.changes.is_empty() {
        Some((
            format!("updating {} of VM {vmid}", keys(&diff)),
            PveCall::Configure {
                node: node.clone(),
                vmid,
                changes: diff.changes.clone(),
            },
        ))
    } else if let Some(moving) =
        super::motion::disk_move(ctx, vm, &diff.moves, diff.changes.digest.as_ref())
    {
        Some(moving)
    } else if let Some((slot, bytes)) = diff.resizes.first() {
        Some((
            format!("growing disk {slot} of VM {vmid}"),
            PveCall::ResizeDisk {
                node: node.clone(),
                vmid,
                slot: slot.clone(),
                bytes: *bytes,
            },
        ))
    } else if let Some(cleanup) = vm
        .config
        .as_ref()
        .and_then(|config| super::seed::cleanup(ctx, vm, config))
    {
        Some(cleanup)
    } else if super::seed::unreadable(ctx).is_some() {
        // Not started without its cloud-init data (the problem is reported).
        None
    } else if let Some(d) = template::unexpected(ctx, vm) {
        return d;
    } else {
        power_step(ctx, out, vm, vmid).or_else(|| template::conversion(ctx, vm, &diff))
    };
    let Some((doing, call)) = call else {
        return up_to_date(ctx, vm, &diff);
    };
    if let Some(d) = held(ctx, out, vm, &doing, call.action()) {
        return d;
    }
    if matches!(&call, PveCall::Configure { changes, .. } if super::seed::attaches(ctx, changes)) {
        super::seed::pending(ctx, out, vm, true);
    }
    if call.action() == TaskAction::Configure && diff.password_version.is_some() {
        out.status.at_provider.password_version = diff.password_version.clone();
    }
    let say = Say::yes(Reason::WaitingForTask, doing);
    Decision::new(call, Some(ctx.timing.poll_interval), say)
}

/// A synchronous write (HA configuration, a pool move), unless a lock or
/// a backoff holds it back.
fn sync_write(
    ctx: &Ctx,
    out: &Out,
    vm: &ObservedVm,
    doing: String,
    (action, step): (TaskAction, Step),
) -> Decision {
    if let Some(d) = held(ctx, out, vm, &doing, action) {
        return d;
    }
    // Written synchronously: look again at once.
    let say = Say::yes(Reason::ReconcileSuccess, doing);
    Decision::new(step, Some(Duration::ZERO), say)
}

/// A firewall write, unless a backoff holds it back; or the wait for a
/// security group or IP set the rules name.
fn firewall_write(
    ctx: &Ctx,
    out: &Out,
    vm: &ObservedVm,
    next: Result<(String, FirewallWrite), NotYet>,
) -> Decision {
    match next {
        Ok((doing, write)) => sync_write(
            ctx,
            out,
            vm,
            doing,
            (TaskAction::ConfigureFirewall, Step::Firewall(write)),
        ),
        Err(not_yet) => {
            // Waiting for a reference that exists is not a failure (its
            // Ready wakes the VM); a missing one or a refusal is.
            let say = if not_yet.synced {
                Say::yes(Reason::ReferenceNotReady, not_yet.why)
            } else {
                Say::no(Reason::ReferenceNotReady, not_yet.why)
            };
            // The reference becoming Ready wakes the VM (managed::
            // firewall_wake): its resync is only the fallback.
            Decision::new(Idle::Wait, Some(ctx.resync_interval()), say)
        }
    }
}

/// What holds back a change of the VM: its lock, or the backoff after the
/// same action failed.
pub(super) fn held(
    ctx: &Ctx,
    out: &Out,
    vm: &ObservedVm,
    doing: &str,
    action: TaskAction,
) -> Option<Decision> {
    if let Some(lock) = &vm.lock {
        let say = Say::synced(
            Reason::VmLocked,
            format!(
                "VM {} is locked ({lock}); waiting to continue {doing}",
                ctx.vmid_text()
            ),
        );
        return Some(Decision::new(
            Idle::Wait,
            Some(ctx.timing.poll_interval),
            say,
        ));
    }
    task::gate(ctx, out, action)
}

fn keys(diff: &Diff) -> String {
    diff.changes.set.keys().join(", ")
}

/// Start or stop the VM as `powerState` asks; a shutdown that failed (timed
/// out) is followed by a hard stop.
fn power_step(ctx: &Ctx, out: &Out, vm: &ObservedVm, vmid: u32) -> Option<(String, PveCall)> {
    let node = vm.node.clone();
    match (ctx.wants_running(), vm.power) {
        (true, Power::Stopped) => {
            Some((format!("starting VM {vmid}"), PveCall::Start { node, vmid }))
        }
        (false, Power::Running) if shutdown_failed(out) => Some((
            format!("stopping VM {vmid} (the shutdown did not finish)"),
            PveCall::Stop { node, vmid },
        )),
        (false, Power::Running) => Some((
            format!("shutting VM {vmid} down"),
            PveCall::Shutdown {
                node,
                vmid,
                timeout: ctx.timing.shutdown_timeout,
            },
        )),
        (true, Power::Running | Power::Paused | Power::Unknown)
        | (false, Power::Stopped | Power::Paused | Power::Unknown) => None,
    }
}

fn shutdown_failed(out: &Out) -> bool {
    out.status
        .at_provider
        .last_failure
        .as_ref()
        .is_some_and(|f| f.action == TaskAction::Shutdown)
}

/// `spec.node` or `allowedNodes`, in words.
fn placement_words(ctx: &Ctx) -> String {
    match &ctx.spec.node {
        Some(node) => format!("spec.node {node}"),
        None => format!("allowedNodes {:?}", ctx.spec.allowed_nodes),
    }
}

/// Nothing to do: report what is not as asked but cannot be changed.
fn up_to_date(ctx: &Ctx, vm: &ObservedVm, diff: &Diff) -> Decision {
    let problems = &diff.problems;
    let mut requeue = ctx.resync_interval();
    let agent_expected = vm.power == Power::Running
        && ctx.spec.agent.as_ref().is_some_and(|a| a.enabled)
        && !matches!(vm.agent, AgentState::Interfaces(_));
    if agent_expected {
        // Ask the agent again soon: its IPs are what people wait for.
        requeue = requeue.min(Duration::from_secs(15));
    }
    let say = if vm.power == Power::Paused {
        Say::no(
            Reason::ReconcileError,
            format!(
                "VM {} is paused or suspended; resume it in Proxmox",
                ctx.vmid_text()
            ),
        )
    } else if !problems.is_empty() {
        // A missing Secret or ConfigMap is waited for, not a spec to fix.
        let reason = if diff.missing_data {
            Reason::SecretNotFound
        } else if diff.not_copied {
            Reason::NotATemplate
        } else {
            Reason::InvalidSpec
        };
        Say::no(reason, problems.join("; "))
    } else if !ctx.tolerates(&vm.node) {
        // HA, its load balancer, a migration or a person moved our VM. It
        // is followed where it is: not moved back, not created again.
        let message = format!(
            "VM {} runs on node {}, outside {}; the provider follows it there and does not move it back",
            ctx.vmid_text(),
            vm.node,
            placement_words(ctx)
        );
        let d = Decision::new(
            Idle::UpToDate,
            Some(requeue),
            Say::yes(Reason::OutsidePlacement, message.clone()),
        );
        return ctx.event_on_change(d, Reason::OutsidePlacement, "OutsidePlacement", message);
    } else if !diff.pending.is_empty() {
        Say::yes(
            Reason::ReconcileSuccess,
            format!(
                "changes to {} take effect at the VM's next reboot",
                diff.pending.join(", ")
            ),
        )
    } else {
        Say::yes(Reason::ReconcileSuccess, "")
    };
    Decision::new(Idle::UpToDate, Some(requeue), say)
}
