//! VMID allocation: the leader hands out VMIDs itself.
//!
//! Proxmox's `/cluster/nextid` reserves nothing: N resources asking at once
//! get the same answer, one wins the create and the others start over, so
//! creating N VMs together cost N² requests. Here a VMID is free when it is
//! in the range, not used on the cluster (the inventory's
//! `/cluster/resources`), not recorded in any ProxmoxVM's external-name
//! annotation, not reserved for another resource about to record it, and
//! not known to be taken (a VM made by hand that the cluster view did not
//! show yet, learnt from a create that failed). One allocation costs no
//! Proxmox request beyond the shared inventory read.
//!
//! The allocation is still recorded in the annotation before the create,
//! and the create itself still verifies it: Proxmox refuses an existing
//! VMID, and the plan forgets a VMID that turned out taken.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use serde::de::DeserializeOwned;

use crate::api::meta::ConfigUser;
use crate::reconcile::providers::ConfigKey;

/// The resources of a kind that takes VMIDs (VMs and containers share one
/// VMID space per config): the VMIDs their external-name annotations
/// record. Registered in the `Context` by `controllers.rs`, so the
/// allocation names no kind.
pub trait Holders: Send + Sync {
    /// The VMIDs recorded by resources of config `key`.
    fn recorded(&self, key: &ConfigKey) -> Vec<u32>;
}

/// A kind's controller cache holds its resources' VMIDs.
impl<K> Holders for Store<DeserializeGuard<K>>
where
    K: ConfigUser
        + Resource<DynamicType = ()>
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn recorded(&self, key: &ConfigKey) -> Vec<u32> {
        self.state()
            .iter()
            .filter_map(|obj| {
                let user = obj.0.as_ref().ok()?;
                if ConfigKey::of(user) != *key {
                    return None;
                }
                user.external_name()?.parse().ok()
            })
            .collect()
    }
}

/// How long a reservation is kept: well past the time its annotation takes
/// to show in the cache (and the cluster view to show its VM).
const RESERVED_FOR: Duration = Duration::from_secs(300);
/// How long a VMID learnt to be taken is skipped without the cluster view.
const TAKEN_FOR: Duration = Duration::from_secs(600);

/// The VMIDs of one provider config (one Proxmox cluster).
#[derive(Debug, Default)]
pub struct VmidBook {
    /// Resource UID → the VMID reserved for it.
    reserved: HashMap<String, (u32, Instant)>,
    /// VMIDs found taken by something the cluster view did not show yet.
    taken: HashMap<u32, Instant>,
}

impl VmidBook {
    /// The VMID for resource `uid`: the one already reserved for it, else
    /// the lowest free one in `range`. `used` holds the VMIDs on the
    /// cluster and those recorded in ProxmoxVMs. `None`: the range is full.
    pub fn allocate(
        &mut self,
        uid: &str,
        range: RangeInclusive<u32>,
        used: &BTreeSet<u32>,
        now: Instant,
    ) -> Option<u32> {
        self.prune(now);
        if let Some((vmid, _)) = self.reserved.get(uid)
            && range.contains(vmid)
        {
            return Some(*vmid);
        }
        let reserved: BTreeSet<u32> = self.reserved.values().map(|(id, _)| *id).collect();
        let free = range.into_iter().find(|id| {
            !used.contains(id) && !reserved.contains(id) && !self.taken.contains_key(id)
        })?;
        self.reserved.insert(uid.to_owned(), (free, now));
        Some(free)
    }

    /// The resource no longer needs its reservation (the write failed, or it
    /// is recorded and `used` will show it).
    pub fn release(&mut self, uid: &str) {
        self.reserved.remove(uid);
    }

    /// `vmid` belongs to a VM that is not ours (learnt from a refused create
    /// or a foreign owner marker): skip it for a while.
    pub fn taken(&mut self, vmid: u32, now: Instant) {
        self.taken.insert(vmid, now);
    }

