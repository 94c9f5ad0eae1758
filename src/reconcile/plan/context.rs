//! The pass's context (what the phases read) and its output under
//! construction (what they write).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::input::{ImageRef, Needs, Observation, PlanInput, ProviderState, TaskRef, TemplateRef};
use super::output::{Event, Plan, Step, time};
use super::{report, secs};
use crate::api::{
    Condition, ConditionStatus, ConditionType, ProxmoxVM, ProxmoxVMStatus, Reason,
    meta::{self, Capabilities, PolicyMode, policy_mode},
    provider_config::{Limits, Timing},
    set_condition,
    vm::{InFlightTask, PowerState, TaskAction, VmParameters},
};

/// What every phase reads.
pub(super) struct Ctx<'a> {
    pub input: &'a PlanInput<'a>,
    pub vm: &'a ProxmoxVM,
    pub spec: &'a VmParameters,
    /// The current status (empty when the resource has none yet).
    pub status: ProxmoxVMStatus,
    pub caps: Capabilities,
    pub timing: Timing,
    pub limits: Limits,
    pub obs: &'a Observation,
    pub now: Timestamp,
}

impl<'a> Ctx<'a> {
    pub fn new(input: &'a PlanInput<'a>) -> Self {
        let caps = match policy_mode(&input.vm.spec.management_policies) {
            PolicyMode::Active(caps) => caps,
            PolicyMode::Paused | PolicyMode::Invalid(_) => Capabilities {
                create: false,
                update: false,
                delete: false,
            },
        };
        let (timing, limits) = match &input.provider {
            ProviderState::Ready { timing, limits } => (*timing, limits.clone()),
            _ => (Timing::default(), Limits::default()),
        };
        Self {
            input,
            vm: input.vm,
            spec: &input.vm.spec.for_provider,
            status: input.vm.status.clone().unwrap_or_default(),
            caps,
            timing,
            limits,
            obs: &input.observed,
            now: input.now,
        }
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.vm
            .metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    /// The external name, parsed as a VMID.
    pub fn external_name(&self) -> Option<Result<u32, String>> {
        let text = self.vm.external_name()?;
        Some(
            text.parse::<u32>()
                .ok()
                .filter(|id| (100..=999_999_999).contains(id))
                .ok_or_else(|| text.to_owned()),
        )
    }

    /// The VMID, once recorded.
    pub fn vmid(&self) -> Option<u32> {
        self.external_name()?.ok()
    }

    pub fn vmid_text(&self) -> String {
        self.vmid()
            .map_or_else(|| "(no VMID yet)".into(), |id| id.to_string())
    }

    fn annotation_time(&self, key: &str) -> Option<Timestamp> {
        // An unreadable time still counts as set, as early as possible.
        self.annotation(key)
            .map(|t| t.parse().unwrap_or(Timestamp::MIN))
    }

    /// A create may have been sent and its success is not recorded:
    /// `external-create-pending` is set and newer than `-succeeded`.
    pub fn create_pending(&self) -> bool {
        match (
            self.annotation_time(meta::EXTERNAL_CREATE_PENDING),
            self.annotation_time(meta::EXTERNAL_CREATE_SUCCEEDED),
        ) {
            (Some(pending), Some(succeeded)) => pending > succeeded,
            (pending, _) => pending.is_some(),
        }
    }

    /// The create task is known to have succeeded (and no create was
    /// attempted since).
    pub fn create_succeeded(&self) -> bool {
        self.annotation(meta::EXTERNAL_CREATE_SUCCEEDED).is_some() && !self.create_pending()
    }

    pub fn deleting(&self) -> bool {
        self.vm.metadata.deletion_timestamp.is_some()
    }

    pub fn deletion_time(&self) -> Option<Timestamp> {
        self.vm.metadata.deletion_timestamp.as_ref().map(|t| t.0)
    }

    pub fn has_finalizer(&self) -> bool {
        self.vm
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == meta::FINALIZER)
    }

    pub fn uid(&self) -> &str {
        self.vm.metadata.uid.as_deref().unwrap_or_default()
    }

    /// The VM's name on Proxmox: the spec's, else the resource's.
    pub fn vm_name(&self) -> String {
        self.spec
            .name
            .clone()
            .or_else(|| self.vm.metadata.name.clone())
            .unwrap_or_default()
    }

    pub fn task(&self) -> Option<&InFlightTask> {
        self.status.at_provider.task.as_ref()
    }

    /// The node the VM is to be created on, once known.
    pub fn chosen_node(&self) -> Option<String> {
        self.status
            .at_provider
            .node
            .clone()
            .or_else(|| self.spec.node.clone())
    }

    /// Whether the create imports disks (and so counts against the node's
    /// import limit).
    pub fn imports(&self) -> bool {
        self.spec
            .disks
            .iter()
            .any(|d| d.image.is_some() || d.import_from.is_some())
    }

    /// How long an up-to-date VM waits before the next drift check.
    pub fn resync_interval(&self) -> Duration {
        self.annotation(meta::POLL_INTERVAL)
            .and_then(|text| text.parse::<kube::core::Duration>().ok())
            .filter(|d| !d.is_negative())
            .map(Duration::from)
            .map_or(self.timing.resync_interval, |d| {
                d.max(Duration::from_secs(5))
            })
    }

    /// Whether the observed power state is what the spec asks for.
    pub fn wants_running(&self) -> bool {
        self.spec.power_state == PowerState::Running
    }

