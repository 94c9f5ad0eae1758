//! The reconciler's decisions, as a pure function.
//!
//! A pass is: observe (Kubernetes object + Proxmox) → [`plan`] → act (one
//! Proxmox call or one Kubernetes write) → write [`Plan::status`] → requeue.
//! Before connecting to Proxmox the glue calls [`preflight`]: it either
//! decides alone (paused, orphaned, ...) or says what to observe ([`Needs`]).
//!
//! The rules that make the provider safe under restarts, lost writes and
//! concurrency live here, each in the phase it concerns:
//!
//! * `task`: never block on a Proxmox task; a task in flight is recorded in
//!   the status and observed on later passes, and nothing else is dispatched
//!   meanwhile; a task started before a lost status write is found again in
//!   the node's active task list and adopted, not started twice.
//! * `create`: the VMID is recorded (with `external-create-pending`) before
//!   a create is sent; an unknown create outcome is resolved by looking.
//! * `converge`: a VM without our owner marker is never changed.
//! * `delete`: shutdown → stop → destroy, or orphan.

mod compare;
mod context;
mod converge;
mod create;
mod decision;
mod delete;
mod drift;
mod firewall;
mod fleet;
mod forbidden;
mod ha;
mod hardware;
mod images;
mod input;
mod late_init;
mod limits;
mod motion;
mod observed;
mod output;
mod owner;
mod pool;
mod protection;
mod render;
mod report;
mod restore;
mod seed;
mod task;
mod template;
mod tenancy;
mod warning;

#[cfg(test)]
mod tests;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

pub use firewall::{FirewallCall, FirewallNext, FirewallView, FirewallWrite};
pub use forbidden::write_refused;
pub use ha::{HaCall, affinity_id};
pub use input::{
    ActiveTask, AffinityView, AgentState, BackupLookup, Depth, Forbidden, GuestInterface,
    HaResourceView, HaView, Heavy, HostView, ImageRef, NamedImage, Needs, Observation,
    ObserveError, ObservedVm, PasswordState, Placement, PlacementRequest, PlanInput, Power,
    ProviderState, SeedView, SlotGrant, SlotRequest, StorageView, TaskOutcome, TaskState,
    TemplateLookup, TemplateRef, VmConfig, VmState, VmidGrant, started_at,
};
pub use input::{ImageLookup, ImageTemplate};
pub use output::{
    ConfigChanges, Event, FinishedTask, Idle, KubeWrite, LocalStep, Params, Plan, PveCall,
    Sensitive, Step,
};
pub use owner::{Ownership, marker_line, marker_line_of, owner_of, ownership};
pub use pool::{PoolMove, PoolView};
pub use seed::seed_prefix;
pub use task::{NOT_VISIBLE_GRACE, backoff};
pub use tenancy::connection_refused;

use crate::api::{
    ProxmoxVM, Reason,
    meta::{PolicyMode, policy_mode},
    vm::{self, TaskAction},
};
use crate::reconcile::common::provider;
use context::Ctx;
use decision::{Decision, Out, Say};
use pve_client::Upid;

/// What to do before connecting to Proxmox.
#[derive(Clone, Debug, PartialEq)]
pub enum Preflight {
    /// Decided without Proxmox (paused, invalid policies, orphan, nothing
    /// to clean up): act on this plan, which holds no Proxmox call.
    Decided(Box<Plan<LocalStep>>),
    /// Resolve the provider config, observe what [`Needs`] lists, then call
    /// [`plan`].
    Observe(Box<Needs>),
}

/// Decides what can be decided without Proxmox, or what to observe.
pub fn preflight(vm: &ProxmoxVM, now: Timestamp) -> Preflight {
    let input = PlanInput::unresolved(vm, now);
    let ctx = Ctx::new(&input);
    match gate(&ctx) {
        Some(decision) => Preflight::Decided(Box::new(Out::new(&ctx).finish(&ctx, decision))),
        None => Preflight::Observe(Box::new(ctx.needs())),
    }
}

/// Decides the next step from the resource, the provider config and what
/// Proxmox showed.
pub fn plan(input: &PlanInput) -> Plan {
    let ctx = Ctx::new(input);
    let mut out = Out::new(&ctx);
    report::observed(&ctx, &mut out);
    warning::update(&ctx, &mut out);
    let decision = decide(&ctx, &mut out);
    let plan = out.finish(&ctx, decision);
    // A cheap look may only conclude that nothing is to be done: any
    // action is decided from a full look at the VM, on the next pass.
    let cheap = input.observed.depth == Depth::Idle && input.observe_error.is_none();
    if cheap && plan.step != Step::Idle(Idle::UpToDate) {
        return Out::new(&ctx).finish(
            &ctx,
            Decision::silent(Idle::LookCloser, Some(Duration::ZERO)),
        );
    }
    plan
}

