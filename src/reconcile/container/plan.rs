//! The decisions for one ProxmoxContainer pass, as a pure function: the
//! resource, what the pass observed and the time in; one [`Step`], the
//! status to write, the events and when to look again out. No I/O, no
//! clock: every branch is table-tested in `tests.rs`.
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

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pve_client::lxc::{ContainerConfig, ContainerUpdate, CreateContainer, OciPull};

use super::render::{self, Invalid};
use crate::api::condition::{Condition, ConditionStatus, ConditionType, Reason, set_condition};
use crate::api::container::{ContainerAtProvider, ProxmoxContainer, ProxmoxContainerStatus};
use crate::api::meta::{self, ConfigUser, PolicyMode, policy_mode};
use crate::api::vm::{InFlightTask, ObservedState, PowerState, TaskAction, TaskFailure};
use crate::reconcile::identity::Identity;
use crate::reconcile::plan::{Event, Ownership, Placement, VmidGrant, owner_of};

/// How soon a pass looks again while something it waits for runs that no
/// status records (a lock, a task the node lists).
pub const WAIT: Duration = Duration::from_secs(2);
/// How soon a pass looks again after starting a task, or while its task
/// runs: the task watcher wakes the resource as soon as the task ended,
/// this is only the fallback when it cannot tell.
pub const TASK_FALLBACK: Duration = Duration::from_secs(10);
/// How long a task may take before it is reported as late.
const TASK_DEADLINE: Duration = Duration::from_secs(1800);

/// The container as the pass found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Container {
    /// Not looked at (no VMID yet, or nothing to look with).
    Unknown,
    /// No guest has the VMID.
    Absent,
    /// The VMID belongs to a guest that is not a container (a VM).
    Taken(String),
    /// The container, on `node`.
    Present(Seen),
}

/// An existing container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub node: String,
    pub config: ContainerConfig,
    pub running: bool,
}

/// The recorded task, as Proxmox tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskSeen {
    Running,
    Succeeded,
    Failed(String),
}

/// What the pass observed, for the plan to decide from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The provider config: `Err` says why it cannot be used.
    pub connection: Result<(), String>,
    /// The resync interval of the config.
    pub poll: Duration,
    /// A VMID reserved for this resource (asked for without an
    /// external name and without `vmid`).
    pub vmid: Option<VmidGrant>,
    /// Where to create it (asked for without `node`).
    pub placement: Option<Placement>,
    pub container: Container,
    /// The recorded task's state.
    pub task: Option<TaskSeen>,
    /// A task of this VMID (or this OCI pull) the node lists as running.
    pub busy: Option<String>,
    /// Whether the OCI image's file is on the node's storage (looked at
    /// only before a create from an image).
    pub template_present: Option<bool>,
    /// Whether the password Secret's key could be read (`Err`: why not);
    /// `None`: no password asked for, or not needed this pass.
    pub password: Option<Result<(), String>>,
    /// Proxmox could not be asked (why): nothing is decided this pass.
    pub proxmox: Option<String>,
}

impl Observation {
    /// Nothing observed yet, with the config's resync interval.
    pub fn unobserved(poll: Duration) -> Self {
        Self {
            connection: Ok(()),
            poll,
            vmid: None,
            placement: None,
            container: Container::Unknown,
            task: None,
            busy: None,
            template_present: None,
            password: None,
            proxmox: None,
        }
    }
}

/// The one step a pass takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing to do now.
    Idle,
    AddFinalizer,
    RemoveFinalizer,
    /// Records the VMID in the external-name annotation (before any create).
    RecordVmid(u32),
    /// Pulls the OCI image into `storage` on `node`.
    Pull {
        node: String,
        storage: String,
        pull: OciPull,
    },
    /// Creates the container (the pass adds the password).
    Create {
        node: String,
        create: Box<CreateContainer>,
    },
    /// Corrects drift (synchronous).
    Configure {
        node: String,
        vmid: u32,
        update: ContainerUpdate,
    },
    Start {
        node: String,
        vmid: u32,
    },
    Shutdown {
        node: String,
        vmid: u32,
    },
    Stop {
        node: String,
        vmid: u32,
    },
    /// Destroys it with `purge` and `destroy-unreferenced-disks`.
    Destroy {
        node: String,
        vmid: u32,
    },
}

