//! The decisions for one ProxmoxContainer pass, as a pure function: the
//! resource, what the pass observed and the time in; one [`Step`], the
//! status to write, the events and when to look again out. No I/O, no
//! clock: every branch is table-tested in `../tests.rs`
//! (`tests/controller/architecture.rs` greps these files for I/O).
//!
//! | module | what |
//! |---|---|
//! | [`types`] | the observation in, the step and plan out |
//! | `absent` | a container that does not exist: pull, create, or done |
//! | `present` | an existing one: wait, leave alone, correct, power, destroy |
//!
//! The order of the checks is the safety argument:
//!
//! 1. A task recorded in the status is observed first; while it runs
//!    nothing else is dispatched (the pass never waits for it either).
//! 2. A task of this VMID that the node lists as running (one whose UPID
//!    a lost status write never recorded), or a config lock, also holds
//!    every dispatch: after a crash the container's node says what runs.
//! 3. The VMID is recorded in `crossplane.io/external-name` before a
//!    create is sent, so a lost status write or a crash finds the VMID
//!    taken (PVE writes the config, locked, before the create returns)
//!    instead of creating a second container.
//! 4. A container whose description lacks this resource's owner marker is
//!    never changed or deleted.

mod absent;
mod limits;
mod present;
pub mod types;

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::render::Invalid;
use crate::api::condition::{Condition, ConditionStatus, ConditionType, Reason, set_condition};
use crate::api::container::{ContainerAtProvider, ProxmoxContainer, ProxmoxContainerStatus};
use crate::api::container::{ContainerTask, ContainerTaskAction, ContainerTaskFailure};
use crate::api::meta::{ConfigUser, PolicyMode};
use crate::reconcile::common::event::Event;
use crate::reconcile::common::finalizer;
use crate::reconcile::common::grants::VmidGrant;
use crate::reconcile::common::provider;
pub use crate::reconcile::common::tasks::backoff;
use crate::reconcile::identity::Identity;

pub use types::{Container, Observation, Outcome, Plan, Seen, Step, TaskSeen};

/// How soon a pass looks again while something it waits for runs that no
/// status records (a lock, a task the node lists).
pub const WAIT: Duration = Duration::from_secs(2);
/// How soon a pass looks again after starting a task, or while its task
/// runs: the task watcher wakes the resource as soon as the task ended,
/// this is only the fallback when it cannot tell.
pub const TASK_FALLBACK: Duration = Duration::from_secs(10);

/// One pass's decisions so far: the status being built and the events.
pub(super) struct Ctx<'a> {
    ct: &'a ProxmoxContainer,
    id: &'a Identity,
    now: Timestamp,
    status: ProxmoxContainerStatus,
    events: Vec<Event>,
}

impl Ctx<'_> {
    fn time(&self) -> Time {
        Time(self.now)
    }

    fn set(
        &mut self,
        status: ConditionStatus,
        type_: ConditionType,
        reason: Reason,
        message: &str,
    ) {
        let mut c = Condition::new(type_, status, reason, message, self.time());
        c.observed_generation = self.ct.metadata.generation;
        set_condition(&mut self.status.conditions, c);
    }

    /// `Synced`; True whatever `ok` says while `reason` only waits for
    /// what comes by itself (a lock, an image: [`Reason::waits`]).
    fn synced(&mut self, ok: bool, reason: Reason, message: &str) {
        self.set(
            holds(ok || reason.waits()),
            ConditionType::Synced,
            reason,
            message,
        );
    }

    fn ready(&mut self, ok: bool, reason: Reason, message: &str) {
        self.set(holds(ok), ConditionType::Ready, reason, message);
    }

    fn at(&mut self) -> &mut ContainerAtProvider {
        &mut self.status.at_provider
    }

    fn event(&mut self, warning: bool, reason: &'static str, note: String) {
        self.events.push(Event {
            warning,
            reason,
            note,
        });
    }

    fn done(mut self, step: Step, requeue: Duration) -> Plan {
        self.status.observed_generation = self.ct.metadata.generation;
        Plan {
            step,
            status: self.status,
            events: self.events,
            requeue,
        }
    }
}

