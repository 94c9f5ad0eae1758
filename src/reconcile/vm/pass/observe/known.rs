//! What need not be asked: the VM as the last look left it, carried
//! forward through what this process did to it since.
//!
//! Proxmox is asked only what it has not already said. The VM is not read
//! again
//!
//! * while it cannot exist: the last look found no VM with the VMID, and
//!   this process started nothing for the resource since (a resource
//!   waiting for an import slot costs no request; the create that follows
//!   is refused if someone else took the VMID meanwhile);
//! * right after a pass that only wrote to Kubernetes (an annotation, the
//!   finalizer): the look of that pass is seconds old and nothing was sent
//!   to Proxmox since (a pass on a timer, which is there to notice changes,
//!   always looks);
//! * in full after a task of ours ended as it should: its effect is known
//!   (a create leaves the VM stopped on the task's node, a start leaves it
//!   running, a shutdown stopped, a destroy gone). Only what the task may
//!   have changed in ways the provider cannot tell is read: the config
//!   after a create, a resize or a config update; the guest agent after a
//!   start.
//!
//! An idle VM (up to date, nothing in flight) is looked at coarsely
//! between its full looks: from the shared cluster view alone, which shows
//! whether it is as its last full look found it ([`coarse`]).
//!
//! The guest agent is asked at full looks when it has not answered, the VM
//! restarted (its uptime went down, or a start of ours ended) or its answer
//! is [`AGENT_EVERY`] old; and at coarse looks while a VM that just started
//! has not answered yet.
//!
//! Everything else is a full look. This memory is the process's own: a new
//! leader starts with none and looks at every VM once, which is always
//! safe.

use crate::reconcile::runtime::memory::Remembered;
use std::time::{Duration, Instant};

use crate::api::vm::TaskAction;
use crate::reconcile::inventory::VmView;
use crate::reconcile::vm::plan::{AgentState, Depth, ObservedVm, Power, TaskState, VmState};

/// How long a look is reused by a pass that follows one that only wrote to
/// Kubernetes, or waits for the guest agent.
pub const REUSE_FOR: Duration = Duration::from_secs(30);
/// How long the guest agent's answer is trusted while the VM keeps running
/// (a restart, seen as its uptime going down, asks again at once): at rest
/// it is asked at every other full look of the default 20-minute cycle.
pub const AGENT_EVERY: Duration = Duration::from_secs(1800);

/// What the agent "said" right after a start of ours, before it is asked.
pub const JUST_STARTED: &str = "the VM has just started; its guest agent is asked shortly";

/// What the last look showed of a resource's VM.
#[derive(Clone, Debug, PartialEq)]
pub struct Known {
    /// The VMID looked up.
    pub vmid: u32,
    /// What was found (never [`VmState::Unknown`]).
    pub vm: VmState,
    /// When.
    pub at: Instant,
    /// This process sent the VM something since (a task, an HA write), or
    /// tried to: the look no longer says what the VM is.
    pub touched: bool,
    /// The pass that looked ended by writing the resource's metadata (an
    /// annotation, the finalizer), and the next pass, which that write
    /// triggers, may take the look as its own.
    pub written: bool,
    /// When the guest agent last answered, and the VM's uptime (seconds, as
    /// the cluster view shows it) then.
    pub agent: Option<(Instant, Option<u64>)>,
    /// What the cluster view showed of the VM when it was read in full
    /// (a view read before the VM, never after: see [`coarse`]).
    pub shape: Option<VmView>,
}

impl Remembered for Known {
    fn touch(&mut self) {
        self.touched = true;
    }

    fn wrote(&mut self) {
        self.written = true;
    }
}

impl Known {
    /// No VM has the VMID (as of now).
    pub fn absent(vmid: u32) -> Self {
        Self {
            vmid,
            vm: VmState::Absent,
            at: Instant::now(),
            touched: false,
            written: false,
            agent: None,
            shape: None,
        }
    }
}

/// How to look at the VM in this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Look {
    /// Nothing to read: this is the VM.
    Known(VmState),
    /// Our task ended as it should: this is the VM, except that its config
    /// is read when `read_config`, and the agent asked when `ask_agent`.
    AfterTask {
        vm: ObservedVm,
        read_config: bool,
        ask_agent: bool,
    },
    /// The coarse look of an idle VM: the cluster view only (see
    /// [`coarse`]).
    Idle,
    /// `status/current`, the config and the agent.
    Full,
}

