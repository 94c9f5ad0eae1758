//! crossplane-runtime's managed resource metrics for every managed kind,
//! so the dashboards and alerts built for Crossplane's managed resources
//! read this provider too:
//!
//! - how many resources of each kind exist, are Ready and are Synced
//!   (`crossplane_managed_resource_{exists,ready,synced}{gvk}`):
//!   crossplane-runtime lists every kind on a timer; here each kind's watch
//!   cache is counted when `/metrics` is scraped, which costs the API server
//!   nothing and is never staler than the cache;
//! - how long a resource took to be seen, to be Ready the first time and
//!   to go once deleted (`..._first_time_to_reconcile_seconds`,
//!   `..._first_time_to_readiness_seconds`, `..._deletion_seconds`), from
//!   the kind's watch events ([`Lifecycle`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::core::object::HasStatus;
use kube::runtime::reflector::{Lookup, Store};
use kube::runtime::watcher;

use crate::api::condition::{Condition, ConditionStatus};
use crate::api::managed::ManagedStatus;
use crate::reconcile::runtime::metrics::{Count, Metrics, States};

/// What the metrics read of a resource of a kind's cache: its metadata and
/// its conditions, or nothing for one that does not deserialize.
pub type Observed<O> = for<'a> fn(&'a O) -> Option<(&'a ObjectMeta, &'a [Condition])>;

/// A managed resource's metadata and conditions (none before its first
/// status).
pub fn plain<K, A>(resource: &K) -> Option<(&ObjectMeta, &[Condition])>
where
    K: Resource + HasStatus<Status = ManagedStatus<A>>,
    A: Default + 'static,
{
    let conditions = resource.status().map_or(&[][..], |s| &s.conditions);
    Some((resource.meta(), conditions))
}

/// [`plain`] for a resource read through `DeserializeGuard`: nothing for
/// one that does not deserialize (it exists, and is neither Ready nor
/// Synced).
pub fn guarded<K, A>(resource: &DeserializeGuard<K>) -> Option<(&ObjectMeta, &[Condition])>
where
    K: Resource + HasStatus<Status = ManagedStatus<A>>,
    A: Default + 'static,
{
    resource.0.as_ref().ok().and_then(plain)
}

/// Registers the kind `K` whose cache is `store`, read through `of`.
pub fn count<K, O>(states: &States, store: Store<O>, of: Observed<O>)
where
    K: Resource<DynamicType = ()>,
    O: Lookup + Clone + Send + Sync + 'static,
    O::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    states.add(gvk::<K>(), move || {
        tally(
            store
                .state()
                .iter()
                .map(|o| of(o).map_or(&[][..], |(_, c)| c)),
        )
    });
}

/// Counts of a list of resources' conditions.
fn tally<'a>(resources: impl Iterator<Item = &'a [Condition]>) -> Count {
    resources.fold(Count::default(), |mut count, conditions| {
        count.exists += 1;
        count.ready += u64::from(is_true(conditions, "Ready"));
        count.synced += u64::from(is_true(conditions, "Synced"));
        count
    })
}

fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
}

/// The `gvk` label as crossplane-runtime writes it (Go's
/// `schema.GroupVersionKind.String()`):
/// `proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxVM`.
fn gvk<K: Resource<DynamicType = ()>>() -> String {
    format!("{}, Kind={}", K::api_version(&()), K::kind(&()))
}

/// Records a kind's lifecycle histograms from its watch events, as
/// crossplane-runtime's managed reconciler does from its passes: a
/// resource seen before it has any Synced condition is detected (its age
/// then), and Ready the first time after that (its age then: one already
/// Ready, or seen first after this process started, is not counted); a
/// resource gone after its deletion was asked, the time since.
pub struct Lifecycle<O> {
    metrics: Arc<Metrics>,
    gvk: String,
    of: Observed<O>,
    seen: Mutex<Seen>,
}

/// What [`Lifecycle`] keeps between a kind's watch events.
#[derive(Debug, Default)]
struct Seen {
    /// The resources detected and not Ready yet, by uid.
    awaiting: HashSet<String>,
    /// The resources whose deletion was asked, by uid: when.
    deleting: HashMap<String, Time>,
    /// The uids of a relist under way: a resource being deleted that a
    /// relist no longer holds went while the watch was away (its delete
    /// event is never sent), and is timed then.
    listing: Option<HashSet<String>>,
}