/// What carrying out a plan's step did: the input of [`settle`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Done {
    /// Nothing to do beyond writing the status.
    Nothing,
    /// The resource's metadata was written, giving this resourceVersion.
    Written(Option<String>),
    /// A Proxmox task was started.
    Started(Upid),
}

/// A step that failed when the glue carried it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActFailure {
    /// Kubernetes answered 409: the object changed meanwhile. Retry at once
    /// with a fresh read; not an error worth a condition.
    Conflict,
    /// Proxmox refused because the VM is locked (`VM is locked (backup)`,
    /// `can't lock file ... got timeout`).
    Locked(String),
    /// Proxmox refused a create or clone: a VM with the VMID exists.
    Taken(String),
    /// The API server refused the resource's own metadata write (403,
    /// RBAC): reported as `Forbidden`, like a refused read.
    Forbidden(Forbidden),
    /// Any other refusal or transport error, with its message.
    Failed(String),
}

/// The plan as it stands once its step was carried out: a started task is
/// recorded in the status (so later passes observe it instead of starting
/// another); a failed step makes Synced False
/// with the error, recorded for backoff, and a retry. The events of the plan
/// come first.
pub fn settle(input: &PlanInput, mut plan: Plan, outcome: Result<Done, ActFailure>) -> Plan {
    match outcome {
        Ok(Done::Started(upid)) => {
            if let Some(mut task) = plan.pending_task.take() {
                // The task type Proxmox chose (an HA-managed start is a
                // `hastart`, not a `qmstart`).
                task.type_ = upid.task_type().to_owned();
                task.summary = vm::InFlightTask::summarize(&task.type_, None);
                task.upid = upid.to_string();
                plan.status.at_provider.task = Some(task);
            }
            // No event yet: a task is said once, when it ends, unless it
            // runs long enough to be announced (see `task::in_flight`).
            plan
        }
        Ok(Done::Written(_) | Done::Nothing) => plan,
        Err(failure) => failed(input, plan, failure),
    }
}

/// The plan to write when carrying out `plan.step` failed.
fn failed(input: &PlanInput, plan: Plan, failure: ActFailure) -> Plan {
    let ctx = Ctx::new(input);
    let what = describe_step(&plan.step);
    let action = plan.step.action();
    let mut out = Out::settling(plan);
    let decision: Decision = match failure {
        ActFailure::Conflict => Decision::silent(Idle::Wait, Some(Duration::ZERO)),
        ActFailure::Forbidden(refused) => forbidden::wait(&refused),
        ActFailure::Locked(message) => Decision::new(
            Idle::Wait,
            Some(ctx.timing.poll_interval.max(Duration::from_secs(5))),
            Say::synced(
                Reason::VmLocked,
                format!("cannot {what}: {message}; retrying"),
            ),
        )
        .keep_ready(),
        ActFailure::Taken(message) => {
            // Recorded, but no backoff: look again at once (an allocated
            // VMID is given up, see `create`; a named one reported).
            if let Some(action) = action {
                task::record_failure(&ctx, &mut out, action, &message);
            }
            if let Some(failure) = out.status.at_provider.last_failure.as_mut() {
                failure.vmid_taken = true;
            }
            Decision::new(
                Idle::Wait,
                Some(Duration::ZERO),
                Say::no(Reason::ReconcileError, format!("cannot {what}: {message}")),
            )
            .keep_ready()
        }
        ActFailure::Failed(message) => {
            let retry = match action {
                Some(action) => task::record_failure(&ctx, &mut out, action, &message),
                None => task::backoff(1),
            };
            Decision::new(
                Idle::Wait,
                Some(retry),
                Say::no(
                    Reason::ReconcileError,
                    format!("cannot {what}: {message}; retrying in {}", secs(retry)),
                ),
            )
            .keep_ready()
        }
    };
    out.finish(&ctx, decision)
}

/// The phases, in order; the first that decides wins.
fn decide(ctx: &Ctx, out: &mut Out) -> Decision {
    if let Some(d) = gate(ctx) {
        return d.into();
    }
    if let Some(d) = forbidden::decide(ctx) {
        return d;
    }
    if let Some(d) = provider(ctx) {
        return d;
    }
    if let Some(d) = observe_error(ctx) {
        return d;
    }
    if let Some(d) = identity(ctx) {
        return d;
    }
    if let Some(d) = task::in_flight(ctx, out) {
        return d;
    }
    if let Some(d) = task::adopt(ctx, out) {
        return d;
    }
    if ctx.deleting() {
        return delete::decide(ctx, out);
    }
    match &ctx.obs.vm {
        VmState::Present(vm) => match limits::on_foreign_vnet(ctx) {
            Some(refused) => refused,
            None => converge::decide(ctx, out, vm),
        },
        VmState::Absent | VmState::Unknown => create::decide(ctx, out),
    }
}

