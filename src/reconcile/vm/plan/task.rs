//! Proxmox tasks: observe the one in flight, adopt one that a lost status
//! write forgot, back off after failures.
//!
//! The provider never waits for a task inside a pass. A dispatched task is
//! recorded in the status (UPID, deadline) and observed on later passes;
//! while it runs nothing else is dispatched for the VM. A restarted provider
//! resumes from the status; if the status write after a dispatch was lost,
//! the task is found again in the node's active task list.

pub use crate::reconcile::common::tasks::{NOT_VISIBLE_GRACE, backoff};
use std::time::Duration;

use super::context::Ctx;
use super::decision::{Decision, Out, Say, after, between, in_secs};
use super::input::{ActiveTask, TaskOutcome, TaskState, VmState, started_at};
use super::output::{Event, FinishedTask, Idle, time};
use super::owner::{Ownership, ownership};
use crate::api::{
    Reason,
    vm::{InFlightTask, TaskAction, TaskFailure},
};

/// How many lines of a failed task's log (before its `TASK ERROR:` line)
/// its condition quotes.
const WHY_LINES: usize = 3;

/// When to look at a running task again. The task watcher wakes the
/// resource as soon as the node's list no longer shows the task running;
/// this timer is a fallback, and the cadence of progress updates.
pub(super) fn while_running(ctx: &Ctx) -> Duration {
    let poll = ctx.timing.poll_interval;
    (poll * 5).min(Duration::from_secs(15)).max(poll)
}

/// Records a failure of `action` and returns the delay before retrying.
pub(super) fn record_failure(
    ctx: &Ctx,
    out: &mut Out,
    action: TaskAction,
    message: &str,
) -> Duration {
    let at = &mut out.status.at_provider;
    let count = match &at.last_failure {
        Some(f) if f.action == action => f.count.saturating_add(1),
        Some(_) | None => 1,
    };
    at.last_failure = Some(TaskFailure {
        action,
        message: message.to_owned(),
        at: time(ctx.now),
        count,
        vmid_taken: false,
    });
    // A password sent with a failed create or update did not land.
    if matches!(
        action,
        TaskAction::Create | TaskAction::Clone | TaskAction::Configure
    ) {
        at.password_version = None;
    }
    backoff(count)
}

/// Waits out the backoff before `action` is tried again, if one is due.
/// Reads the status as this pass updated it (a task consumed earlier in the
/// pass may have cleared or added a failure).
pub(super) fn gate(ctx: &Ctx, out: &Out, action: TaskAction) -> Option<Decision> {
    let failure = out
        .status
        .at_provider
        .last_failure
        .as_ref()
        .filter(|f| f.action == action)?;
    let until = after(failure.at.0, backoff(failure.count));
    if ctx.now >= until {
        return None;
    }
    let wait = between(ctx.now, until);
    let say = Say::no(
        Reason::TaskFailed,
        format!(
            "the {} failed ({} time(s), last: {}); retrying {}",
            action.describe(),
            failure.count,
            failure.message,
            in_secs(wait)
        ),
    );
    Some(Decision::new(Idle::Wait, Some(wait), say))
}

fn activity(ctx: &Ctx, action: TaskAction) -> Reason {
    match action {
        TaskAction::DownloadImage => Reason::DownloadingImage,
        TaskAction::Create if ctx.imports() => Reason::ImportingDisk,
        TaskAction::Create
        | TaskAction::Clone
        | TaskAction::Restore
        | TaskAction::Configure
        | TaskAction::ResizeDisk
        | TaskAction::Start
        | TaskAction::Shutdown
        | TaskAction::Stop
        | TaskAction::Destroy
        | TaskAction::Migrate
        | TaskAction::MoveDisk
        | TaskAction::ConfigureHa
        | TaskAction::ConfigureFirewall
        | TaskAction::MovePool
        | TaskAction::UploadSeed
        | TaskAction::DeleteVolume
        | TaskAction::Template => Reason::WaitingForTask,
    }
}

