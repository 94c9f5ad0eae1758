//! How many managed resources of each kind exist, are Ready and are
//! Synced: crossplane-runtime's state metrics
//! (`crossplane_managed_resource_{exists,ready,synced}{gvk}`), so the
//! dashboards and alerts built for Crossplane's managed resources read
//! this provider too.
//!
//! crossplane-runtime lists every kind on a timer; here each kind's watch
//! cache is counted when `/metrics` is scraped, which costs the API server
//! nothing and is never staler than the cache.

use kube::Resource;
use kube::core::DeserializeGuard;
use kube::core::object::HasStatus;
use kube::runtime::reflector::{Lookup, Store};

use crate::api::condition::{Condition, ConditionStatus};
use crate::api::managed::ManagedStatus;
use crate::reconcile::runtime::metrics::{Count, States};

/// The conditions of a managed resource (none before its first status).
pub fn conditions<K, A>(resource: &K) -> &[Condition]
where
    K: HasStatus<Status = ManagedStatus<A>>,
    A: Default + 'static,
{
    resource.status().map_or(&[], |s| &s.conditions)
}

/// The conditions of a resource read through `DeserializeGuard` (none for
/// one that does not deserialize: it exists, and is neither Ready nor
/// Synced).
pub fn guarded<K, A>(resource: &DeserializeGuard<K>) -> &[Condition]
where
    K: HasStatus<Status = ManagedStatus<A>>,
    A: Default + 'static,
{
    resource.0.as_ref().map_or(&[], conditions)
}

/// Registers the kind `K` whose cache is `store`, read through `of` (a
/// cache of objects that may not deserialize says what it can).
pub fn count<K, O>(states: &States, store: Store<O>, of: fn(&O) -> &[Condition])
where
    K: Resource<DynamicType = ()>,
    O: Lookup + Clone + Send + Sync + 'static,
    O::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    states.add(gvk::<K>(), move || {
        tally(store.state().iter().map(|o| of(o)))
    });
}

/// Counts of a list of resources' conditions.
fn tally<'a>(resources: impl Iterator<Item = &'a [Condition]>) -> Count {
    resources.fold(Count::default(), |mut count, conditions| {
        let is_true = |type_: &str| {
            conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == ConditionStatus::True)
        };
        count.exists += 1;
        count.ready += u64::from(is_true("Ready"));
        count.synced += u64::from(is_true("Synced"));
        count
    })
}

/// The `gvk` label as crossplane-runtime writes it (Go's
/// `schema.GroupVersionKind.String()`):
/// `proxmox.crossplane.io/v1alpha1, Kind=ProxmoxVM`.
fn gvk<K: Resource<DynamicType = ()>>() -> String {
    format!("{}, Kind={}", K::api_version(&()), K::kind(&()))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::ProxmoxVM;

    fn condition(type_: &str, status: ConditionStatus) -> Condition {
        Condition {
            type_: type_.to_owned(),
            status,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            reason: "Any".to_owned(),
            message: None,
            observed_generation: None,
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
            "proxmox.crossplane.io/v1alpha1, Kind=ProxmoxVM"
        );
    }
}