impl Step {
    /// The action a task of this step is recorded under, with the node it
    /// runs on; `None` for steps that start no task.
    pub fn task(&self) -> Option<(TaskAction, &str)> {
        match self {
            Step::Pull { node, .. } => Some((TaskAction::DownloadImage, node)),
            Step::Create { node, .. } => Some((TaskAction::Create, node)),
            Step::Start { node, .. } => Some((TaskAction::Start, node)),
            Step::Shutdown { node, .. } => Some((TaskAction::Shutdown, node)),
            Step::Stop { node, .. } => Some((TaskAction::Stop, node)),
            Step::Destroy { node, .. } => Some((TaskAction::Destroy, node)),
            Step::Idle
            | Step::AddFinalizer
            | Step::RemoveFinalizer
            | Step::RecordVmid(_)
            | Step::Configure { .. } => None,
        }
    }
}

/// What a pass decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub step: Step,
    pub status: ProxmoxContainerStatus,
    pub events: Vec<Event>,
    /// When to look again.
    pub requeue: Duration,
}

/// What carrying out the step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done without a task.
    Done,
    /// A task started.
    Started { upid: String, type_: String },
    /// Proxmox or Kubernetes refused (the message is for people).
    Failed(String),
}

struct Ctx<'a> {
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

    fn synced(&mut self, ok: bool, reason: Reason, message: &str) {
        let status = if ok {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        self.set(status, ConditionType::Synced, reason, message);
    }

    fn ready(&mut self, ok: bool, reason: Reason, message: &str) {
        let status = if ok {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        self.set(status, ConditionType::Ready, reason, message);
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

/// The VMID recorded in the annotation, if it is one.
pub fn recorded_vmid(ct: &ProxmoxContainer) -> Option<u32> {
    ct.external_name()?.parse().ok()
}

fn has_finalizer(ct: &ProxmoxContainer) -> bool {
    ct.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == meta::FINALIZER))
}

/// The backoff after `count` consecutive failures: 5 s doubling, at most
/// 5 minutes.
pub fn backoff(count: u32) -> Duration {
    Duration::from_secs(
        5u64.saturating_mul(1 << count.min(6).saturating_sub(1))
            .min(300),
    )
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
    let caps = match policy_mode(&ct.spec.management_policies) {
        PolicyMode::Paused => {
            cx.synced(
                false,
                Reason::ReconcilePaused,
                "managementPolicies is []: paused",
            );
            return cx.done(
                if deleting && has_finalizer(ct) {
                    Step::RemoveFinalizer
                } else {
                    Step::Idle
                },
                obs.poll,
            );
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
    if !deleting && !has_finalizer(ct) {
        return cx.done(Step::AddFinalizer, Duration::ZERO);
    }
    if let Err(why) = &obs.connection {
        cx.synced(false, Reason::ProviderConfigNotFound, why);
        if deleting && recorded_vmid(ct).is_none() {
            return cx.done(Step::RemoveFinalizer, Duration::ZERO);
        }
        return cx.done(Step::Idle, Duration::from_secs(30));
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
                    TaskAction::Create | TaskAction::DownloadImage => {
                        cx.ready(false, Reason::Creating, "the container is being created");
                    }
                    TaskAction::Destroy => {
                        cx.ready(false, Reason::Deleting, "the container is being destroyed");
                    }
                    // Ready stays what it was while the power changes.
                    TaskAction::Start
                    | TaskAction::Shutdown
                    | TaskAction::Stop
                    | TaskAction::Clone
                    | TaskAction::Configure
                    | TaskAction::ResizeDisk
                    | TaskAction::Migrate
                    | TaskAction::MoveDisk
                    | TaskAction::ConfigureHa
                    | TaskAction::UploadSeed
                    | TaskAction::DeleteVolume
                    | TaskAction::Template => {}
                }
                return cx.done(Step::Idle, TASK_FALLBACK);
            }
            Some(TaskSeen::Succeeded) => {
                cx.at().task = None;
                cx.at().last_failure = None;
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
                cx.at().last_failure = Some(TaskFailure {
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
            cx.synced(false, Reason::NotOwned, why);
            cx.ready(false, Reason::Unavailable, why);
            if deleting {
                return cx.done(Step::RemoveFinalizer, Duration::ZERO);
            }
            cx.done(Step::Idle, obs.poll)
        }
        Container::Absent => absent(cx, obs, vmid, deleting, caps.create),
        Container::Present(seen) => present(cx, obs, vmid, seen, deleting, caps),
    }
}

fn absent(mut cx: Ctx<'_>, obs: &Observation, vmid: u32, deleting: bool, create: bool) -> Plan {
    cx.at().state = Some(ObservedState::Absent);
    cx.at().lock = None;
    if deleting {
        cx.ready(false, Reason::Deleting, "the container is gone");
        return cx.done(Step::RemoveFinalizer, Duration::ZERO);
    }
    if !create {
        cx.synced(
            false,
            Reason::ReconcileError,
            &format!("container {vmid} does not exist and the policies do not allow creating it"),
        );
        cx.ready(false, Reason::Unavailable, "the container does not exist");
        return cx.done(Step::Idle, obs.poll);
    }
    // A backoff after a failed create or pull is waited out.
    if let Some(f) = &cx.status.at_provider.last_failure {
        let wait = backoff(f.count);
        let since = Duration::try_from(cx.now.duration_since(f.at.0)).unwrap_or_default();
        if since < wait {
            return cx.done(Step::Idle, wait - since);
        }
    }
    let spec = &cx.ct.spec.for_provider;
    let node = match (&spec.node, &obs.placement) {
        (Some(node), _) => node.clone(),
        (None, Some(Placement::Chosen { node, .. })) => node.clone(),
        (None, Some(Placement::NoNode { why, .. })) => {
            let why = why.clone();
            cx.synced(false, Reason::ExceedsNodeLimits, &why);
            return cx.done(Step::Idle, Duration::from_secs(30));
        }
        (None, None) => {
            cx.synced(false, Reason::ReconcileError, "no node could be chosen");
            return cx.done(Step::Idle, Duration::from_secs(30));
        }
    };
    let Some(volume) = render::template_volume(&spec.template) else {
        cx.synced(false, Reason::InvalidSpec, "template needs volume or oci");
        return cx.done(Step::Idle, obs.poll);
    };
    cx.ready(false, Reason::Creating, "the container is being created");
    if let Some(oci) = &spec.template.oci {
        match obs.template_present {
            Some(true) => {}
            Some(false) => {
                cx.at().node = Some(node.clone());
                cx.at().template_volume = Some(volume.clone());
                cx.synced(
                    true,
                    Reason::DownloadingImage,
                    &format!("pulling {} into {volume}", oci.reference),
                );
                return cx.done(
                    Step::Pull {
                        node,
                        storage: oci.storage.clone(),
                        pull: render::oci_pull(oci),
                    },
                    TASK_FALLBACK,
                );
            }
            None => {
                cx.synced(
                    false,
                    Reason::ReconcileError,
                    &format!("cannot tell whether {volume} is on {node}"),
                );
                return cx.done(Step::Idle, Duration::from_secs(10));
            }
        }
    }
    if let Some(Err(why)) = &obs.password {
        let why = why.clone();
        cx.synced(false, Reason::SecretNotFound, &why);
        return cx.done(Step::Idle, Duration::from_secs(30));
    }
    match render::create(spec, cx.id, vmid, volume.clone()) {
        Ok(create) => {
            cx.at().node = Some(node.clone());
            cx.at().template_volume = Some(volume);
            cx.synced(
                true,
                Reason::Creating,
                &format!("creating container {vmid} on {node}"),
            );
            cx.done(
                Step::Create {
                    node,
                    create: Box::new(create),
                },
                TASK_FALLBACK,
            )
        }
        Err(invalid) => invalid_spec(cx, &invalid, obs.poll),
    }
}

fn invalid_spec(mut cx: Ctx<'_>, invalid: &Invalid, poll: Duration) -> Plan {
    cx.synced(false, Reason::InvalidSpec, &invalid.to_string());
    cx.done(Step::Idle, poll)
}

fn present(
    mut cx: Ctx<'_>,
    obs: &Observation,
    vmid: u32,
    seen: &Seen,
    deleting: bool,
    caps: meta::Capabilities,
) -> Plan {
    let lock = seen.config.lock().map(str::to_owned);
    cx.at().node = Some(seen.node.clone());
    cx.at().lock = lock.clone();
    cx.at().state = Some(if seen.running {
        ObservedState::Running
    } else {
        ObservedState::Stopped
    });
    // While PVE creates it, the config holds only the lock: the marker
    // comes with the rest at the end of the create.
    if lock.as_deref() == Some("create") {
        cx.synced(
            true,
            Reason::WaitingForTask,
            "the container is being created (lock: create)",
        );
        cx.ready(false, Reason::Creating, "the container is being created");
        return cx.done(Step::Idle, WAIT);
    }
    match owner_of(seen.config.get("description"), &cx.id.uid) {
        Ownership::Ours => {}
        Ownership::Foreign(uid) => {
            let why = format!(
                "container {vmid} is owned by another resource (uid {uid}); it is left untouched"
            );
            return not_ours(cx, &why, deleting, obs.poll);
        }
        Ownership::Unmarked => {
            let why = format!(
                "container {vmid} exists without this resource's owner marker; it is left untouched"
            );
            return not_ours(cx, &why, deleting, obs.poll);
        }
    }
    if let Some(lock) = lock {
        cx.synced(
            false,
            Reason::VmLocked,
            &format!("the container is locked ({lock})"),
        );
        return cx.done(Step::Idle, Duration::from_secs(5));
    }
    let node = seen.node.clone();
    if deleting {
        cx.ready(false, Reason::Deleting, "the container is being destroyed");
        if !caps.delete {
            return cx.done(Step::RemoveFinalizer, Duration::ZERO);
        }
        if seen.running {
            cx.synced(
                true,
                Reason::Deleting,
                "stopping the container to destroy it",
            );
            return cx.done(Step::Stop { node, vmid }, TASK_FALLBACK);
        }
        cx.synced(true, Reason::Deleting, "destroying the container");
        return cx.done(Step::Destroy { node, vmid }, TASK_FALLBACK);
    }
    let spec = &cx.ct.spec.for_provider;
    let drift = match render::drift(spec, cx.id, &seen.config) {
        Ok(drift) => drift,
        Err(invalid) => return invalid_spec(cx, &invalid, obs.poll),
    };
    cx.at().unmanaged_drift = drift.unmanaged.clone();
    if caps.update && !drift.update.is_empty() {
        let keys: Vec<&str> = drift
            .update
            .set
            .keys()
            .chain(drift.update.delete.iter())
            .map(String::as_str)
            .collect();
        let note = format!("correcting {}", keys.join(", "));
        cx.event(false, "Configured", note.clone());
        cx.synced(true, Reason::ReconcileSuccess, &note);
        return cx.done(
            Step::Configure {
                node,
                vmid,
                update: drift.update,
            },
            Duration::ZERO,
        );
    }
    let want_running = spec.power_state == PowerState::Running;
    if caps.update && want_running != seen.running {
        let step = if want_running {
            Step::Start { node, vmid }
        } else {
            Step::Shutdown { node, vmid }
        };
        cx.synced(true, Reason::ReconcileSuccess, "changing the power state");
        cx.ready(
            false,
            Reason::Unavailable,
            "not in the requested power state yet",
        );
        return cx.done(step, TASK_FALLBACK);
    }
    let message = if drift.unmanaged.is_empty() {
        String::new()
    } else {
        drift.unmanaged.join("; ")
    };
    cx.synced(true, Reason::ReconcileSuccess, &message);
    if want_running == seen.running {
        cx.ready(true, Reason::Available, "");
    } else {
        cx.ready(
            false,
            Reason::Unavailable,
            "not in the requested power state (Update not allowed)",
        );
    }
    cx.done(Step::Idle, obs.poll)
}

fn not_ours(mut cx: Ctx<'_>, why: &str, deleting: bool, poll: Duration) -> Plan {
    cx.synced(false, Reason::NotOwned, why);
    cx.ready(false, Reason::Unavailable, why);
    if deleting {
        return cx.done(Step::RemoveFinalizer, Duration::ZERO);
    }
    cx.done(Step::Idle, poll)
}

/// Folds what carrying out the step did into the plan: a task started is
/// recorded with its UPID (so that no later pass dispatches it again), a
/// refusal makes Synced False with a backoff.
pub fn settle(mut plan: Plan, outcome: &Outcome, now: Timestamp) -> Plan {
    match outcome {
        Outcome::Done => plan,
        Outcome::Started { upid, type_ } => {
            if let Some((action, node)) = plan.step.task() {
                let deadline = now + TASK_DEADLINE;
                plan.status.at_provider.task = Some(InFlightTask {
                    upid: upid.clone(),
                    action,
                    type_: type_.clone(),
                    node: node.to_owned(),
                    target: None,
                    started_at: Time(now),
                    deadline: Time(deadline),
                    progress: None,
                    summary: InFlightTask::summarize(type_, None),
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
                .unwrap_or(TaskAction::Configure);
            let count = match &plan.status.at_provider.last_failure {
                Some(f) if f.action == action => f.count + 1,
                _ => 1,
            };
            plan.status.at_provider.last_failure = Some(TaskFailure {
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