    /// Drops reservations [`RESERVED_FOR`] old, and taken marks the
    /// cluster view has had time to show. A reservation is not dropped
    /// when one caller's `used` shows its VMID: another caller may hold a
    /// `used` read before that (its allocation waiting for this book), in
    /// which the VMID is still free; dropping it then gave one VMID to two
    /// resources (7 of 1,000 in a bench run, caught by Proxmox refusing the
    /// second create).
    fn prune(&mut self, now: Instant) {
        self.reserved
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < RESERVED_FOR);
        self.taken
            .retain(|_, at| now.saturating_duration_since(*at) < TAKEN_FOR);
    }

    /// Reservations held (for metrics and tests).
    pub fn reservations(&self) -> usize {
        self.reserved.len()
    }
}

/// The range VMIDs are allocated from: the provider config's `vmidRange`,
/// else the cluster's `next-id` setting (upper bound exclusive there), else
/// PVE's own bounds.
pub fn range(
    configured: Option<(u32, u32)>,
    cluster_next_id: Option<(Option<u64>, Option<u64>)>,
) -> RangeInclusive<u32> {
    const MIN: u32 = 100;
    const MAX: u32 = 999_999_999;
    if let Some((min, max)) = configured {
        return min.max(MIN)..=max.min(MAX);
    }
    match cluster_next_id {
        Some((lower, upper)) => {
            let lower = lower.and_then(|l| u32::try_from(l).ok()).unwrap_or(MIN);
            let upper = upper
                .and_then(|u| u32::try_from(u.saturating_sub(1)).ok())
                .unwrap_or(MAX);
            lower.max(MIN)..=upper.min(MAX)
        }
        None => MIN..=MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(ids: &[u32]) -> BTreeSet<u32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn n_resources_get_n_distinct_vmids_without_asking_again() {
        let mut book = VmidBook::default();
        let now = Instant::now();
        let taken = used(&[100, 101, 9000]);
        let ids: Vec<u32> = (0..5)
            .map(|i| {
                book.allocate(&format!("uid-{i}"), 100..=999, &taken, now)
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [102, 103, 104, 105, 106]);
        // Asking again (a retried pass) returns the same reservation.
        assert_eq!(book.allocate("uid-2", 100..=999, &taken, now), Some(104));
        assert_eq!(book.reservations(), 5);
    }

    #[test]
    fn a_recorded_vmid_stays_reserved_for_callers_with_an_older_view() {
        let mut book = VmidBook::default();
        let now = Instant::now();
        assert_eq!(book.allocate("a", 100..=999, &used(&[]), now), Some(100));
        // The annotation is now in the cache: 100 is used for this caller.
        assert_eq!(book.allocate("b", 100..=999, &used(&[100]), now), Some(101));
        // A caller whose `used` was read before the annotation showed.
        assert_eq!(book.allocate("c", 100..=999, &used(&[]), now), Some(102));
        assert_eq!(book.reservations(), 3);
    }

    #[test]
    fn released_and_expired_reservations_free_their_vmid() {
        let mut book = VmidBook::default();
        let now = Instant::now();
        book.allocate("a", 100..=999, &used(&[]), now);
        book.release("a");
        assert_eq!(book.allocate("b", 100..=999, &used(&[]), now), Some(100));
        let later = now + RESERVED_FOR;
        assert_eq!(book.allocate("c", 100..=999, &used(&[]), later), Some(100));
    }

    #[test]
    fn taken_vmids_are_skipped_until_the_cluster_view_shows_them() {
        let mut book = VmidBook::default();
        let now = Instant::now();
        book.taken(100, now);
        assert_eq!(book.allocate("a", 100..=999, &used(&[]), now), Some(101));
        let later = now + TAKEN_FOR;
        assert_eq!(
            book.allocate("b", 100..=999, &used(&[101]), later),
            Some(100)
        );
    }

    #[test]
    fn a_full_range_allocates_nothing() {
        let mut book = VmidBook::default();
        let now = Instant::now();
        assert_eq!(book.allocate("a", 100..=101, &used(&[100, 101]), now), None);
    }

    #[test]
    fn ranges() {
        assert_eq!(
            range(Some((5000, 5999)), Some((Some(100), None))),
            5000..=5999
        );
        assert_eq!(range(None, Some((Some(1000), Some(2000)))), 1000..=1999);
        assert_eq!(range(None, Some((None, None))), 100..=999_999_999);
        assert_eq!(range(None, None), 100..=999_999_999);
        assert_eq!(range(Some((1, u32::MAX)), None), 100..=999_999_999);
    }
}