/// Observes the task recorded in the status. Decides while it runs or
/// failed; clears it and lets the later phases decide when it succeeded.
pub(super) fn in_flight(ctx: &Ctx, out: &mut Out) -> Option<Decision> {
    let task = ctx.task()?.clone();
    let observed = match (ctx.obs.task.clone(), ctx.recorded_upid()) {
        (Some(state), _) => state,
        (None, Some(Err(e))) => TaskState::Unreadable(format!("the recorded UPID is invalid: {e}")),
        (None, Some(Ok(_)) | None) => TaskState::Unreadable("it was not observed".into()),
    };
    match observed {
        TaskState::Running { progress } => Some(running(ctx, out, &task, progress)),
        TaskState::NotFound if between(task.started_at.0, ctx.now) < NOT_VISIBLE_GRACE => {
            Some(running(ctx, out, &task, None))
        }
        TaskState::NotFound => {
            // Gone (node rebooted, logs rotated): decide from the VM itself.
            out.status.at_provider.task = None;
            out.event(
                true,
                "TaskLost",
                format!(
                    "Proxmox no longer knows task {}; looking at the VM instead",
                    task.upid
                ),
            );
            None
        }
        TaskState::Unreadable(why) => {
            let say = Say::no(
                Reason::ReconcileError,
                format!("cannot read the status of task {}: {why}", task.upid),
            );
            Some(Decision::new(Idle::ObserveTask, Some(ctx.timing.poll_interval), say).keep_ready())
        }
        TaskState::Finished(outcome) => finished(ctx, out, &task, &outcome),
    }
}

/// How long a task runs before it is announced (`TaskStarted`): a shorter
/// one (a resize, a start, an import at the bench's scale) is said once, by
/// its end's event, which names its UPID too. Two events per task were 6
/// of the 20.7 API server requests per VM created (docs/scaling.md).
const ANNOUNCE_AFTER: Duration = Duration::from_secs(15);

fn running(ctx: &Ctx, out: &mut Out, task: &InFlightTask, progress: Option<u8>) -> Decision {
    if between(task.started_at.0, ctx.now) >= ANNOUNCE_AFTER {
        // Found on every look from now on, published once.
        out.announced.push(Event {
            warning: false,
            reason: "TaskStarted",
            note: format!(
                "started {} ({}): {}",
                task.type_,
                task.action.describe(),
                task.upid
            ),
        });
    }
    let mut progress = progress.or(task.progress);
    if let Some(t) = out.status.at_provider.task.as_mut() {
        progress = progress.map(|p| p.min(100));
        t.progress = progress;
        t.summary = InFlightTask::summarize(&t.type_, progress);
    }
    let done = progress.map(|p| format!(", {p}% done")).unwrap_or_default();
    let what = task.action.describe();
    // The VM is not looked at while its task runs: Ready stays as it was
    // (a resource being deleted says so whatever the VM is doing).
    let keep_ready = ctx.obs.vm == VmState::Unknown && !ctx.deleting();
    let say = if ctx.now > task.deadline.0 {
        Say::no(
            Reason::TaskTimeout,
            format!(
                "the {what} (task {}) has run past its deadline {}; still waiting for it{done}",
                task.upid, task.deadline.0
            ),
        )
    } else {
        Say::yes(
            activity(ctx, task.action),
            format!("waiting for the {what} (task {}{done})", task.upid),
        )
    };
    let d = Decision::new(Idle::ObserveTask, Some(while_running(ctx)), say);
    if keep_ready { d.keep_ready() } else { d }
}