/// Decisions that need no Proxmox: pause, invalid policies, deletion without
/// anything to clean up, orphaning.
fn gate(ctx: &Ctx) -> Option<Decision<LocalStep>> {
    if let Some(why) = ctx.vm.spec.managed.paused_by(&ctx.vm.metadata) {
        let say = Say::no(
            Reason::ReconcilePaused,
            format!("reconciliation is paused: {why}"),
        );
        return Some(Decision::new(Idle::Paused, None, say).keep_ready());
    }
    if let PolicyMode::Invalid(message) = policy_mode(&ctx.vm.spec.managed.management_policies) {
        let say = Say::no(Reason::InvalidSpec, message);
        return Some(Decision::new(Idle::Refuse, None, say).keep_ready());
    }
    if !ctx.deleting()
        && let Some(why) = refusal(ctx)
    {
        let say = Say::no(Reason::InvalidSpec, format!("refused: {why}"));
        return Some(Decision::new(Idle::Refuse, None, say).keep_ready());
    }
    if ctx.deleting() && !ctx.has_finalizer() {
        let say = Say::yes(
            Reason::ReconcileSuccess,
            "deleting; nothing left to clean up",
        );
        return Some(Decision::new(Idle::Wait, None, say));
    }
    if ctx.deleting() && !ctx.caps.delete {
        let say = Say::yes(
            Reason::ReconcileSuccess,
            "managementPolicies do not include Delete: the VM is left on Proxmox (orphaned)",
        );
        return Some(Decision::new(KubeWrite::RemoveFinalizer, None, say).event(
            false,
            "Orphaned",
            format!(
                "VM {} left on Proxmox: managementPolicies do not include Delete",
                ctx.vmid_text()
            ),
        ));
    }
    None
}

/// Why the spec is refused before anything is sent, naming each field:
/// what one tenant may not reach, and addresses no VM can use.
fn refusal(ctx: &Ctx) -> Option<String> {
    let mut problems: Vec<String> = tenancy::refusal(ctx.spec).into_iter().collect();
    problems.extend(limits::addresses(ctx.spec));
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The provider config must be usable for anything further.
fn provider(ctx: &Ctx) -> Option<Decision> {
    let say = match ctx.provider {
        Some(state) => {
            let (reason, message) = state.problem()?;
            Say::no(reason, message)
        }
        None => Say::no(
            Reason::ReconcileError,
            "the provider config was not resolved",
        ),
    };
    Some(Decision::new(Idle::Wait, Some(provider::RETRY), say).keep_ready())
}

/// Proxmox could not be observed this time: say so as what it is (not a
/// provider config problem) and try again after the backoff.
fn observe_error(ctx: &Ctx) -> Option<Decision> {
    let e = ctx.observe_error?;
    let say = Say::no(
        Reason::ReconcileError,
        format!(
            "cannot observe VM {} on Proxmox: {}; retrying {}",
            ctx.vmid_text(),
            e.message,
            decision::in_secs(e.retry_in)
        ),
    );
    Some(Decision::new(Idle::Wait, Some(e.retry_in), say).keep_ready())
}

/// The VMID: from `crossplane.io/external-name`, which must agree with
/// `spec.forProvider.vmid` when both are set; recorded from the spec first.
fn identity(ctx: &Ctx) -> Option<Decision> {
    let spec_vmid = ctx.spec.vmid;
    match (ctx.external_name(), spec_vmid) {
        (None, Some(vmid)) if !ctx.deleting() => {
            let say = Say::yes(
                Reason::ReconcileSuccess,
                format!("recording VMID {vmid} in crossplane.io/external-name"),
            );
            let step = KubeWrite::RecordExternalName {
                vmid,
                create_pending: ctx.caps.create,
            };
            Some(Decision::new(step, Some(Duration::ZERO), say))
        }
        (Some(Err(text)), _) => Some(Decision::new(
            Idle::Refuse,
            None,
            Say::no(
                Reason::InvalidSpec,
                format!(
                    "the crossplane.io/external-name annotation {text:?} is not a VMID (100 to 999999999)"
                ),
            ),
        )),
        (Some(Ok(named)), Some(vmid)) if named != vmid => Some(Decision::new(
            Idle::Refuse,
            None,
            Say::no(
                Reason::InvalidSpec,
                format!(
                    "the crossplane.io/external-name annotation names VMID {named} but spec.forProvider.vmid is {vmid}"
                ),
            ),
        )),
        (None, _) | (Some(Ok(_)), _) => None,
    }
}

/// Whole seconds, for messages.
fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs().max(u64::from(d.subsec_nanos() > 0)))
}

/// A step in words, for messages.
fn describe_step(step: &Step) -> String {
    match step {
        Step::Pve(call) => format!("start the {}", call.action().describe()),
        Step::Ha(_) => format!("start the {}", TaskAction::ConfigureHa.describe()),
        Step::Firewall(_) => format!("write the {}", TaskAction::ConfigureFirewall.describe()),
        Step::Pool(_) => format!("start the {}", TaskAction::MovePool.describe()),
        Step::Kube(write) => write.describe().to_owned(),
        Step::Idle(_) => "write the status".to_owned(),
    }
}
