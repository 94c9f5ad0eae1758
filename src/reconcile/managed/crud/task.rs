//! The task path of the CRUD pass, whatever the kind: a call that started
//! a Proxmox task ([`super::Sent::Task`]) is recorded in the status
//! ([`TaskRecord`]) and observed on later passes, never waited for.
//!
//! * while it runs, nothing else is sent: Synced True (`WaitingForTask`),
//!   Ready False, looked at again when the task watcher sees it end
//!   (`task_watch::Plain`) or at the resync interval at the latest; past
//!   the provider config's `tasks.timeout` it says so (`TaskTimeout`) and
//!   is still observed: a task is never dispatched twice;
//! * when it ended OK the record says so and the next pass (at once)
//!   observes what it did;
//! * when it failed (or Proxmox lost it) the failure is counted, said
//!   (`TaskFailed`, an event) and nothing is sent before the backoff
//!   (`common::tasks::backoff`) has passed.
//!
//! [`look`] and [`gate`] are pure; the pass reads the task's state with
//! `managed::tasks::task_state`.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::controller::Action;

use super::Call;
use super::pass::Outcome;
use crate::api::condition::{Condition, ConditionStatus, ConditionType, Reason};
use crate::api::task::{CallAction, EndedTask, InFlightTask, TaskFailure, TaskRecord};
use crate::reconcile::common::event::Event;
use crate::reconcile::common::tasks::{NOT_VISIBLE_GRACE, TaskOutcome, TaskState, backoff};
use crate::reconcile::managed::crud::Started;
use crate::reconcile::managed::tasks;

/// How often a task Proxmox does not show yet is looked for.
const NOT_VISIBLE_RECHECK: Duration = Duration::from_secs(5);

/// What the recorded task means for this pass.
#[derive(Debug)]
pub enum Looked {
    /// It ended OK: the record to write; the next pass (at once) observes
    /// what it did.
    Ended(TaskRecord),
    /// It runs, failed, or could not be read: the pass ends here.
    Stop(Box<Outcome>, TaskRecord),
}

/// Looks at the task `record` holds (one request: its state), and says
/// how the pass ends because of it; `None`: no task is in flight, the pass
/// goes on.
pub async fn watch(
    client: &pve_client::Client,
    record: &TaskRecord,
    now: Time,
    resync: Duration,
) -> Option<(Outcome, TaskRecord)> {
    let t = record.task.as_ref()?;
    let state = match pve_client::Upid::parse(&t.upid) {
        Ok(upid) => tasks::task_state(client, &upid).await,
        Err(e) => TaskState::Unreadable(e.to_string()),
    };
    Some(match look(record, &state, now.clone(), resync) {
        Looked::Stop(outcome, next) => (*outcome, next),
        // What it did is observed by the next pass, at once, which reads
        // the record written now (never this pass: the kind's view of its
        // status, a rollback's handled request, is the one read before).
        Looked::Ended(next) => {
            let outcome = Outcome {
                ready: Condition::unavailable("looking at what the task did", now.clone()),
                synced: Condition::reconcile_success("the task ended", now),
                event: None,
                standing: false,
                action: Action::requeue(Duration::ZERO),
                release: false,
            };
            (outcome, next)
        }
    })
}

/// The action a call is recorded as.
pub fn action<T: super::Diff>(call: &Call<T>) -> CallAction {
    match call {
        Call::Create(_) => CallAction::Create,
        Call::Update(_) => CallAction::Update,
        Call::Delete => CallAction::Delete,
    }
}

/// The record of a task just started (or adopted) for `action`, due by
/// `timeout`.
pub fn started(
    record: &TaskRecord,
    (task, action): (&Started, CallAction),
    now: &Time,
    timeout: Duration,
) -> TaskRecord {
    let type_ = task.upid.task_type().to_owned();
    TaskRecord {
        task: Some(InFlightTask {
            upid: task.upid.to_string(),
            action,
            summary: InFlightTask::<CallAction>::summarize(&type_, None),
            type_,
            node: task.upid.node().to_owned(),
            target: task.target.clone(),
            started_at: now.clone(),
            deadline: Time(after(now, timeout)),
            progress: None,
        }),
        ..record.clone()
    }
}

/// What a pass that started (`adopted`: found running or ended) the task
/// `record` holds says, and when it looks again.
pub fn dispatched(record: &TaskRecord, adopted: bool, now: Time, resync: Duration) -> Outcome {
    let Some(task) = &record.task else {
        // Not reached: a started task is recorded before this is asked.
        return waiting_outcome(None, now, resync, None);
    };
    let verb = if adopted { "adopted" } else { "started" };
    let event = Event {
        warning: false,
        reason: "TaskStarted",
        note: format!("{verb} {} {}", task.type_, task.upid),
    };
    waiting_outcome(
        Some(task),
        now.clone(),
        until(task, &now, resync),
        Some(event),
    )
}