    fn on_create_path(&self) -> bool {
        self.caps.create && !self.deleting() && !self.create_succeeded()
    }

    /// What to observe for [`super::plan`].
    pub fn needs(&self) -> Needs {
        let creating = self.on_create_path();
        let node = self.chosen_node();
        let images = match (&node, creating && self.spec.clone.is_none()) {
            (Some(node), true) => self
                .spec
                .disks
                .iter()
                .filter_map(|d| d.image.as_ref())
                .map(|image| ImageRef {
                    node: node.clone(),
                    storage: image.storage.clone(),
                    volume: image.volume(),
                })
                .collect(),
            _ => vec![],
        };
        let template = self.spec.clone.as_ref().filter(|_| creating).and_then(|c| {
            match (c.template_vmid, &c.template_name) {
                (Some(vmid), _) => Some(TemplateRef::Vmid(vmid)),
                (None, Some(name)) => Some(TemplateRef::Name(name.clone())),
                (None, None) => None,
            }
        });
        let heavy = self.imports() || self.spec.clone.is_some();
        Needs {
            vmid: self.vmid(),
            task: self.task().map(|t| TaskRef {
                upid: t.upid.clone(),
                node: t.node.clone(),
            }),
            active_tasks_on: node.clone(),
            images,
            nodes: creating && node.is_none() && self.spec.clone.is_none(),
            template,
            password: self
                .spec
                .cloud_init
                .as_ref()
                .and_then(|ci| ci.password_secret_ref.as_ref())
                .filter(|_| !self.deleting())
                .map(|r| (r.name.clone(), r.key.clone())),
            load_on: node.filter(|_| creating && heavy),
        }
    }
}

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

/// A phase's decision.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Decision {
    step: Step,
    requeue: Option<Duration>,
    synced: Option<Say>,
    ready: Readiness,
    events: Vec<Event>,
}

impl Decision {
    pub fn new(step: Step, requeue: Option<Duration>, synced: Say) -> Self {
        Self {
            step,
            requeue,
            synced: Some(synced),
            ready: Readiness::Observed,
            events: vec![],
        }
    }

    /// A decision that changes no condition (a conflict: retry at once).
    pub fn silent(step: Step, requeue: Option<Duration>) -> Self {
        Self {
            step,
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

/// The status and events under construction.
pub(super) struct Out {
    pub status: ProxmoxVMStatus,
    pub events: Vec<Event>,
}

impl Out {
    pub fn new(ctx: &Ctx) -> Self {
        Self::from_status(ctx, ctx.status.clone())
    }

    pub fn from_status(_ctx: &Ctx, status: ProxmoxVMStatus) -> Self {
        Self {
            status,
            events: vec![],
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
    pub fn finish(mut self, ctx: &Ctx, decision: Decision) -> Plan {
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
        let pending_task = step.action().map(|action| pending_task(ctx, &step, action));
        let connection = report::connection(ctx, &self.status);
        self.events.append(&mut events);
        Plan {
            step,
            status: self.status,
            requeue_after: requeue,
            events: self.events,
            connection,
            pending_task,
        }
    }
}

/// Ready from what was observed, when the phase did not say.
fn observed_readiness(ctx: &Ctx, synced: Option<&Say>) -> Say {
    let doing = synced.map(|s| s.message.clone()).unwrap_or_default();
    if ctx.deleting() {
        return Say::no(Reason::Deleting, doing);
    }
    let creating = ctx.caps.create && !ctx.create_succeeded();
    match &ctx.obs.vm {
        super::VmState::Present(vm) => {
            if matches!(vm.lock.as_deref(), Some("create" | "clone")) {
                return Say::no(Reason::Creating, doing);
            }
            let running = vm.power == super::Power::Running;
            if running == ctx.wants_running() && vm.power != super::Power::Unknown {
                Say::yes(Reason::Available, "")
            } else if creating {
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
        _ if ctx.caps.create => Say::no(Reason::Creating, doing),
        _ => Say::no(
            Reason::Unavailable,
            format!("VM {} does not exist", ctx.vmid_text()),
        ),
    }
}

/// The in-flight record for the task a dispatching step starts; the glue
/// fills in the UPID with [`Plan::task_started`].
fn pending_task(ctx: &Ctx, step: &Step, action: TaskAction) -> InFlightTask {
    let (node, target) = match step {
        Step::DownloadImage {
            node,
            storage,
            file_name,
            ..
        } => (node.clone(), Some(format!("{storage}:import/{file_name}"))),
        Step::CloneVm { source_node, .. } => (source_node.clone(), None),
        Step::ResizeDisk { node, slot, .. } => (node.clone(), Some(slot.clone())),
        Step::CreateVm { node, .. }
        | Step::Configure { node, .. }
        | Step::Start { node, .. }
        | Step::Shutdown { node, .. }
        | Step::Stop { node, .. }
        | Step::Destroy { node, .. } => (node.clone(), None),
        _ => (String::new(), None),
    };
    let timeout = match step {
        // A shutdown ends by itself after its own timeout; give it that plus
        // the usual margin before calling it late.
        Step::Shutdown { timeout, .. } => *timeout + ctx.timing.poll_interval * 10,
        _ => ctx.timing.task_timeout,
    };
    let type_ = action.pve_type().to_owned();
    InFlightTask {
        upid: String::new(),
        action,
        summary: InFlightTask::summarize(&type_, None),
        type_,
        node,
        target,
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