/// `True` or `False`.
fn holds(ok: bool) -> ConditionStatus {
    if ok {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    }
}

/// Whether the container is at rest: up to date as its status says (Ready
/// and Synced for this generation), nothing in flight, not being deleted.
/// Such a container's firewall is read only at its full looks (see the
/// pass).
pub fn at_rest(ct: &ProxmoxContainer) -> bool {
    let Some(status) = &ct.status else {
        return false;
    };
    let holds = |type_| {
        crate::api::condition::find(&status.conditions, type_)
            .is_some_and(|c| c.status == ConditionStatus::True)
    };
    ct.metadata.deletion_timestamp.is_none()
        && status.at_provider.task.is_none()
        && status.observed_generation == ct.metadata.generation
        && holds(ConditionType::Ready)
        && holds(ConditionType::Synced)
}

/// The VMID recorded in the annotation, if it is one.
pub fn recorded_vmid(ct: &ProxmoxContainer) -> Option<u32> {
    ct.external_name()?.parse().ok()
}

fn has_finalizer(ct: &ProxmoxContainer) -> bool {
    finalizer::has_finalizer(&ct.metadata)
}

/// Decides the pass.
pub fn plan(ct: &ProxmoxContainer, id: &Identity, obs: &Observation, now: Timestamp) -> Plan {
    let mut cx = Ctx {
        ct,
        id,
        now,
        status: ct.status.clone().unwrap_or_default(),
        events: Vec::new(),
    };
    let deleting = ct.metadata.deletion_timestamp.is_some();
    let caps = match ct.spec.managed.mode(&ct.metadata) {
        PolicyMode::Paused => {
            // Nothing at all, as for every kind and as Crossplane does: a
            // deletion waits until the resource is unpaused (it neither
            // destroys nor orphans behind the user's back).
            let why = ct.spec.managed.paused_by(&ct.metadata).unwrap_or_default();
            cx.synced(
                false,
                Reason::ReconcilePaused,
                &format!("reconciliation is paused: {why}"),
            );
            return cx.done(Step::Idle, obs.poll);
        }
        PolicyMode::Invalid(why) => {
            cx.synced(false, Reason::InvalidSpec, &why);
            return cx.done(Step::Idle, obs.poll);
        }
        PolicyMode::Active(caps) => caps,
    };
    if deleting && !has_finalizer(ct) {
        return cx.done(Step::Idle, obs.poll);
    }
    // Before the finalizer: nothing is made on Proxmox without a usable
    // config, and the finalizer cannot be written for it either (a step
    // decided but never carried out came back at once: a hot loop of
    // passes with no condition). Said as for every kind, with its retry.
    if let Err(state) = &obs.connection {
        let (reason, message) = state.problem().unwrap_or_else(|| {
            (
                Reason::ReconcileError,
                "the provider config was not resolved".to_owned(),
            )
        });
        cx.synced(false, reason, &message);
        if deleting && recorded_vmid(ct).is_none() {
            return cx.done(Step::RemoveFinalizer, Duration::ZERO);
        }
        return cx.done(Step::Idle, provider::RETRY);
    }
    if !deleting && !has_finalizer(ct) {
        return cx.done(Step::AddFinalizer, Duration::ZERO);
    }
    if let Some(why) = &obs.proxmox {
        cx.synced(
            false,
            Reason::ReconcileError,
            &format!("cannot ask Proxmox: {why}"),
        );
        return cx.done(Step::Idle, Duration::from_secs(10));
    }
    // 1. The recorded task.
    if let Some(task) = cx.status.at_provider.task.clone() {
        match &obs.task {
            Some(TaskSeen::Running) | None => {
                cx.synced(
                    true,
                    Reason::WaitingForTask,
                    &format!("waiting for task {} ({})", task.type_, task.upid),
                );
                match task.action {
                    ContainerTaskAction::Create
                    | ContainerTaskAction::Restore
                    | ContainerTaskAction::DownloadImage => {
                        cx.ready(false, Reason::Creating, "the container is being created");
                    }
                    ContainerTaskAction::Destroy => {
                        cx.ready(false, Reason::Deleting, "the container is being destroyed");
                    }
                    // Ready stays what it was while the power changes.
                    ContainerTaskAction::Start
                    | ContainerTaskAction::Shutdown
                    | ContainerTaskAction::Stop
                    | ContainerTaskAction::Configure => {}
                }
                return cx.done(Step::Idle, TASK_FALLBACK);
            }
            Some(TaskSeen::Succeeded) => {
                cx.at().task = None;
                cx.at().last_failure = None;
                if task.action == ContainerTaskAction::Restore {
                    // The restored notes may carry the archive's marker:
                    // this record, written with the task's end, is the
                    // proof that this resource made the container (see
                    // `present::claim`).
                    cx.at().restored_vmid = recorded_vmid(ct);
                }
                cx.event(
                    false,
                    "TaskSucceeded",
                    format!("{} {} finished", task.type_, task.upid),
                );
            }
            Some(TaskSeen::Failed(message)) => {
                let count = match &cx.status.at_provider.last_failure {
                    Some(f) if f.action == task.action => f.count + 1,
                    _ => 1,
                };
                cx.at().task = None;
                cx.at().last_failure = Some(ContainerTaskFailure {
                    action: task.action,
                    message: message.clone(),
                    at: Time(now),
                    count,
                    vmid_taken: false,
                });
                cx.event(
                    true,
                    "TaskFailed",
                    format!("{} {} failed: {message}", task.type_, task.upid),
                );
                cx.synced(
                    false,
                    Reason::TaskFailed,
                    &format!(
                        "{} failed: {message}; retried in {}s",
                        task.type_,
                        backoff(count).as_secs()
                    ),
                );
                return cx.done(Step::Idle, backoff(count));
            }
        }
    }
    let Some(vmid) = recorded_vmid(ct) else {
        if deleting {
            // Nothing was ever created under this resource.
            return cx.done(Step::RemoveFinalizer, Duration::ZERO);
        }
        if !caps.create {
            cx.synced(
                false,
                Reason::InvalidSpec,
                "without Create, the crossplane.io/external-name annotation must name the container's VMID",
            );
            return cx.done(Step::Idle, obs.poll);
        }
        if let Some(vmid) = ct.spec.for_provider.vmid {
            return cx.done(Step::RecordVmid(vmid), Duration::ZERO);
        }
        return match &obs.vmid {
            Some(VmidGrant::Reserved(vmid)) => cx.done(Step::RecordVmid(*vmid), Duration::ZERO),
            Some(VmidGrant::Unavailable(why)) => {
                cx.synced(false, Reason::ReconcileError, why);
                cx.done(Step::Idle, Duration::from_secs(30))
            }
            None => {
                cx.synced(false, Reason::ReconcileError, "no VMID could be reserved");
                cx.done(Step::Idle, Duration::from_secs(30))
            }
        };
    };
    cx.at().vmid = Some(vmid);
    // 2. Something of this VMID runs on the node that no status records.
    if let Some(what) = &obs.busy {
        cx.synced(true, Reason::WaitingForTask, &format!("waiting for {what}"));
        return cx.done(Step::Idle, WAIT);
    }
    match &obs.container {
        Container::Unknown => {
            cx.synced(
                false,
                Reason::ReconcileError,
                "the container could not be looked up",
            );
            cx.done(Step::Idle, Duration::from_secs(10))
        }
        Container::Taken(why) => {
            cx.at().state = None;
            cx.at().config = Default::default();
            if reallocates(&mut cx, vmid, deleting, caps.create) {
                return cx.done(Step::ForgetVmid(vmid), Duration::ZERO);
            }
            cx.synced(false, Reason::NotOwned, why);
            cx.ready(false, Reason::Unavailable, why);
            if deleting {
                return cx.done(Step::RemoveFinalizer, Duration::ZERO);
            }
            cx.done(Step::Idle, obs.poll)
        }
        Container::Absent => absent::plan(cx, obs, vmid, deleting, caps.create),
        Container::Present(seen) => present::plan(cx, obs, vmid, seen, deleting, caps),
    }
}