/// What the recorded task's `state` means (`None`: no task recorded).
pub fn look(record: &TaskRecord, state: &TaskState, now: Time, resync: Duration) -> Looked {
    let Some(task) = &record.task else {
        return Looked::Ended(record.clone());
    };
    match state {
        TaskState::Running { progress } => {
            let mut record = record.clone();
            if let Some(t) = record.task.as_mut() {
                t.progress = *progress;
                t.summary = InFlightTask::<CallAction>::summarize(&t.type_, *progress);
            }
            let outcome = if now.0 > task.deadline.0 {
                let note = format!(
                    "task {} ({}) runs past its deadline; still observed, nothing else is sent",
                    task.type_, task.upid
                );
                Outcome {
                    synced: Condition::new(
                        ConditionType::Synced,
                        ConditionStatus::False,
                        Reason::TaskTimeout,
                        note,
                        now.clone(),
                    ),
                    ..waiting_outcome(Some(task), now, resync, None)
                }
            } else {
                waiting_outcome(Some(task), now.clone(), until(task, &now, resync), None)
            };
            Looked::Stop(Box::new(outcome), record)
        }
        TaskState::Finished(TaskOutcome::Succeeded { .. }) => {
            Looked::Ended(ended(record, task, None, now))
        }
        TaskState::Finished(TaskOutcome::Failed { exit_status, .. }) => {
            failed(record, task, exit_status.clone(), now)
        }
        TaskState::NotFound if older_than(task, &now, NOT_VISIBLE_GRACE) => {
            let why = "Proxmox does not know the task (lost)".to_owned();
            failed(record, task, why, now)
        }
        TaskState::NotFound => Looked::Stop(
            Box::new(waiting_outcome(Some(task), now, NOT_VISIBLE_RECHECK, None)),
            record.clone(),
        ),
        TaskState::Unreadable(why) => {
            let note = format!("cannot read task {}: {why}", task.upid);
            let outcome = Outcome {
                synced: Condition::reconcile_error(note, now.clone()),
                ..waiting_outcome(Some(task), now, NOT_VISIBLE_RECHECK, None)
            };
            Looked::Stop(Box::new(outcome), record.clone())
        }
    }
}

/// How long the failure the record holds still holds calls back (`None`:
/// none does), and what to say meanwhile.
pub fn gate(record: &TaskRecord, now: &Time) -> Option<(Duration, Condition)> {
    let failure = record.last_failure.as_ref()?;
    let due = after(&failure.at, backoff(failure.count));
    let left = due.duration_since(now.0);
    let left = Duration::try_from(left).ok().filter(|d| !d.is_zero())?;
    let note = format!(
        "the last task failed ({} time(s)): {}; trying again in {}s",
        failure.count,
        failure.message,
        left.as_secs().max(1)
    );
    Some((
        left,
        Condition::new(
            ConditionType::Synced,
            ConditionStatus::False,
            Reason::TaskFailed,
            note,
            now.clone(),
        ),
    ))
}

fn failed(record: &TaskRecord, task: &InFlightTask<CallAction>, why: String, now: Time) -> Looked {
    let count = record
        .last_failure
        .as_ref()
        .filter(|f| f.action == task.action)
        .map_or(0, |f| f.count)
        + 1;
    let mut next = ended(record, task, Some(why.clone()), now.clone());
    next.last_failure = Some(TaskFailure {
        action: task.action,
        message: why.clone(),
        at: now.clone(),
        count,
        vmid_taken: false,
    });
    let note = format!("task {} ({}) failed: {why}", task.type_, task.upid);
    let outcome = Outcome {
        ready: Condition::unavailable("the last task failed", now.clone()),
        synced: Condition::new(
            ConditionType::Synced,
            ConditionStatus::False,
            Reason::TaskFailed,
            note.clone(),
            now,
        ),
        event: Some(Event {
            warning: true,
            reason: "TaskFailed",
            note,
        }),
        standing: false,
        action: Action::requeue(backoff(count)),
        release: false,
    };
    Looked::Stop(Box::new(outcome), next)
}

fn ended(
    record: &TaskRecord,
    task: &InFlightTask<CallAction>,
    failure: Option<String>,
    now: Time,
) -> TaskRecord {
    TaskRecord {
        task: None,
        last_task: Some(EndedTask {
            upid: task.upid.clone(),
            action: task.action,
            type_: task.type_.clone(),
            target: task.target.clone(),
            succeeded: failure.is_none(),
            message: failure.clone(),
            at: now,
        }),
        // A success clears the failures.
        last_failure: failure.and(record.last_failure.clone()),
    }
}

/// Ready False, Synced True (`WaitingForTask`): a task is running.
fn waiting_outcome(
    task: Option<&InFlightTask<CallAction>>,
    now: Time,
    again: Duration,
    event: Option<Event>,
) -> Outcome {
    let (what, action) = task.map_or(("a task".to_owned(), CallAction::Update), |t| {
        (format!("task {} ({})", t.type_, t.upid), t.action)
    });
    let doing = format!("waiting for {what}");
    let ready = match action {
        CallAction::Create => Condition::creating(doing.clone(), now.clone()),
        CallAction::Update => Condition::unavailable(doing.clone(), now.clone()),
        CallAction::Delete => Condition::deleting(doing.clone(), now.clone()),
    };
    Outcome {
        ready,
        synced: Condition::new(
            ConditionType::Synced,
            ConditionStatus::True,
            Reason::WaitingForTask,
            doing,
            now,
        ),
        event,
        standing: false,
        action: Action::requeue(again),
        release: false,
    }
}

/// When to look at a running task again without being woken: at its
/// deadline or the resync interval, whichever comes first (the task
/// watcher wakes the resource as soon as it ends).
fn until(task: &InFlightTask<CallAction>, now: &Time, resync: Duration) -> Duration {
    let left = Duration::try_from(task.deadline.0.duration_since(now.0)).unwrap_or_default();
    left.clamp(Duration::from_secs(1), resync.max(Duration::from_secs(1)))
}

fn older_than(task: &InFlightTask<CallAction>, now: &Time, age: Duration) -> bool {
    Duration::try_from(now.0.duration_since(task.started_at.0)).is_ok_and(|d| d > age)
}

fn after(at: &Time, by: Duration) -> Timestamp {
    let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX);
    at.0.checked_add(by).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests;