impl<O> Lifecycle<O> {
    /// The recorder of kind `K`, whose watch yields `O`, read through `of`.
    pub fn new<K: Resource<DynamicType = ()>>(metrics: Arc<Metrics>, of: Observed<O>) -> Self {
        Self {
            metrics,
            gvk: gvk::<K>(),
            of,
            seen: Mutex::default(),
        }
    }

    /// Sees one event of the kind's watch.
    pub fn see(&self, event: &Result<watcher::Event<O>, watcher::Error>) {
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        let now = Timestamp::now();
        let moments = match event {
            Ok(watcher::Event::Init) => {
                seen.listing = Some(HashSet::new());
                return;
            }
            Ok(watcher::Event::InitDone) => relisted(&mut seen, now),
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                let Some((meta, conditions)) = (self.of)(obj) else {
                    return;
                };
                lifecycle(&mut seen, meta, conditions, false, now)
            }
            Ok(watcher::Event::Delete(obj)) => {
                let Some((meta, conditions)) = (self.of)(obj) else {
                    return;
                };
                lifecycle(&mut seen, meta, conditions, true, now)
            }
            Err(_) => return,
        };
        let states = self.metrics.states();
        for (moment, after) in moments {
            match moment {
                Moment::Detected => states.detected(&self.gvk, after),
                Moment::FirstReady => states.first_ready(&self.gvk, after),
                Moment::Deleted => states.deleted(&self.gvk, after),
            }
        }
    }
}

/// What a watch event says of a resource's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Moment {
    Detected,
    FirstReady,
    Deleted,
}

/// The moments one event of a resource marks, with the time since its
/// creation (or since its deletion was asked); `awaiting` holds the uids
/// detected and not Ready yet.
fn lifecycle(
    seen: &mut Seen,
    meta: &ObjectMeta,
    conditions: &[Condition],
    gone: bool,
    now: Timestamp,
) -> Vec<(Moment, Duration)> {
    let Some(uid) = meta.uid.clone() else {
        return Vec::new();
    };
    let since = |t: &Option<Time>| t.as_ref().map(|t| elapsed(t, now)).unwrap_or_default();
    if gone {
        seen.awaiting.remove(&uid);
        seen.deleting.remove(&uid);
        return match &meta.deletion_timestamp {
            Some(_) => vec![(Moment::Deleted, since(&meta.deletion_timestamp))],
            None => Vec::new(),
        };
    }
    if let Some(listing) = &mut seen.listing {
        listing.insert(uid.clone());
    }
    if let Some(asked) = &meta.deletion_timestamp {
        seen.deleting.insert(uid.clone(), asked.clone());
    }
    let awaiting = &mut seen.awaiting;
    let mut moments = Vec::new();
    let synced_seen = conditions.iter().any(|c| c.type_ == "Synced");
    if !synced_seen && awaiting.insert(uid.clone()) {
        moments.push((Moment::Detected, since(&meta.creation_timestamp)));
    }
    if is_true(conditions, "Ready") && awaiting.remove(&uid) {
        moments.push((Moment::FirstReady, since(&meta.creation_timestamp)));
    }
    moments
}

/// A relist ended: the resources being deleted that it no longer holds
/// went while the watch was away (a watch resumed after the API server
/// compacted its history relists, and sends no delete for them).
fn relisted(seen: &mut Seen, now: Timestamp) -> Vec<(Moment, Duration)> {
    let Some(listed) = seen.listing.take() else {
        return Vec::new();
    };
    seen.awaiting.retain(|uid| listed.contains(uid));
    let gone: Vec<String> = seen
        .deleting
        .keys()
        .filter(|uid| !listed.contains(*uid))
        .cloned()
        .collect();
    gone.iter()
        .filter_map(|uid| seen.deleting.remove(uid))
        .map(|asked| (Moment::Deleted, elapsed(&asked, now)))
        .collect()
}

