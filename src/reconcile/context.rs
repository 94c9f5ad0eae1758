//! What every pass shares.

use std::sync::Arc;

use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;

use super::runtime::memory::{Kept, Memory};
use super::runtime::metrics::Metrics;
use super::runtime::queue::Queue;
use super::runtime::settings::Settings;
use super::runtime::shards::Shards;
use super::runtime::wake::Waker;
use crate::api::{ProxmoxContainer, ProxmoxVM, ProxmoxVNet};
use crate::reconcile::common::image_cache::Images;
use crate::reconcile::events::Events;
use crate::reconcile::inventory::Inventory;
use crate::reconcile::providers::Providers;
use crate::reconcile::schedule::Scheduler;
use crate::reconcile::schedule::vmids::Holders;

/// Each config's client sends a write only while this replica holds the
/// config: checked again after the write waited for its slot in the
/// client's limiter (or the process was paused), where the pass's fence
/// can no longer see it.
fn write_gates(shards: &Arc<Shards>) -> crate::reconcile::providers::WriteGates {
    let shards = Arc::clone(shards);
    Arc::new(move |key| {
        let (shards, key) = (Arc::clone(&shards), key.clone());
        pve_client::WriteGate::new(move || shards.holds_now(&key))
    })
}

/// The controller's shared state.
pub struct Context {
    /// The Kubernetes client.
    pub kube: kube::Client,
    /// One Proxmox client per provider config (shared with the provider
    /// config reconciler).
    pub providers: Arc<Providers>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Event publisher.
    pub events: Events,
    /// Settings.
    pub settings: Settings,
    /// VMIDs, placements and per-node slots, decided atomically.
    pub scheduler: Scheduler,
    /// Each provider config's cluster view, shared by its passes.
    pub inventory: Inventory,
    /// Fair admission of passes.
    pub queue: Arc<Queue>,
    /// What the controller remembers of each resource between passes (of
    /// a VM, its last look too).
    pub memory: Memory<Kept>,
    /// Wakes resources whose task ended or whose slot freed.
    pub waker: Waker<DeserializeGuard<ProxmoxVM>>,
    /// Wakes ProxmoxContainers whose task ended.
    pub container_waker: Waker<DeserializeGuard<ProxmoxContainer>>,
    /// The controller's cache of ProxmoxVMs.
    pub store: Store<DeserializeGuard<ProxmoxVM>>,
    /// The container controller's cache of ProxmoxContainers (their VMIDs
    /// share the allocator with the VMs').
    pub containers: Store<DeserializeGuard<ProxmoxContainer>>,
    /// The provider configs this replica holds (their Leases' terms).
    pub shards: Arc<Shards>,
    /// The controller's cache of ProxmoxImages (clones of their templates).
    pub images: Images,
    /// The kinds whose resources record VMIDs (one VMID space per config).
    pub vmid_holders: Vec<Box<dyn Holders>>,
    /// The SDN controller's cache of ProxmoxVNets (a guest may not name
    /// another namespace's); empty until [`Context::with_vnets`].
    pub vnets: Store<ProxmoxVNet>,
}

impl Context {
    /// A context for controllers whose caches are `store` and `containers`.
    pub fn new(
        kube: kube::Client,
        settings: Settings,
        metrics: Arc<Metrics>,
        (store, containers, images): (
            Store<DeserializeGuard<ProxmoxVM>>,
            Store<DeserializeGuard<ProxmoxContainer>>,
            Images,
        ),
        (waker, container_waker): (
            Waker<DeserializeGuard<ProxmoxVM>>,
            Waker<DeserializeGuard<ProxmoxContainer>>,
        ),
        vmid_holders: Vec<Box<dyn Holders>>,
    ) -> Self {
        let shards = Arc::new(match &settings.leader_election {
            Some(_) => Shards::sharded(settings.identity.clone()),
            None => Shards::unsharded(),
        });
        Self {
            shards: Arc::clone(&shards),
            providers: Arc::new(
                Providers::new(
                    kube.clone(),
                    metrics.request_hook(),
                    settings.poll_interval,
                    settings.namespaced().map(str::to_owned),
                )
                .with_write_gates(write_gates(&shards)),
            ),
            events: Events::new(
                kube.clone(),
                settings.identity.clone(),
                Arc::clone(&metrics),
            ),
            kube,
            metrics,
            queue: Arc::new(Queue::new(usize::from(settings.max_concurrent_reconciles))),
            settings,
            scheduler: Scheduler::default(),
            inventory: Inventory::default(),
            memory: Memory::default(),
            waker,
            container_waker,
            store,
            vmid_holders,
            images,
            containers,
            vnets: kube::runtime::reflector::store().0,
        }
    }

    /// The context, reading `vnets` for the VNets guests may not name.
    pub fn with_vnets(self, vnets: Store<ProxmoxVNet>) -> Self {
        Self { vnets, ..self }
    }

    /// The Proxmox IDs of the ProxmoxVNets of namespaces other than
    /// `namespace` (as their status shows them).
    pub fn foreign_vnets(&self, namespace: &str) -> std::collections::BTreeSet<String> {
        self.vnets
            .state()
            .iter()
            .filter(|v| v.metadata.namespace.as_deref() != Some(namespace))
            .filter_map(|v| v.status.as_ref()?.at_provider.id.clone())
            .collect()
    }
}