/// Whether to forget a VMID the provider allocated (no `vmid` in the spec)
/// that another
/// guest holds: that guest is not ours (a VMID holds one guest, and ours
/// would carry our marker from its first moment), so this container was
/// never created under it. The VMID is forgotten and another allocated, as
/// a ProxmoxVM does: two provider configs of one cluster, or a guest made
/// by hand, can take an allocated VMID before the create.
pub(super) fn reallocates(cx: &mut Ctx<'_>, vmid: u32, deleting: bool, create: bool) -> bool {
    // Only a VMID the provider allocated (recorded with
    // `external-create-pending`) is given up: one a person named in the
    // external name (an import) is that guest's, reported `NotOwned`.
    let allocated = cx
        .ct
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(crate::api::meta::EXTERNAL_CREATE_PENDING));
    if deleting || !create || !allocated || cx.ct.spec.for_provider.vmid.is_some() {
        return false;
    }
    let why = format!(
        "VMID {vmid} was taken by another guest before this container was created; allocating another"
    );
    cx.synced(true, Reason::ReconcileSuccess, &why);
    cx.ready(false, Reason::Creating, &why);
    cx.event(
        true,
        "VmidTaken",
        format!("VMID {vmid} belongs to another guest; allocating another VMID"),
    );
    true
}