/// What this pass knows of the task it recorded.
#[derive(Clone, Copy, Debug)]
pub struct RecordedTask<'a> {
    /// What the task was for.
    pub action: TaskAction,
    /// Its state, as observed in this pass.
    pub state: &'a TaskState,
    /// Its node.
    pub node: &'a str,
    /// The task type Proxmox gave it (`qmstart`; `hastart` when HA manages
    /// the VM, whose effect comes later, from HA).
    pub type_: &'a str,
}

/// Decides how to look at VMID `vmid` from what is known of it.
pub fn look(
    known: Option<&Known>,
    vmid: u32,
    task: Option<RecordedTask<'_>>,
    depth: Depth,
    now: Instant,
) -> Look {
    let known = known.filter(|k| k.vmid == vmid);
    let fallback = match depth {
        Depth::Idle => Look::Idle,
        Depth::Full => Look::Full,
    };
    let Some(known) = known else {
        return fallback;
    };
    if let Some(task) = task {
        // The pass before saw this task end and only wrote the metadata
        // (the creation recorded before the end is consumed, see
        // `plan::converge::record_creation_first`): its look, seconds old
        // and taken after the end, is this pass's.
        if known.written
            && !known.touched
            && task.action == TaskAction::Create
            && matches!(task.state, TaskState::Finished(_))
            && matches!(known.vm, VmState::Present(_))
            && now.saturating_duration_since(known.at) < REUSE_FOR
        {
            return Look::Known(known.vm.clone());
        }
        return after_task(known, task).unwrap_or(Look::Full);
    }
    if known.touched {
        return Look::Full;
    }
    match &known.vm {
        // Nothing was sent since it was found missing: it still is.
        VmState::Absent => Look::Known(VmState::Absent),
        VmState::Present(vm) if now.saturating_duration_since(known.at) < REUSE_FOR => {
            // After a metadata write, the pass that write triggers takes
            // the look as its own, asking only the agent when its answer is
            // due. A pass on a timer looks (a full look asks the agent too,
            // a coarse one while a VM just started has not answered): one
            // that only asked the agent again at the node last seen would
            // renew the look without ever finding a VM that moved.
            if !known.written {
                return fallback;
            }
            if vm.power == Power::Running && agent_due(known, &vm.agent, now) {
                Look::AfterTask {
                    vm: vm.clone(),
                    read_config: false,
                    ask_agent: true,
                }
            } else {
                Look::Known(known.vm.clone())
            }
        }
        VmState::Present(_) | VmState::Unknown => fallback,
    }
}

/// The look of a pass that is to delete the VM, when nothing is recorded
/// in flight: the VM as last seen, if the cluster view proves it the same
/// VM (running on the same node since before that look: a VM is stopped
/// before it can be destroyed and replaced, which resets its uptime); else
/// its config is read again (ownership is decided from the config, and a
/// delete must never reach a VM that is not this resource's). `None`: a
/// full look.
pub fn look_to_delete(
    known: Option<&Known>,
    vmid: u32,
    listed: Option<&VmView>,
    now: Instant,
) -> Option<Look> {
    let known = known.filter(|k| k.vmid == vmid && !k.touched)?;
    let VmState::Present(vm) = &known.vm else {
        return None;
    };
    let listed = listed.filter(|l| l.node == vm.node && l.lock.is_none())?;
    let age = now.saturating_duration_since(known.at).as_secs();
    let same =
        vm.power == Power::Running && listed.running && listed.uptime.is_some_and(|up| up > age);
    if same {
        return Some(Look::Known(known.vm.clone()));
    }
    let power = if listed.running {
        Power::Running
    } else if listed.status == "stopped" {
        Power::Stopped
    } else {
        return None;
    };
    Some(carried(vm, power, AgentState::NotAsked, true))
}

