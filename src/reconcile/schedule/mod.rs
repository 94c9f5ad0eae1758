//! Scheduling: what the leader decides for many resources at once and must
//! decide atomically — VMIDs ([`vmids`]), nodes ([`placement`]) and per-node
//! import/clone slots ([`slots`]).
//!
//! These are the decisions the pure plan cannot make alone, because two
//! concurrent passes must not both get the same answer. Each is a short
//! check-and-record under one lock per provider config, with no I/O while
//! it is held; what it is decided from (the cluster view, the node's
//! active tasks, the controller's cache of ProxmoxVMs) is read before. The
//! state is this process's memory: a new leader starts empty and rebuilds
//! it from Proxmox and the ProxmoxVMs, which hold every decision that
//! matters (annotation, status).

pub mod placement;
pub mod slots;
pub mod vmids;

use std::collections::{BTreeSet, HashMap};
use std::ops::RangeInclusive;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pve_client::Upid;

use super::providers::ConfigKey;
use crate::api::provider_config::Limits;
use crate::api::vm::VmRef;
use crate::reconcile::common::grants::{Heavy, Placement, PlacementRequest, SlotGrant};

/// The per-node limit of `kind`.
fn limit_of(limits: &Limits, kind: Heavy) -> u32 {
    match kind {
        Heavy::Import => limits.max_concurrent_imports_per_node,
        Heavy::Clone => limits.max_concurrent_clones_per_node,
    }
}
pub use placement::{Candidates, LabelCounts};
pub use slots::RunningTask;

/// The books of one provider config (one Proxmox cluster).
#[derive(Debug, Default)]
struct Books {
    vmids: vmids::VmidBook,
    placement: placement::PlacementBook,
    /// Node → its slots.
    slots: HashMap<String, slots::NodeSlots>,
    /// The config's limits as the last slot request gave them (a task's
    /// end seen by the task watcher frees its slot with them).
    limits: Option<Limits>,
}

/// The scheduling state of every provider config.
#[derive(Debug, Default)]
pub struct Scheduler {
    configs: Mutex<HashMap<ConfigKey, Books>>,
}

impl Scheduler {
    fn with<T>(&self, key: &ConfigKey, f: impl FnOnce(&mut Books) -> T) -> T {
        let mut configs = self.configs.lock().unwrap_or_else(|e| e.into_inner());
        f(configs.entry(key.clone()).or_default())
    }

    /// A VMID for resource `uid` (see [`vmids::VmidBook::allocate`]).
    pub fn allocate_vmid(
        &self,
        key: &ConfigKey,
        uid: &str,
        range: RangeInclusive<u32>,
        used: &BTreeSet<u32>,
    ) -> Option<u32> {
        self.with(key, |b| b.vmids.allocate(uid, range, used, Instant::now()))
    }

    /// The resource's VMID reservation is no longer needed.
    pub fn release_vmid(&self, key: &ConfigKey, uid: &str) {
        self.with(key, |b| b.vmids.release(uid));
    }

    /// `vmid` turned out to belong to a VM that is not ours.
    pub fn vmid_taken(&self, key: &ConfigKey, vmid: u32) {
        self.with(key, |b| b.vmids.taken(vmid, Instant::now()));
    }

    /// The node for resource `uid` (see [`placement::PlacementBook::place`]).
    pub fn place(
        &self,
        key: &ConfigKey,
        uid: &str,
        vmid: u32,
        request: &PlacementRequest,
        from: Candidates<'_>,
    ) -> Placement {
        self.with(key, |b| {
            b.placement.place(uid, vmid, request, from, Instant::now())
        })
    }

    /// A `kind` slot on `node` for resource `uid` (`who`), and the waiters
    /// to wake for slots the node's list showed free.
    pub fn acquire_slot(
        &self,
        key: &ConfigKey,
        node: &str,
        (uid, who): (&str, &VmRef),
        (kind, limits): (Heavy, &Limits),
        running: Option<&[RunningTask]>,
    ) -> (SlotGrant, Vec<VmRef>) {
        self.with(key, |b| {
            b.limits = Some(limits.clone());
            let slots = b.slots.entry(node.to_owned()).or_default();
            let limit = limit_of(limits, kind);
            let grant = slots.acquire(node, (uid, who), kind, limit, running, Instant::now());
            (grant, slots.to_wake(|k| limit_of(limits, k)))
        })
    }

    /// The granted work of `uid` on `node` was dispatched as `upid`.
    pub fn dispatched(&self, key: &ConfigKey, node: &str, uid: &str, upid: &Upid) {
        self.with(key, |b| {
            b.slots
                .entry(node.to_owned())
                .or_default()
                .dispatched(uid, upid, Instant::now());
        });
    }

    /// A task of ours on `node` that never counts against a limit.
    pub fn light_task(&self, key: &ConfigKey, node: &str, upid: &Upid) {
        self.with(key, |b| {
            b.slots
                .entry(node.to_owned())
                .or_default()
                .light_task(upid, Instant::now());
        });
    }

    /// Gives back the slot of `uid` on `node` (unused grant, or its task
    /// ended); returns the waiters to wake for it.
    pub fn release_slot(
        &self,
        key: &ConfigKey,
        node: &str,
        uid: &str,
        limits: &Limits,
    ) -> Vec<VmRef> {
        self.with(key, |b| match b.slots.get_mut(node) {
            Some(slots) => {
                slots.release(uid);
                slots.to_wake(|k| limit_of(limits, k))
            }
            None => vec![],
        })
    }

    /// Task `upid` ended (a node's task list says so): the slot it held is
    /// free; returns the waiters to wake for it. The pass of the resource
    /// that started it still sees the end and settles it (giving back a
    /// slot twice is harmless).
    pub fn task_ended(&self, key: &ConfigKey, upid: &Upid) -> Vec<VmRef> {
        self.with(key, |b| {
            let (Some(limits), Some(slots)) = (&b.limits, b.slots.get_mut(upid.node())) else {
                return vec![];
            };
            if !slots.ended(upid) {
                return vec![];
            }
            slots.to_wake(|k| limit_of(limits, k))
        })
    }

    /// Forgets everything about a resource that is gone.
    pub fn forget(&self, key: &ConfigKey, uid: &str) {
        self.with(key, |b| {
            b.vmids.release(uid);
            b.placement.forget(uid);
            for slots in b.slots.values_mut() {
                slots.forget(uid);
            }
        });
    }

    /// Forgets the books of a provider config whose Lease this replica
    /// gained or lost: they are rebuilt from Proxmox and the ProxmoxVMs.
    pub fn forget_config(&self, key: &ConfigKey) {
        self.configs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Per config and node, how long the longest waiter for a slot has
    /// waited (for the metrics and the stall warning).
    pub fn oldest_waits(&self) -> Vec<(ConfigKey, String, Duration)> {
        let now = Instant::now();
        let configs = self.configs.lock().unwrap_or_else(|e| e.into_inner());
        configs
            .iter()
            .flat_map(|(key, b)| {
                b.slots
                    .iter()
                    .map(move |(node, s)| (key.clone(), node.clone(), s.oldest_wait(now)))
            })
            .collect()
    }
}
