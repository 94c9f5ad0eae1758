//! Writing `status`: server-side apply on the status subresource with the
//! controller's field manager, only when it changed, and only as often as
//! the change is worth ([`due`]).
//!
//! Conditions keep their `lastTransitionTime` when nothing else about them
//! changed (see [`crate::api::set_condition`]), so a pass that learns
//! nothing new writes nothing and does not wake the watch again.
//!
//! A status is applied on the resourceVersion its pass read
//! (or its own metadata write produced): the API server refuses it (409)
//! when anything wrote the resource since, so a pass that was paused, or
//! ran on a replica that lost the config's Lease, cannot overwrite the
//! fresher status of the config's new holder. The refused pass is retried
//! on the current version.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::core::object::HasStatus;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::Condition;
use crate::api::managed::{ManagedStatus, RECONCILE_REQUESTED_AT};
use crate::reconcile::error::{Error, is_not_found};
use crate::reconcile::runtime::settings::FIELD_MANAGER;

/// How the status a pass computed differs from the one the resource has,
/// from the least to the weightiest. Every status write costs the API
/// server a write and every watcher of the kind (this provider's own
/// cache, Crossplane's composite functions) a decode of the whole object:
/// at 1,000 VMs the writes that only reworded a message or moved a
/// progress figure were half of them (docs/scaling.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing: no write.
    None,
    /// Only conditions' messages (same type, status, reason and
    /// generation): what the resource is doing, worded anew.
    Wording,
    /// A running task's progress moved by this many points (its message
    /// may say so too); nothing else.
    Progress(u8),
    /// A condition, the phase or a result changed.
    Substance,
    /// What this pass alone knows and the next one must read: a task
    /// recorded or its end consumed, a failure counted for the backoff.
    Record,
}

/// The longest a reworded status or a task's progress waits for its write,
/// and the shortest time between two such writes of one resource.
pub const REWORD_EVERY: Duration = Duration::from_secs(15);

/// The least progress (in points) worth a write of its own.
pub const PROGRESS_STEP: u8 = 5;

/// Where the pass stands when its status is to be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moment {
    /// How long ago this process last wrote the resource's status (`None`:
    /// it did not, e.g. since it started).
    pub since_written: Option<Duration>,
    /// The pass wrote the resource's metadata and asks for the next pass
    /// at once: that pass writes what this one found (it observes it
    /// again), on the version this metadata write produced.
    pub next_pass_at_once: bool,
    /// The pass asks to be run again (after a time, not only on a change):
    /// a write put off now is made by that pass.
    pub passes_again: bool,
}

/// Whether the status is written now, given what changed.
///
/// A record is always written by the pass that made it (a task's UPID
/// before anything else is dispatched: a lost record means a second
/// dispatch). Anything else that the next pass, coming at once, will find
/// and write again waits for it. A condition, phase or result is written
/// at once; a new wording or progress at most every [`REWORD_EVERY`], and
/// progress only once it moved [`PROGRESS_STEP`] points (unless no pass
/// follows that could write it later).
pub fn due(change: Change, at: &Moment) -> bool {
    match change {
        Change::None => false,
        Change::Record => true,
        Change::Substance | Change::Wording | Change::Progress(_) if at.next_pass_at_once => false,
        Change::Substance => true,
        Change::Wording | Change::Progress(_) if !at.passes_again => true,
        Change::Progress(moved) if moved < PROGRESS_STEP => false,
        Change::Wording | Change::Progress(_) => {
            at.since_written.is_none_or(|ago| ago >= REWORD_EVERY)
        }
    }
}

/// Whether `after` differs from `before` by its conditions' wording at
/// most: `after`'s conditions, each with `before`'s message and transition
/// time where type, status, reason and generation are the same, compare
/// equal to `before`'s.
pub fn only_reworded(before: &[Condition], after: &[Condition]) -> bool {
    before.len() == after.len()
        && after.iter().zip(before).all(|(a, b)| {
            a.type_ == b.type_
                && a.status == b.status
                && a.reason == b.reason
                && a.observed_generation == b.observed_generation
        })
}

/// Server-side applies `status` to the status subresource of the object
/// `name` (owning every field it holds, so a field left out is removed).
/// Returns the resourceVersion written; `Ok(None)`: the object is gone.
pub async fn apply<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<Option<String>, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    apply_on(api, name, status, None).await
}

/// [`apply`], conditional on the object being at `base` when given.
pub async fn apply_on<K, S>(
    api: &Api<K>,
    name: &str,
    status: &S,
    base: Option<&str>,
) -> Result<Option<String>, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let mut body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": serde_json::to_value(status)
            .map_err(|source| Error::Serialize { what: "the status", source })?,
    });
    if let Some(version) = base {
        // An apply that names a resourceVersion is a precondition.
        body["metadata"] = json!({ "resourceVersion": version });
    }
    match api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(written) => Ok(Some(written.resource_version().unwrap_or_default())),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The field manager of `status.lastHandledReconcileAt` alone: the kinds'
/// own status writes (server-side apply with [`FIELD_MANAGER`], owning
/// every field they hold) build their status afresh and leave it out, and
/// a field another manager owns is not removed by leaving it out.
const REQUESTS_MANAGER: &str = "crossplane-provider-proxmox-requests";

