//! A phase's decision and the output under construction: conditions,
//! generation, the task a dispatching step starts.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::context::Ctx;
use super::output::{Event, LocalStep, Plan, PveCall, Step, time};
use super::{report, secs};
use crate::api::{
    Condition, ConditionStatus, ConditionType, ProxmoxVMStatus, Reason, set_condition,
    vm::InFlightTask,
};

/// A condition to set, before it gets its time and generation.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Say {
    pub status: ConditionStatus,
    pub reason: Reason,
    pub message: String,
}

impl Say {
    /// A condition that holds.
    pub fn yes(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            status: ConditionStatus::True,
            reason,
            message: message.into(),
        }
    }

    /// `Synced` for `reason`: True while it only waits for what comes by
    /// itself ([`Reason::waits`]), False when a person is needed.
    pub fn synced(reason: Reason, message: impl Into<String>) -> Self {
        if reason.waits() {
            Self::yes(reason, message)
        } else {
            Self::no(reason, message)
        }
    }

    /// A condition that does not hold.
    pub fn no(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            status: ConditionStatus::False,
            reason,
            message: message.into(),
        }
    }
}

/// How the Ready condition is to be set.
#[derive(Clone, Debug, PartialEq)]
enum Readiness {
    /// From the observed VM (see [`Out::finish`]).
    Observed,
    /// Leave it as it is (paused, provider unusable: nothing new is known).
    Keep,
    /// As the phase says.
    Set(Say),
}

/// A kind of step a decision can hold ([`Step`], or [`LocalStep`] before
/// Proxmox was contacted).
pub(super) trait StepKind: Clone {
    /// The Proxmox call, if the step is one.
    fn call(&self) -> Option<&PveCall>;
}

impl StepKind for Step {
    fn call(&self) -> Option<&PveCall> {
        self.pve()
    }
}

impl StepKind for LocalStep {
    fn call(&self) -> Option<&PveCall> {
        None
    }
}

/// A phase's decision.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Decision<S = Step> {
    step: S,
    requeue: Option<Duration>,
    synced: Option<Say>,
    ready: Readiness,
    events: Vec<Event>,
}

impl<S> Decision<S> {
    pub fn new(step: impl Into<S>, requeue: Option<Duration>, synced: Say) -> Self {
        Self {
            step: step.into(),
            requeue,
            synced: Some(synced),
            ready: Readiness::Observed,
            events: vec![],
        }
    }

    /// A decision that changes no condition (a conflict: retry at once).
    pub fn silent(step: impl Into<S>, requeue: Option<Duration>) -> Self {
        Self {
            step: step.into(),
            requeue,
            synced: None,
            ready: Readiness::Keep,
            events: vec![],
        }
    }

    pub fn keep_ready(mut self) -> Self {
        self.ready = Readiness::Keep;
        self
    }

    pub fn ready(mut self, say: Say) -> Self {
        self.ready = Readiness::Set(say);
        self
    }

    pub fn event(mut self, warning: bool, reason: &'static str, note: impl Into<String>) -> Self {
        self.events.push(Event {
            warning,
            reason,
            note: note.into(),
        });
        self
    }
}

impl From<Decision<LocalStep>> for Decision {
    fn from(d: Decision<LocalStep>) -> Self {
        Self {
            step: d.step.into(),
            requeue: d.requeue,
            synced: d.synced,
            ready: d.ready,
            events: d.events,
        }
    }
}

/// The status and events under construction.
pub(super) struct Out {
    pub status: ProxmoxVMStatus,
    pub events: Vec<Event>,
    /// Events said once (see [`Plan::announced`]).
    pub announced: Vec<Event>,
    /// The task this pass saw end (see [`super::task`]).
    pub finished_task: Option<super::output::FinishedTask>,
}

impl Out {
    pub fn new(ctx: &Ctx) -> Self {
        Self {
            status: ctx.status.clone(),
            events: vec![],
            announced: vec![],
            finished_task: None,
        }
    }

    /// The output of a plan being settled after its step failed (see
    /// [`super::settle`]): its status, events and finished task go on.
    pub fn settling(plan: Plan) -> Self {
        Self {
            status: plan.status,
            events: plan.events,
            announced: plan.announced,
            finished_task: plan.finished_task,
        }
    }

    pub fn event(&mut self, warning: bool, reason: &'static str, note: impl Into<String>) {
        self.events.push(Event {
            warning,
            reason,
            note: note.into(),
        });
    }

    fn set(&mut self, ctx: &Ctx, type_: ConditionType, say: Say) {
        let mut condition =
            Condition::new(type_, say.status, say.reason, say.message, time(ctx.now));
        condition.observed_generation = ctx.vm.metadata.generation;
        set_condition(&mut self.status.conditions, condition);
    }