fn finished(
    ctx: &Ctx,
    out: &mut Out,
    task: &InFlightTask,
    outcome: &TaskOutcome,
) -> Option<Decision> {
    if outcome.is_success()
        && let Some(d) = super::converge::record_creation_first(ctx, task.action)
    {
        return Some(d);
    }
    out.status.at_provider.task = None;
    out.finished_task = Some(FinishedTask {
        type_: task.type_.clone(),
        succeeded: outcome.is_success(),
        elapsed: between(task.started_at.0, ctx.now),
    });
    let (exit_status, log_tail) = match outcome {
        TaskOutcome::Succeeded {
            warnings,
            warning_lines,
        } => {
            out.status.at_provider.last_failure = None;
            let ended = match warnings {
                0 => "OK".to_owned(),
                n => format!("WARNINGS: {n} ({})", warning_lines.join(" | ")),
            };
            out.event(
                false,
                "TaskSucceeded",
                format!(
                    "{} {} finished: {ended} (ran {})",
                    task.type_,
                    task.upid,
                    super::secs(between(task.started_at.0, ctx.now))
                ),
            );
            if task.action == TaskAction::Restore {
                // The restored VM carries the archive's notes (another
                // resource's marker, maybe): this record is the proof that
                // this resource made it, until its own marker is written
                // (see `restore::claim`). Written with the task's end, in
                // the same status write.
                out.status.at_provider.restored_vmid = ctx.vmid();
            }
            if task.action == TaskAction::Migrate && task.target.is_some() {
                // Migrated where `node` asked: from now on a VM found
                // elsewhere was moved by someone else, and is followed.
                out.status.at_provider.target_node = task.target.clone();
            }
            // A finished create or clone is not recorded as ours here: the
            // VM, observed after the task in this same pass, says whose it
            // is. `converge` records the creation only when the owner
            // marker is ours, and forgets an allocated VMID otherwise.
            return None;
        }
        TaskOutcome::Failed {
            exit_status,
            log_tail,
        } => (exit_status, log_tail),
    };
    // The log lines before Proxmox's own `TASK ERROR:` line say why
    // (`can't migrate local disk ...`): the condition carries them too.
    let why: Vec<&str> = log_tail
        .iter()
        .map(String::as_str)
        .filter(|line| !line.starts_with("TASK ERROR:") && !line.trim().is_empty())
        .filter(|line| pve_client::task::parse_progress(line).is_none())
        .collect();
    let why = &why[why.len().saturating_sub(WHY_LINES)..];
    let reported = if why.is_empty() {
        exit_status.clone()
    } else {
        format!("{exit_status} ({})", why.join(" | "))
    };
    let retry = record_failure(ctx, out, task.action, &reported);
    let tail = if log_tail.is_empty() {
        String::new()
    } else {
        format!(" (log: {})", log_tail.join(" | "))
    };
    out.event(
        true,
        "TaskFailed",
        format!("{} {} failed: {exit_status}{tail}", task.type_, task.upid),
    );
    if task.action == TaskAction::Shutdown {
        // A shutdown that timed out is followed by a hard stop at once.
        return None;
    }
    if ctx.deleting() && !deletes(task.action) {
        // A delete wins over the retry of a create, start or update: it
        // goes on in this pass, not after the backoff.
        return None;
    }
    let say = Say::no(
        Reason::TaskFailed,
        format!(
            "the {} failed: {reported}; retrying {}",
            task.action.describe(),
            in_secs(retry)
        ),
    );
    Some(Decision::new(Idle::Wait, Some(retry), say))
}

/// Whether `action` is a step of a delete (its failure is retried with
/// backoff even while the resource is being deleted).
fn deletes(action: TaskAction) -> bool {
    match action {
        TaskAction::Shutdown
        | TaskAction::Stop
        | TaskAction::Destroy
        | TaskAction::ConfigureHa
        | TaskAction::DeleteVolume => true,
        TaskAction::DownloadImage
        | TaskAction::ConfigureFirewall
        | TaskAction::MovePool
        | TaskAction::Create
        | TaskAction::Clone
        | TaskAction::Restore
        | TaskAction::Configure
        | TaskAction::ResizeDisk
        | TaskAction::Start
        | TaskAction::Migrate
        | TaskAction::MoveDisk
        | TaskAction::UploadSeed
        | TaskAction::Template => false,
    }
}