/// Folds what carrying out the step did into the plan: a task started is
/// recorded with its UPID (so that no later pass dispatches it again) and
/// its deadline (the provider config's `tasks.timeout`, as for every
/// kind), a refusal makes Synced False with a backoff.
pub fn settle(mut plan: Plan, outcome: &Outcome, now: Timestamp, task_timeout: Duration) -> Plan {
    match outcome {
        Outcome::Done => plan,
        Outcome::Started { upid, type_ } => {
            if let Some((action, node)) = plan.step.task() {
                let deadline = now + task_timeout;
                plan.status.at_provider.task = Some(ContainerTask {
                    upid: upid.clone(),
                    action,
                    type_: type_.clone(),
                    node: node.to_owned(),
                    target: None,
                    started_at: Time(now),
                    deadline: Time(deadline),
                    progress: None,
                    summary: ContainerTask::summarize(type_, None),
                });
                plan.events.push(Event {
                    warning: false,
                    reason: "TaskStarted",
                    note: format!("{type_} {upid}"),
                });
            }
            plan
        }
        Outcome::Failed(message) => {
            let action = plan
                .step
                .task()
                .map(|(a, _)| a)
                .unwrap_or(ContainerTaskAction::Configure);
            let count = match &plan.status.at_provider.last_failure {
                Some(f) if f.action == action => f.count + 1,
                _ => 1,
            };
            plan.status.at_provider.last_failure = Some(ContainerTaskFailure {
                action,
                message: message.clone(),
                at: Time(now),
                count,
                vmid_taken: false,
            });
            let mut c = Condition::new(
                ConditionType::Synced,
                ConditionStatus::False,
                Reason::ReconcileError,
                message.clone(),
                Time(now),
            );
            c.observed_generation = plan.status.observed_generation;
            set_condition(&mut plan.status.conditions, c);
            plan.events.push(Event {
                warning: true,
                reason: "ReconcileError",
                note: message.clone(),
            });
            plan.requeue = backoff(count);
            plan
        }
    }
}

fn invalid_spec(mut cx: Ctx<'_>, invalid: &Invalid, poll: Duration) -> Plan {
    cx.synced(false, Reason::InvalidSpec, &invalid.to_string());
    cx.done(Step::Idle, poll)
}