    /// Sets the GuestAgent condition (from [`report`]).
    pub fn set_agent(&mut self, ctx: &Ctx, say: Say) {
        self.set(ctx, ConditionType::GuestAgent, say);
    }

    /// Completes the plan: conditions, generation, the task a dispatching
    /// step will start, connection details.
    pub fn finish<S: StepKind>(mut self, ctx: &Ctx, decision: Decision<S>) -> Plan<S> {
        let Decision {
            step,
            requeue,
            synced,
            ready,
            mut events,
        } = decision;
        let ready = match ready {
            Readiness::Keep => None,
            Readiness::Set(say) => Some(say),
            Readiness::Observed => Some(observed_readiness(ctx, synced.as_ref())),
        };
        if let Some(say) = synced {
            self.set(ctx, ConditionType::Synced, say);
        }
        if let Some(say) = ready {
            self.set(ctx, ConditionType::Ready, say);
        }
        self.status.observed_generation = ctx.vm.metadata.generation;
        let pending_task = step.call().map(|call| pending_task(ctx, call));
        let connection = report::connection(ctx, &self.status);
        self.events.append(&mut events);
        Plan {
            step,
            status: self.status,
            requeue_after: requeue,
            events: self.events,
            announced: self.announced,
            connection,
            finished_task: self.finished_task,
            pending_task,
        }
    }
}

/// Ready from what was observed, when the phase did not say. A VM the
/// provider creates is `Creating` from the create until it first runs as
/// requested (Crossplane's convention); only after that does a VM not in
/// the requested state make the resource `Unavailable`.
fn observed_readiness(ctx: &Ctx, synced: Option<&Say>) -> Say {
    let doing = synced.map(|s| s.message.clone()).unwrap_or_default();
    if ctx.deleting() {
        return Say::no(Reason::Deleting, doing);
    }
    match &ctx.obs.vm {
        super::VmState::Present(vm) => {
            if vm.creation_locked() {
                return Say::no(Reason::Creating, doing);
            }
            let running = vm.power == super::Power::Running;
            if running == ctx.wants_running() && vm.power != super::Power::Unknown {
                Say::yes(Reason::Available, "")
            } else if still_creating(ctx) {
                Say::no(Reason::Creating, doing)
            } else {
                let state = report::power_word(vm.power);
                let want = if ctx.wants_running() {
                    "Running"
                } else {
                    "Stopped"
                };
                Say::no(
                    Reason::Unavailable,
                    format!("VM {} is {state}; powerState is {want}", ctx.vmid_text()),
                )
            }
        }
        super::VmState::Absent | super::VmState::Unknown if ctx.caps.create => {
            Say::no(Reason::Creating, doing)
        }
        super::VmState::Absent | super::VmState::Unknown => Say::no(
            Reason::Unavailable,
            format!("VM {} does not exist", ctx.vmid_text()),
        ),
    }
}

/// Whether the VM has not yet run as requested since the provider set out
/// to create it: its creation is not recorded, or Ready still says
/// `Creating` (it has not been `Available` since).
fn still_creating(ctx: &Ctx) -> bool {
    if !ctx.caps.create {
        return false;
    }
    if !ctx.create_succeeded() {
        return true;
    }
    crate::api::condition::find(&ctx.status.conditions, ConditionType::Ready)
        .is_some_and(|ready| ready.reason == Reason::Creating.as_str())
}

/// The in-flight record for the task a dispatching step starts;
/// [`super::settle`] fills in the UPID Proxmox answered with.
fn pending_task(ctx: &Ctx, call: &PveCall) -> InFlightTask {
    // A shutdown ends by itself after its own timeout; give it that plus
    // the usual margin before calling it late.
    let timeout = if let PveCall::Shutdown { timeout, .. } = call {
        *timeout + ctx.timing.poll_interval * 10
    } else {
        ctx.timing.task_timeout
    };
    let action = call.action();
    let type_ = action.pve_type().to_owned();
    InFlightTask {
        upid: String::new(),
        action,
        summary: InFlightTask::summarize(&type_, None),
        type_,
        node: call.node().to_owned(),
        target: call.target(),
        started_at: time(ctx.now),
        deadline: time(after(ctx.now, timeout)),
        progress: None,
    }
}

/// `ts + d`, saturating.
pub(super) fn after(ts: Timestamp, d: Duration) -> Timestamp {
    ts.saturating_add(d).unwrap_or(Timestamp::MAX)
}

/// How long from `earlier` to `later`, zero if negative.
pub(super) fn between(earlier: Timestamp, later: Timestamp) -> Duration {
    Duration::try_from(later.duration_since(earlier)).unwrap_or_default()
}

/// `in 30s`, for messages.
pub(super) fn in_secs(d: Duration) -> String {
    format!("in {}", secs(d))
}