/// The actions whose tasks carry the VMID as task ID (a clone's ID is the
/// source VM's; a download's is the file name).
/// A `qmigrate` is not among them: HA and its load balancer migrate VMs in
/// tasks of their own, which are waited out rather than taken for ours.
const VM_TASKS: [TaskAction; 9] = [
    TaskAction::Create,
    TaskAction::Configure,
    TaskAction::ResizeDisk,
    TaskAction::Start,
    TaskAction::Shutdown,
    TaskAction::Stop,
    TaskAction::Destroy,
    TaskAction::MoveDisk,
    TaskAction::Template,
];

/// With no task recorded, a task already running for this VM (or for one of
/// its images) means a status write was lost after a dispatch, or someone
/// else is working on the VM. A VM task is adopted only when the VM is
/// provably ours (its config, readable, carries our owner marker); any other
/// task on the VMID is waited out, never adopted: while a create holds the
/// config locked its owner cannot be read, and it may be another resource's.
/// An image download is shared by every VM that imports the image, so it is
/// adopted by file name.
pub(super) fn adopt(ctx: &Ctx, out: &mut Out) -> Option<Decision> {
    if out.status.at_provider.task.is_some() {
        return None;
    }
    let vmid = ctx.vmid()?.to_string();
    let ours = match &ctx.obs.vm {
        VmState::Present(vm) => match &vm.config {
            Some(config) => match ownership(config, ctx.uid()) {
                Ownership::Ours => true,
                // Not ours: the later phases say so; its tasks are not our
                // business.
                Ownership::Foreign(_) | Ownership::Unmarked => return None,
            },
            None => false,
        },
        VmState::Absent | VmState::Unknown => false,
    };
    let images: Vec<(String, String)> = ctx
        .spec
        .disks
        .iter()
        .filter_map(|d| d.image.as_ref())
        .filter_map(|i| Some((i.file_name()?, i.volume()?)))
        .collect();
    for t in &ctx.obs.active_tasks {
        if t.id() == vmid {
            let action = VM_TASKS
                .into_iter()
                .find(|a| a.pve_type() == t.task_type())
                .filter(|_| ours);
            return Some(match action {
                Some(action) => take_over(ctx, out, t, action, None),
                None => foreign_task(ctx, t),
            });
        }
        if t.task_type() == TaskAction::DownloadImage.pve_type()
            && let Some((_, volume)) = images.iter().find(|(file, _)| file == t.id())
        {
            let target = Some(volume.clone());
            return Some(take_over(ctx, out, t, TaskAction::DownloadImage, target));
        }
    }
    None
}

fn take_over(
    ctx: &Ctx,
    out: &mut Out,
    t: &ActiveTask,
    action: TaskAction,
    target: Option<String>,
) -> Decision {
    let started = started_at(t);
    out.status.at_provider.task = Some(InFlightTask {
        upid: t.to_string(),
        action,
        type_: t.task_type().to_owned(),
        node: t.node().to_owned(),
        target,
        started_at: time(started),
        deadline: time(after(started, ctx.timing.task_timeout)),
        progress: None,
        summary: InFlightTask::summarize(t.task_type(), None),
    });
    out.event(
        false,
        "TaskAdopted",
        format!(
            "found {} {t} already running; observing it instead of starting another",
            t.task_type()
        ),
    );
    let say = Say::yes(
        activity(ctx, action),
        format!(
            "waiting for the {} (task {t}, found running)",
            action.describe()
        ),
    );
    Decision::new(Idle::ObserveTask, Some(ctx.timing.poll_interval), say)
}

fn foreign_task(ctx: &Ctx, t: &ActiveTask) -> Decision {
    let say = Say::yes(
        Reason::WaitingForTask,
        format!(
            "Proxmox task {} ({t}) is running on VM {}; waiting for it to finish before looking again",
            t.task_type(),
            ctx.vmid_text()
        ),
    );
    Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say)
}