fn elapsed(since: &Time, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since.0)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProxmoxVM;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    fn condition(type_: &str, status: ConditionStatus) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status,
            last_transition_time: Time(at(0)),
            reason: "Any".to_owned(),
            message: None,
            observed_generation: None,
        }
    }

    fn meta(deleted_at: Option<i64>) -> ObjectMeta {
        ObjectMeta {
            uid: Some("u1".to_owned()),
            creation_timestamp: Some(Time(at(0))),
            deletion_timestamp: deleted_at.map(|s| Time(at(s))),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn counts_every_resource_and_only_true_conditions() {
        use ConditionStatus::{False, True, Unknown};
        let ready_synced = [condition("Ready", True), condition("Synced", True)];
        let waiting = [condition("Ready", False), condition("Synced", True)];
        let failing = [condition("Ready", Unknown), condition("Synced", False)];
        let agent_only = [condition("GuestAgent", True)];
        let resources: [&[Condition]; 5] = [&ready_synced, &waiting, &failing, &agent_only, &[]];
        let count = tally(resources.into_iter());
        assert_eq!(
            count,
            Count {
                exists: 5,
                ready: 1,
                synced: 2
            }
        );
    }

    #[test]
    fn the_gvk_label_is_written_as_go_writes_a_group_version_kind() {
        assert_eq!(
            gvk::<ProxmoxVM>(),
            "proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxVM"
        );
    }

    #[test]
    fn a_resource_is_detected_once_ready_once_and_deleted_once() {
        use ConditionStatus::{False, True};
        let mut seen = Seen::default();
        let secs = Duration::from_secs;
        let creating = [condition("Ready", False), condition("Synced", True)];
        let ready = [condition("Ready", True), condition("Synced", True)];
        // (conditions, deletion asked at, gone, now) -> moments
        type Row<'a> = (
            &'a [Condition],
            Option<i64>,
            bool,
            i64,
            Vec<(Moment, Duration)>,
        );
        let rows: [Row<'_>; 7] = [
            (&[], None, false, 2, vec![(Moment::Detected, secs(2))]),
            // The finalizer's write: seen again before any status.
            (&[], None, false, 3, vec![]),
            (&creating, None, false, 5, vec![]),
            (
                &ready,
                None,
                false,
                40,
                vec![(Moment::FirstReady, secs(40))],
            ),
            // Ready again later (a resync, a drift corrected): not first.
            (&ready, None, false, 90, vec![]),
            (&ready, Some(100), false, 100, vec![]),
            (
                &ready,
                Some(100),
                true,
                112,
                vec![(Moment::Deleted, secs(12))],
            ),
        ];
        for (i, (conditions, deleted_at, gone, now, want)) in rows.into_iter().enumerate() {
            let got = lifecycle(&mut seen, &meta(deleted_at), conditions, gone, at(now));
            assert_eq!(got, want, "row {i}");
        }
        assert!(seen.awaiting.is_empty() && seen.deleting.is_empty());
    }

    #[test]
    fn a_resource_first_seen_with_a_status_is_not_timed() {
        use ConditionStatus::True;
        let mut seen = Seen::default();
        let ready = [condition("Ready", True), condition("Synced", True)];
        // Already reconciled before this process started: crossplane-runtime
        // counts neither its detection nor its readiness either.
        let got = lifecycle(&mut seen, &meta(None), &ready, false, at(500));
        assert_eq!(got, vec![]);
        // Gone without a deletion asked (a watch resync dropping it): nothing.
        let got = lifecycle(&mut seen, &meta(None), &ready, true, at(600));
        assert_eq!(got, vec![]);
    }

    #[test]
    fn a_resource_gone_while_the_watch_was_away_is_timed_by_the_relist() {
        use ConditionStatus::True;
        let ready = [condition("Ready", True), condition("Synced", True)];
        let mut seen = Seen::default();
        let other = ObjectMeta {
            uid: Some("u2".to_owned()),
            ..meta(Some(100))
        };
        // Both asked to go; the watch then relists (its history compacted).
        lifecycle(&mut seen, &meta(Some(100)), &ready, false, at(100));
        lifecycle(&mut seen, &other, &ready, false, at(101));
        seen.listing = Some(HashSet::new());
        // The relist still holds u2 (its finalizer not removed yet), not u1.
        assert_eq!(lifecycle(&mut seen, &other, &ready, false, at(120)), vec![]);
        assert_eq!(
            relisted(&mut seen, at(130)),
            vec![(Moment::Deleted, Duration::from_secs(30))],
            "u1 went while the watch was away"
        );
        // A second relist end counts nothing again; u2 goes by its delete event.
        assert_eq!(relisted(&mut seen, at(140)), vec![]);
        assert_eq!(
            lifecycle(&mut seen, &other, &ready, true, at(150)),
            vec![(Moment::Deleted, Duration::from_secs(50))]
        );
        assert!(seen.deleting.is_empty());
    }
}