/// Answers a `crossplane.io/reconcile-requested-at` request after a pass
/// of `obj` that ran (crossplane-runtime's contract): the annotation's
/// value is echoed in `status.lastHandledReconcileAt`. One write per new
/// value; nothing when there is no request or it was answered already.
pub async fn echo_request<K, A>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = ()>
        + HasStatus<Status = ManagedStatus<A>>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    A: Default,
{
    let Some(token) = unanswered(obj) else {
        return Ok(());
    };
    let body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": {"lastHandledReconcileAt": token},
    });
    let params = PatchParams::apply(REQUESTS_MANAGER).force();
    match api
        .patch_status(&obj.name_any(), &params, &Patch::Apply(&body))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The request of `obj` not answered yet, if any.
fn unanswered<K, A>(obj: &K) -> Option<&str>
where
    K: Resource + HasStatus<Status = ManagedStatus<A>>,
    A: Default,
{
    let token = obj
        .meta()
        .annotations
        .as_ref()?
        .get(RECONCILE_REQUESTED_AT)?;
    let handled = obj
        .status()
        .and_then(|s| s.last_handled_reconcile_at.as_deref());
    (handled != Some(token.as_str())).then_some(token.as_str())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::ProxmoxPool;

    fn pool(request: Option<&str>, handled: Option<&str>) -> ProxmoxPool {
        let mut pool: ProxmoxPool = serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxPool",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "forProvider": {"poolId": "p"},
                "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
            },
        }))
        .unwrap();
        pool.metadata.annotations =
            request.map(|r| BTreeMap::from([(RECONCILE_REQUESTED_AT.to_owned(), r.to_owned())]));
        pool.status = handled.map(|h| ManagedStatus {
            last_handled_reconcile_at: Some(h.to_owned()),
            ..ManagedStatus::default()
        });
        pool
    }

    /// (change, seconds since the last write, next pass at once, passes
    /// again) -> written now.
    #[test]
    fn a_status_write_is_due_when_what_changed_is_worth_it() {
        use Change::{None as Same, Progress, Record, Substance, Wording};
        let rows = [
            (Same, Some(60), false, true, false),
            // A record is written by the pass that made it, whatever else.
            (Record, Some(0), false, true, true),
            (Record, Some(0), true, true, true),
            (Record, None, true, false, true),
            // A condition, phase or result: at once, unless the next pass
            // follows at once (it finds it again and writes it).
            (Substance, Some(0), false, true, true),
            (Substance, Some(0), false, false, true),
            (Substance, None, true, true, false),
            (Wording, Some(60), true, true, false),
            (Progress(50), Some(60), true, true, false),
            // A new wording: at most every 15 s.
            (Wording, Some(3), false, true, false),
            (Wording, Some(14), false, true, false),
            (Wording, Some(15), false, true, true),
            (Wording, None, false, true, true),
            // ... unless no later pass would write it.
            (Wording, Some(3), false, false, true),
            // Progress: 5 points or more, at most every 15 s.
            (Progress(4), Some(60), false, true, false),
            (Progress(4), None, false, true, false),
            (Progress(5), Some(60), false, true, true),
            (Progress(5), Some(10), false, true, false),
            (Progress(40), None, false, true, true),
            (Progress(1), Some(3), false, false, true),
        ];
        for (change, ago, at_once, again, want) in rows {
            let at = Moment {
                since_written: ago.map(Duration::from_secs),
                next_pass_at_once: at_once,
                passes_again: again,
            };
            assert_eq!(due(change, &at), want, "{change:?} {at:?}");
        }
    }

    #[test]
    fn only_the_wording_of_conditions_may_differ_for_a_rewording() {
        use crate::api::{ConditionStatus, ConditionType, Reason};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use k8s_openapi::jiff::Timestamp;
        let at = |s| Time(Timestamp::from_second(s).unwrap());
        let synced = |reason, message: &str, generation, t| {
            let mut c = Condition::new(
                ConditionType::Synced,
                ConditionStatus::True,
                reason,
                message,
                at(t),
            );
            c.observed_generation = Some(generation);
            c
        };
        let before = [synced(Reason::WaitingForTask, "creating, 10% done", 1, 1)];
        let reworded = [synced(Reason::WaitingForTask, "creating, 40% done", 1, 2)];
        assert!(only_reworded(&before, &reworded));
        let reason = [synced(Reason::ReconcileSuccess, "creating, 10% done", 1, 1)];
        assert!(!only_reworded(&before, &reason));
        let generation = [synced(Reason::WaitingForTask, "creating, 10% done", 2, 1)];
        assert!(!only_reworded(&before, &generation));
        assert!(!only_reworded(&[], &before), "a condition added");
    }

    #[test]
    fn a_request_is_answered_once_per_value() {
        // (annotation, status.lastHandledReconcileAt) -> echoed
        let rows = [
            (None, None, None),
            (None, Some("t1"), None),
            (Some("t1"), None, Some("t1")),
            (Some("t2"), Some("t1"), Some("t2")),
            (Some("t2"), Some("t2"), None),
        ];
        for (request, handled, want) in rows {
            let pool = pool(request, handled);
            assert_eq!(unanswered(&pool), want, "{request:?} {handled:?}");
        }
    }

    #[test]
    fn the_echo_is_not_part_of_what_a_pass_compares() {
        let mut echoed = pool(Some("t1"), Some("t1")).status.unwrap();
        let fresh = ManagedStatus::default();
        assert_eq!(echoed, fresh, "a status built afresh is not a change");
        echoed.observed_generation = Some(2);
        assert_ne!(echoed, fresh);
    }
}
