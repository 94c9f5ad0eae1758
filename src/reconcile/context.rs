//! What every pass shares.

use std::sync::Arc;

use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;

use super::backoff::FailureCounts;
use super::capacity::Capacity;
use super::events::Events;
use super::metrics::Metrics;
use super::providers::Providers;
use super::settings::Settings;
use crate::api::ProxmoxVM;

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
    /// Consecutive failed passes per resource, for backoff.
    pub failures: FailureCounts,
    /// Per-node import and clone slots.
    pub capacity: Capacity,
    /// The controller's cache of ProxmoxVMs.
    pub store: Store<DeserializeGuard<ProxmoxVM>>,
}

impl Context {
    /// A context for a controller whose cache is `store`.
    pub fn new(
        kube: kube::Client,
        settings: Settings,
        metrics: Arc<Metrics>,
        store: Store<DeserializeGuard<ProxmoxVM>>,
    ) -> Self {
        Self {
            providers: Arc::new(Providers::new(
                kube.clone(),
                metrics.request_hook(),
                settings.poll_interval,
            )),
            events: Events::new(
                kube.clone(),
                settings.identity.clone(),
                Arc::clone(&metrics),
            ),
            kube,
            metrics,
            settings,
            failures: FailureCounts::default(),
            capacity: Capacity::default(),
            store,
        }
    }
}