/// The look that takes `vm` as it was but for its power, unlocked, with
/// `agent` as what its guest agent said: its config read again when
/// `read_config`, its agent not asked.
fn carried(vm: &ObservedVm, power: Power, agent: AgentState, read_config: bool) -> Look {
    Look::AfterTask {
        vm: ObservedVm {
            power,
            lock: None,
            agent,
            ..vm.clone()
        },
        read_config,
        ask_agent: false,
    }
}

/// The VM after our task ended, when its effect is known.
fn after_task(known: &Known, task: RecordedTask<'_>) -> Option<Look> {
    let TaskState::Finished(outcome) = task.state else {
        return None;
    };
    // Only Proxmox's own task for the action has the effect known here
    // (an HA request ends before HA acts on it).
    if !outcome.is_success() || task.type_ != task.action.pve_type() {
        return None;
    }
    let present = match &known.vm {
        VmState::Present(vm) => Some(vm),
        VmState::Absent | VmState::Unknown => None,
    };
    match task.action {
        // A create without `start` leaves a stopped VM on the task's node
        // (a failed create removes it again).
        TaskAction::Create => Some(Look::AfterTask {
            vm: ObservedVm {
                node: task.node.to_owned(),
                power: Power::Stopped,
                lock: None,
                template: false,
                config: None,
                agent: AgentState::NotAsked,
            },
            read_config: true,
            ask_agent: false,
        }),
        // A guest that was started this moment has no agent running yet:
        // asking now only costs a request that fails. The next pass asks.
        TaskAction::Start => present.map(|vm| {
            let agent = AgentState::NoAnswer(JUST_STARTED.to_owned());
            carried(vm, Power::Running, agent, false)
        }),
        TaskAction::Shutdown | TaskAction::Stop => {
            present.map(|vm| carried(vm, Power::Stopped, AgentState::NotAsked, false))
        }
        // The agent's answer still holds: neither restarts the VM.
        TaskAction::ResizeDisk | TaskAction::Configure => {
            present.map(|vm| carried(vm, vm.power, vm.agent.clone(), true))
        }
        TaskAction::Destroy => Some(Look::Known(VmState::Absent)),
        // Where the VM went, what a clone or conversion made of it, what a
        // seed upload or HA did: looked at in full.
        TaskAction::Clone
        | TaskAction::Restore
        | TaskAction::Migrate
        | TaskAction::MoveDisk
        | TaskAction::Template
        | TaskAction::UploadSeed
        | TaskAction::DeleteVolume
        | TaskAction::ConfigureHa
        | TaskAction::ConfigureFirewall
        | TaskAction::MovePool
        | TaskAction::DownloadImage => None,
    }
}

/// Whether the guest agent is to be asked: it has not answered since the
/// look, or its answer is old.
fn agent_due(known: &Known, agent: &AgentState, now: Instant) -> bool {
    match (agent, known.agent) {
        (AgentState::Interfaces(_), Some((at, _))) => {
            now.saturating_duration_since(at) >= AGENT_EVERY
        }
        (AgentState::Interfaces(_) | AgentState::NoAnswer(_) | AgentState::NotAsked, _) => true,
    }
}

/// How long after a start the guest agent is asked at coarse looks while
/// it has not answered (an agent that never answers is asked again only at
/// full looks after that).
pub const AGENT_WAIT: Duration = Duration::from_secs(600);

/// The coarse look of an idle VM: the VM as its last full look found it,
/// when the cluster view (`listed`, no request of its own) shows it as it
/// was then: on the same node, unlocked, in the same power state, with the
/// same name, tags, pool, memory, vCPUs and boot disk size, and not
/// restarted since (its uptime did not go down). `None`: look in full.
///
/// The shape kept is from a view read before the full look: a change made
/// after that look shows in a later view, so it is never taken for the
/// shape the look confirmed. What the view does not show (the rest of the
/// config, the firewall, a pause) waits for the next full look.
///
/// A running VM whose guest agent has not answered yet has its agent asked
/// (only that) for [`AGENT_WAIT`] after its start, so its addresses show
/// without waiting for a full look.
pub fn coarse(known: Option<&Known>, vmid: u32, listed: Option<&VmView>) -> Option<Look> {
    let known = known.filter(|k| k.vmid == vmid && !k.touched)?;
    let (VmState::Present(vm), Some(was), Some(now)) = (&known.vm, &known.shape, listed) else {
        return None;
    };
    let power = match (vm.power, now.status.as_str()) {
        (Power::Running, "running") | (Power::Stopped, "stopped") => true,
        (_, _) => false,
    };
    if !power || vm.lock.is_some() || !now.unchanged_since(was) {
        return None;
    }
    let waiting = matches!(vm.agent, AgentState::NoAnswer(_))
        && now.uptime.is_some_and(|up| up < AGENT_WAIT.as_secs());
    Some(if waiting {
        Look::AfterTask {
            vm: vm.clone(),
            read_config: false,
            ask_agent: true,
        }
    } else {
        Look::Known(known.vm.clone())
    })
}

