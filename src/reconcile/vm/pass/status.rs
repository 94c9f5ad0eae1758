//! Writing a ProxmoxVM's `status`, when what changed is worth a write (see
//! [`crate::reconcile::managed::status::due`]), on the resourceVersion its
//! pass read.

use kube::Api;

use crate::api::{ProxmoxVM, ProxmoxVMStatus};
use crate::reconcile::error::Error;
use crate::reconcile::identity::Identity;
use crate::reconcile::managed::status::{Change, apply_on, only_reworded};

/// What `after` changes of the status the resource has (`before`).
///
/// The task in flight and the last failure are records: a task recorded,
/// replaced or cleared, a failure counted. Its progress and summary alone
/// are progress. Conditions that keep their type, status, reason and
/// generation and say it in other words are a rewording. Anything else
/// (another condition, the phase, what was observed) is substance.
pub fn change(before: Option<&ProxmoxVMStatus>, after: &ProxmoxVMStatus) -> Change {
    let none = ProxmoxVMStatus::default();
    let before = before.unwrap_or(&none);
    if before == after {
        return Change::None;
    }
    let progress = |s: &ProxmoxVMStatus| s.at_provider.task.as_ref().and_then(|t| t.progress);
    let (mut b, mut a) = (before.clone(), after.clone());
    for s in [&mut b, &mut a] {
        if let Some(task) = s.at_provider.task.as_mut() {
            task.progress = None;
            task.summary = String::new();
        }
    }
    if a.at_provider.task != b.at_provider.task
        || a.at_provider.last_failure != b.at_provider.last_failure
    {
        return Change::Record;
    }
    if !only_reworded(&b.conditions, &a.conditions) {
        return Change::Substance;
    }
    a.conditions.clone_from(&b.conditions);
    if a != b {
        return Change::Substance;
    }
    match (progress(before), progress(after)) {
        (was, now) if was != now => Change::Progress(now.unwrap_or(0).abs_diff(was.unwrap_or(0))),
        _ => Change::Wording,
    }
}

/// Writes `status` on the resourceVersion `base` (`None`:
/// unconditionally); returns the resourceVersion of the write. A resource
/// that is gone (deleted after its finalizer was removed) is not an error;
/// one written since `base` is (a conflict, retried). Whether to write at
/// all is the caller's (see [`change`]).
pub async fn write(
    kube: &kube::Client,
    id: &Identity,
    status: &ProxmoxVMStatus,
    base: Option<&str>,
) -> Result<Option<String>, Error> {
    let api: Api<ProxmoxVM> = Api::namespaced(kube.clone(), &id.namespace);
    apply_on(&api, &id.name, status, base).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vm::{InFlightTask, TaskAction, TaskFailure};
    use crate::api::{Condition, ConditionStatus, ConditionType, Reason, vm::ObservedState};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn at(s: i64) -> Time {
        Time(Timestamp::from_second(s).unwrap())
    }

    fn task(upid: &str, progress: Option<u8>) -> InFlightTask {
        InFlightTask {
            upid: upid.into(),
            action: TaskAction::Create,
            type_: "qmcreate".into(),
            node: "pve".into(),
            target: None,
            started_at: at(1),
            deadline: at(100),
            progress,
            summary: InFlightTask::summarize("qmcreate", progress),
        }
    }

    fn status(message: &str, task: Option<InFlightTask>) -> ProxmoxVMStatus {
        let mut s = ProxmoxVMStatus::default();
        s.conditions.push(Condition::new(
            ConditionType::Synced,
            ConditionStatus::True,
            Reason::ImportingDisk,
            message,
            at(1),
        ));
        s.at_provider.task = task;
        s.observed_generation = Some(1);
        s
    }

    /// Table: (before, after) -> the change.
    #[test]
    fn what_changed_is_told_apart() {
        let running = status("creating", Some(task("UPID:a", Some(10))));
        let mut moved = status("creating, 40% done", Some(task("UPID:a", Some(40))));
        let reworded = status("creating, 10% done", Some(task("UPID:a", Some(10))));
        let other_task = status("creating", Some(task("UPID:b", None)));
        let ended = status("creating", None);
        let mut failed = ended.clone();
        failed.at_provider.last_failure = Some(TaskFailure {
            action: TaskAction::Create,
            message: "no".into(),
            at: at(2),
            count: 1,
            vmid_taken: false,
        });
        let mut observed = running.clone();
        observed.at_provider.state = Some(ObservedState::Running);
        let mut reason = running.clone();
        reason.conditions[0].reason = Reason::WaitingForCapacity.as_str().into();
        let mut generation = running.clone();
        generation.observed_generation = Some(2);
        let rows: [(Option<&ProxmoxVMStatus>, &ProxmoxVMStatus, Change); 10] = [
            (Some(&running), &running, Change::None),
            (None, &ProxmoxVMStatus::default(), Change::None),
            (Some(&running), &reworded, Change::Wording),
            (Some(&running), &moved, Change::Progress(30)),
            (Some(&running), &other_task, Change::Record),
            (Some(&running), &ended, Change::Record),
            (Some(&ended), &failed, Change::Record),
            (Some(&running), &observed, Change::Substance),
            (Some(&running), &reason, Change::Substance),
            (Some(&running), &generation, Change::Substance),
        ];
        for (before, after, want) in rows {
            assert_eq!(change(before, after), want, "{before:?} -> {after:?}");
        }
        assert_eq!(change(None, &running), Change::Record, "first record");
        moved.at_provider.task = Some(task("UPID:a", None));
        assert_eq!(
            change(Some(&running), &moved),
            Change::Progress(10),
            "unknown again"
        );
    }
}