/// What the VM's agent said last, if that still holds given the VM's
/// uptime now (`uptime`, from the cluster view): a full look keeps it
/// rather than ask again. `None`: the agent is to be asked (never answered,
/// the VM restarted, something was sent to it since, or the answer is
/// [`AGENT_EVERY`] old).
pub fn kept_agent(
    known: Option<&Known>,
    vmid: u32,
    uptime: Option<u64>,
    now: Instant,
) -> Option<AgentState> {
    let known = known.filter(|k| k.vmid == vmid && !k.touched)?;
    let VmState::Present(vm) = &known.vm else {
        return None;
    };
    let restarted = match (known.agent, uptime) {
        (Some((_, Some(then))), Some(now_up)) => now_up < then,
        (Some((_, None)) | None, _) | (Some((_, Some(_))), None) => false,
    };
    (!restarted && !agent_due(known, &vm.agent, now)).then(|| vm.agent.clone())
}

/// The memory of this look, for the next pass.
pub fn remember(
    before: Option<&Known>,
    vmid: u32,
    vm: &VmState,
    asked_agent: bool,
    uptime: Option<u64>,
    now: Instant,
) -> Option<Known> {
    if *vm == VmState::Unknown {
        return None;
    }
    let answered = matches!(
        vm,
        VmState::Present(ObservedVm {
            agent: AgentState::Interfaces(_),
            ..
        })
    );
    let agent = if asked_agent && answered {
        Some((now, uptime))
    } else if answered {
        before.filter(|k| k.vmid == vmid).and_then(|k| k.agent)
    } else {
        None
    };
    Some(Known {
        vmid,
        vm: vm.clone(),
        at: now,
        touched: false,
        written: false,
        agent,
        shape: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::vm::plan::{GuestInterface, VmConfig};
    use pve_client::TaskOutcome;

    fn vm(power: Power, agent: AgentState) -> ObservedVm {
        ObservedVm {
            node: "pve1".into(),
            power,
            lock: None,
            template: false,
            config: Some(VmConfig::default()),
            agent,
        }
    }

    fn interfaces() -> AgentState {
        AgentState::Interfaces(vec![GuestInterface {
            name: "eth0".into(),
            mac: None,
            addresses: vec!["10.0.0.5".into()],
        }])
    }

    fn known(state: VmState, age: Duration, touched: bool, now: Instant) -> Known {
        Known {
            vmid: 100,
            vm: state,
            at: now - age,
            touched,
            written: true,
            agent: None,
            shape: None,
        }
    }

    fn after(vm: ObservedVm, read_config: bool, ask_agent: bool) -> Look {
        Look::AfterTask {
            vm,
            read_config,
            ask_agent,
        }
    }

    fn ok() -> TaskState {
        TaskState::Finished(TaskOutcome::Succeeded {
            warnings: 0,
            warning_lines: vec![],
        })
    }

    fn failed() -> TaskState {
        TaskState::Finished(TaskOutcome::Failed {
            exit_status: "boom".into(),
            log_tail: vec![],
        })
    }

    fn task(action: TaskAction, state: &TaskState) -> Option<RecordedTask<'_>> {
        Some(RecordedTask {
            action,
            state,
            node: "pve2",
            type_: action.pve_type(),
        })
    }

    /// Name, what is known, the recorded task, the depth, the look wanted.
    type Case<'a> = (
        &'a str,
        Option<Known>,
        Option<RecordedTask<'a>>,
        Depth,
        Look,
    );

    #[test]
    fn what_is_read_follows_from_what_is_known() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let running = VmState::Present(vm(Power::Running, interfaces()));
        let stopped = VmState::Present(vm(Power::Stopped, AgentState::NotAsked));
        let (ok, failed) = (ok(), failed());
        let cases: Vec<Case> = vec![
            (
                "nothing known: a full look",
                None,
                None,
                Depth::Full,
                Look::Full,
            ),
            (
                "nothing known, idle: the cheap look",
                None,
                None,
                Depth::Idle,
                Look::Idle,
            ),
            (
                "absent, nothing sent since: still absent, however old",
                Some(known(VmState::Absent, s(3600), false, now)),
                None,
                Depth::Full,
                Look::Known(VmState::Absent),
            ),
            (
                "absent, but something was sent since: look",
                Some(known(VmState::Absent, s(1), true, now)),
                None,
                Depth::Full,
                Look::Full,
            ),
            (
                "seconds-old look after a Kubernetes write: reused",
                Some(known(stopped.clone(), s(1), false, now)),
                None,
                Depth::Full,
                Look::Known(stopped.clone()),
            ),
            (
                "a seconds-old look, but no Kubernetes write since: a pass on a timer looks",
                Some(Known {
                    written: false,
                    ..known(stopped.clone(), s(1), false, now)
                }),
                None,
                Depth::Idle,
                Look::Idle,
            ),
            (
                "an old look is not reused",
                Some(known(stopped.clone(), s(120), false, now)),
                None,
                Depth::Full,
                Look::Full,
            ),
            (
                "an old look of an idle VM: the cheap look",
                Some(known(running.clone(), s(120), false, now)),
                None,
                Depth::Idle,
                Look::Idle,
            ),
            (
                "our create ended and the pass after it only recorded the creation: its look",
                Some(known(stopped.clone(), s(1), false, now)),
                task(TaskAction::Create, &ok),
                Depth::Full,
                Look::Known(stopped.clone()),
            ),
            (
                "our create ended: stopped on the task's node, config read",
                Some(known(VmState::Absent, s(30), true, now)),
                task(TaskAction::Create, &ok),
                Depth::Full,
                after(
                    ObservedVm {
                        node: "pve2".into(),
                        power: Power::Stopped,
                        lock: None,
                        template: false,
                        config: None,
                        agent: AgentState::NotAsked,
                    },
                    true,
                    false,
                ),
            ),
            (
                "our create failed: a full look",
                Some(known(VmState::Absent, s(30), true, now)),
                task(TaskAction::Create, &failed),
                Depth::Full,
                Look::Full,
            ),
            (
                "our start ended: running, config kept, agent asked by the next pass",
                Some(known(stopped.clone(), s(30), true, now)),
                task(TaskAction::Start, &ok),
                Depth::Full,
                after(
                    vm(Power::Running, AgentState::NoAnswer(JUST_STARTED.into())),
                    false,
                    false,
                ),
            ),
            (
                "our resize ended: config read, power and agent kept",
                Some(known(running.clone(), s(30), true, now)),
                task(TaskAction::ResizeDisk, &ok),
                Depth::Full,
                after(vm(Power::Running, interfaces()), true, false),
            ),
            (
                "our shutdown ended: stopped",
                Some(known(running.clone(), s(30), true, now)),
                task(TaskAction::Shutdown, &ok),
                Depth::Full,
                after(vm(Power::Stopped, AgentState::NotAsked), false, false),
            ),
            (
                "our destroy ended: gone",
                Some(known(stopped.clone(), s(30), true, now)),
                task(TaskAction::Destroy, &ok),
                Depth::Full,
                Look::Known(VmState::Absent),
            ),
            (
                "a start of a VM never seen: a full look",
                Some(known(VmState::Absent, s(30), true, now)),
                task(TaskAction::Start, &ok),
                Depth::Full,
                Look::Full,
            ),
            (
                "an HA start ended: a full look (HA starts it later, anywhere)",
                Some(known(stopped.clone(), s(30), true, now)),
                Some(RecordedTask {
                    action: TaskAction::Start,
                    state: &ok,
                    node: "pve2",
                    type_: "hastart",
                }),
                Depth::Full,
                Look::Full,
            ),
            (
                "a migration ended: a full look (where is it now?)",
                Some(known(running.clone(), s(30), true, now)),
                task(TaskAction::Migrate, &ok),
                Depth::Full,
                Look::Full,
            ),
            (
                "a timer pass while the agent has not answered: a full look, not the agent alone",
                Some(Known {
                    written: false,
                    ..known(
                        VmState::Present(vm(Power::Running, AgentState::NoAnswer("no".into()))),
                        s(15),
                        false,
                        now,
                    )
                }),
                None,
                Depth::Full,
                Look::Full,
            ),
            (
                "after a metadata write, a running VM whose agent has not answered: only the agent",
                Some(known(
                    VmState::Present(vm(Power::Running, AgentState::NoAnswer("no".into()))),
                    s(15),
                    false,
                    now,
                )),
                None,
                Depth::Full,
                after(
                    vm(Power::Running, AgentState::NoAnswer("no".into())),
                    false,
                    true,
                ),
            ),
        ];
        for (name, known, task, depth, want) in cases {
            assert_eq!(look(known.as_ref(), 100, task, depth, now), want, "{name}");
        }
    }

    #[test]
    fn a_delete_reuses_a_look_only_at_the_same_running_vm() {
        let now = Instant::now();
        let running = VmState::Present(vm(Power::Running, interfaces()));
        let k = known(running.clone(), Duration::from_secs(50), false, now);
        let view = |running: bool, uptime: u64| VmView {
            node: "pve1".into(),
            running,
            status: if running { "running" } else { "stopped" }.into(),
            uptime: Some(uptime),
            ..VmView::default()
        };
        assert_eq!(
            look_to_delete(Some(&k), 100, Some(&view(true, 600)), now),
            Some(Look::Known(running.clone())),
            "running since before the look: the same VM"
        );
        let reread = Some(after(vm(Power::Running, AgentState::NotAsked), true, false));
        assert_eq!(
            look_to_delete(Some(&k), 100, Some(&view(true, 20)), now),
            reread,
            "restarted since the look: maybe another VM, its config is read"
        );
        assert_eq!(
            look_to_delete(Some(&k), 100, Some(&view(false, 0)), now),
            Some(after(vm(Power::Stopped, AgentState::NotAsked), true, false)),
            "stopped since: its config is read"
        );
        assert_eq!(look_to_delete(Some(&k), 100, None, now), None, "not listed");
        let mut touched = k.clone();
        touched.touched = true;
        assert_eq!(
            look_to_delete(Some(&touched), 100, Some(&view(true, 600)), now),
            None
        );
    }

    #[test]
    fn another_vmid_is_not_known() {
        let now = Instant::now();
        let known = known(VmState::Absent, Duration::ZERO, false, now);
        assert_eq!(look(Some(&known), 101, None, Depth::Full, now), Look::Full);
    }

    #[test]
    fn a_coarse_look_takes_the_last_full_one_only_while_the_view_shows_the_vm_as_then() {
        let now = Instant::now();
        let listed = |status: &str, uptime: u64| VmView {
            node: "pve1".into(),
            running: status == "running",
            status: status.into(),
            uptime: Some(uptime),
            memory: Some(2 << 30),
            cpus: Some(2),
            disk: Some(8 << 30),
            ..VmView::default()
        };
        let at_rest = |power: Power, agent: AgentState, shape: VmView| Known {
            shape: Some(shape),
            ..known(
                VmState::Present(vm(power, agent)),
                Duration::from_secs(300),
                false,
                now,
            )
        };
        let running = at_rest(Power::Running, interfaces(), listed("running", 500));
        let same = Some(Look::Known(running.vm.clone()));
        let changed = |f: fn(&mut VmView)| {
            let mut v = listed("running", 800);
            f(&mut v);
            v
        };
        let no_answer = AgentState::NoAnswer(JUST_STARTED.into());
        let starting = at_rest(Power::Running, no_answer.clone(), listed("running", 5));
        let ask_agent = Some(Look::AfterTask {
            vm: vm(Power::Running, no_answer.clone()),
            read_config: false,
            ask_agent: true,
        });
        let cases: Vec<(&str, Known, VmView, Option<Look>)> = vec![
            (
                "as at the full look",
                running.clone(),
                listed("running", 800),
                same,
            ),
            (
                "memory changed by hand",
                running.clone(),
                changed(|v| v.memory = Some(4 << 30)),
                None,
            ),
            (
                "vCPUs changed",
                running.clone(),
                changed(|v| v.cpus = Some(4)),
                None,
            ),
            (
                "disk grown",
                running.clone(),
                changed(|v| v.disk = Some(9 << 30)),
                None,
            ),
            (
                "renamed",
                running.clone(),
                changed(|v| v.name = Some("x".into())),
                None,
            ),
            (
                "tagged",
                running.clone(),
                changed(|v| v.tags = vec!["t".into()]),
                None,
            ),
            (
                "moved",
                running.clone(),
                changed(|v| v.node = "pve2".into()),
                None,
            ),
            (
                "locked",
                running.clone(),
                changed(|v| v.lock = Some("backup".into())),
                None,
            ),
            (
                "stopped by hand",
                running.clone(),
                listed("stopped", 0),
                None,
            ),
            (
                "restarted: uptime went down",
                running.clone(),
                listed("running", 20),
                None,
            ),
            (
                "stopped and still stopped",
                at_rest(Power::Stopped, AgentState::NotAsked, listed("stopped", 0)),
                listed("stopped", 0),
                Some(Look::Known(VmState::Present(vm(
                    Power::Stopped,
                    AgentState::NotAsked,
                )))),
            ),
            (
                "paused at the full look (the view shows running): looked at in full",
                at_rest(Power::Paused, AgentState::NotAsked, listed("running", 500)),
                listed("running", 800),
                None,
            ),
            (
                "just started, the agent has not answered: asked, nothing else",
                starting.clone(),
                listed("running", 60),
                ask_agent,
            ),
            (
                "an agent silent long after the start waits for the full look",
                starting.clone(),
                listed("running", AGENT_WAIT.as_secs() + 1),
                Some(Look::Known(starting.vm.clone())),
            ),
            (
                "something was sent to the VM since",
                Known {
                    touched: true,
                    ..running.clone()
                },
                listed("running", 800),
                None,
            ),
            (
                "no shape kept",
                Known {
                    shape: None,
                    ..running.clone()
                },
                listed("running", 800),
                None,
            ),
        ];
        for (name, known, view, want) in cases {
            assert_eq!(coarse(Some(&known), 100, Some(&view)), want, "{name}");
        }
        assert_eq!(coarse(Some(&running), 100, None), None, "not listed");
        assert_eq!(
            coarse(Some(&running), 101, Some(&listed("running", 800))),
            None,
            "another VMID"
        );
    }

    #[test]
    fn the_agent_is_asked_again_after_a_restart_or_when_its_answer_is_old() {
        let now = Instant::now();
        let mut k = known(
            VmState::Present(vm(Power::Running, interfaces())),
            Duration::from_secs(60),
            false,
            now,
        );
        k.agent = Some((now - Duration::from_secs(60), Some(500)));
        assert_eq!(
            kept_agent(Some(&k), 100, Some(560), now),
            Some(interfaces()),
            "answered, running on: the answer holds"
        );
        assert_eq!(
            kept_agent(Some(&k), 100, Some(20), now),
            None,
            "uptime went down: restarted"
        );
        k.agent = Some((now - AGENT_EVERY, Some(500)));
        assert_eq!(
            kept_agent(Some(&k), 100, Some(2400), now),
            None,
            "old answer"
        );
        assert_eq!(
            kept_agent(None, 100, Some(1100), now),
            None,
            "nothing known"
        );
    }

    #[test]
    fn an_answer_is_remembered_with_its_time_and_uptime() {
        let now = Instant::now();
        let running = VmState::Present(vm(Power::Running, interfaces()));
        let k = remember(None, 100, &running, true, Some(42), now).unwrap();
        assert_eq!(k.agent, Some((now, Some(42))));
        let later = now + Duration::from_secs(5);
        let again = remember(Some(&k), 100, &running, false, Some(47), later).unwrap();
        assert_eq!(
            again.agent,
            Some((now, Some(42))),
            "an answer not asked again keeps its time"
        );
        assert!(remember(Some(&k), 100, &VmState::Unknown, false, None, later).is_none());
    }
}
