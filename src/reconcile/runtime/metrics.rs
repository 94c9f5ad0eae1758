//! Prometheus metrics (OpenMetrics text on `/metrics`).
//!
//! The provider's own names are prefixed `proxmox_provider_`; beside them
//! are crossplane-runtime's managed resource state metrics
//! (`crossplane_managed_resource_*`, see [`States`]). Counters get the
//! `_total` suffix from the encoder.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use pve_client::{RequestHook, RequestRecord};

/// `result` of a reconcile.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// `kind` of a reconcile error: a Kubernetes failure of the pass
/// (`kube_api`, ...) or the Synced=False reason it reported (`TaskFailed`,
/// `VmLocked`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: String,
}

/// A Proxmox task's `type` and `outcome` (`success`, `failed`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    r#type: String,
    outcome: &'static str,
}

/// A Proxmox request: method, path template, HTTP code (`none` when no
/// answer came).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    path: String,
    code: String,
}

/// A node of a provider config.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    config: String,
    node: String,
}

/// What became of a Kubernetes event (`write`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum EventWrite {
    /// A new Event object.
    Create,
    /// A repeat, counted in an existing Event object.
    Patch,
    /// Over the per-object rate limit: not written.
    Dropped,
}

/// A provider config (`held`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConfigLabels {
    config: String,
}

/// A config's Lease `gained` or `lost`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseChangeLabels {
    config: String,
    change: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    write: &'static str,
}

/// A managed kind's `gvk`, as crossplane-runtime labels its state metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GvkLabels {
    gvk: String,
}

/// How many resources of a kind exist, are Ready=True and Synced=True.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Resources of the kind.
    pub exists: u64,
    /// With Ready=True.
    pub ready: u64,
    /// With Synced=True.
    pub synced: u64,
}

type CountFn = Box<dyn Fn() -> Count + Send + Sync>;

/// crossplane-runtime's managed resource metrics: the state of each
/// managed kind, counted at each scrape from the counts each kind
/// registers (`managed::states`), and the histograms of its lifecycle.
pub struct States {
    kinds: Mutex<Vec<(String, CountFn)>>,
    exists: Family<GvkLabels, Gauge>,
    ready: Family<GvkLabels, Gauge>,
    synced: Family<GvkLabels, Gauge>,
    detected: Family<GvkLabels, Histogram>,
    first_ready: Family<GvkLabels, Histogram>,
    deleted: Family<GvkLabels, Histogram>,
}

/// crossplane-runtime's buckets of the time to readiness and to deletion.
const LIFECYCLE_BUCKETS: [f64; 11] = [
    1.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

impl Default for States {
    fn default() -> Self {
        let lifecycle = || {
            Family::<GvkLabels, Histogram>::new_with_constructor(|| {
                Histogram::new(LIFECYCLE_BUCKETS)
            })
        };
        Self {
            kinds: Mutex::default(),
            exists: Family::default(),
            ready: Family::default(),
            synced: Family::default(),
            // crossplane-runtime's: 10 ns to 100 s, by tens.
            detected: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1e-8, 10.0, 10))
            }),
            first_ready: lifecycle(),
            deleted: lifecycle(),
        }
    }
}

impl std::fmt::Debug for States {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("States").finish_non_exhaustive()
    }
}

impl States {
    /// Counts the kind labelled `gvk` with `count` from now on.
    pub fn add(&self, gvk: String, count: impl Fn() -> Count + Send + Sync + 'static) {
        if let Ok(mut kinds) = self.kinds.lock() {
            kinds.push((gvk, Box::new(count)));
        }
    }

    /// A resource of `gvk` seen for the first time, before any status,
    /// `after` its creation.
    pub fn detected(&self, gvk: &str, after: Duration) {
        observe(&self.detected, gvk, after);
    }

    /// A resource of `gvk` Ready for the first time, `after` its creation.
    pub fn first_ready(&self, gvk: &str, after: Duration) {
        observe(&self.first_ready, gvk, after);
    }

    /// A resource of `gvk` gone, `after` its deletion was asked.
    pub fn deleted(&self, gvk: &str, after: Duration) {
        observe(&self.deleted, gvk, after);
    }

    /// Sets the gauges from every kind's count.
    fn refresh(&self) {
        let Ok(kinds) = self.kinds.lock() else { return };
        for (gvk, count) in kinds.iter() {
            let Count {
                exists,
                ready,
                synced,
            } = count();
            let labels = GvkLabels { gvk: gvk.clone() };
            let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            self.exists.get_or_create(&labels).set(gauge(exists));
            self.ready.get_or_create(&labels).set(gauge(ready));
            self.synced.get_or_create(&labels).set(gauge(synced));
        }
    }

    /// Registers the families under crossplane-runtime's names and help.
    fn register(&self, registry: &mut Registry) {
        let crossplane = registry.sub_registry_with_prefix("crossplane");
        for (name, help, gauges) in [
            ("exists", "that exist", &self.exists),
            ("ready", "in Ready=True state", &self.ready),
            ("synced", "in Synced=True state", &self.synced),
        ] {
            crossplane.register(
                format!("managed_resource_{name}"),
                format!("The number of managed resources {help}"),
                gauges.clone(),
            );
        }
        for (name, help, histograms) in [
            (
                "first_time_to_reconcile",
                "be detected by the controller",
                &self.detected,
            ),
            (
                "first_time_to_readiness",
                "become ready first time after creation",
                &self.first_ready,
            ),
            ("deletion", "be deleted", &self.deleted),
        ] {
            crossplane.register(
                format!("managed_resource_{name}_seconds"),
                format!("The time it took for a managed resource to {help}"),
                histograms.clone(),
            );
        }
    }
}

fn observe(family: &Family<GvkLabels, Histogram>, gvk: &str, after: Duration) {
    family
        .get_or_create(&GvkLabels {
            gvk: gvk.to_owned(),
        })
        .observe(after.as_secs_f64());
}

/// The controller's metrics and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    states: States,
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    duration: Histogram,
    tasks: Family<TaskLabels, Histogram>,
    requests: Family<RequestLabels, Counter>,
    event_failures: Counter,
    vmid_allocations: Counter,
    download_lookups: Counter,
    queue_wait: Histogram,
    queue_waiting: Gauge,
    slot_wait: Family<NodeLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    events: Family<EventLabels, Counter>,
    lease_held: Family<ConfigLabels, Gauge>,
    lease_changes: Family<LeaseChangeLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut root = Registry::default();
        let states = States::default();
        states.register(&mut root);
        let registry = root.sub_registry_with_prefix("proxmox_provider");
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register(
            "reconcile",
            "ProxmoxVM reconcile passes by result (success, error)",
            reconciles.clone(),
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Failed ProxmoxVM reconcile passes by kind: a Kubernetes error, or the Synced=False reason",
            errors.clone(),
        );
        let duration = Histogram::new(exponential_buckets(0.005, 2.0, 14));
        registry.register(
            "reconcile_duration_seconds",
            "Duration of ProxmoxVM reconcile passes",
            duration.clone(),
        );
        let tasks = Family::<TaskLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.5, 2.0, 14))
        });
        registry.register(
            "task_duration_seconds",
            "Duration of Proxmox tasks the provider started, from dispatch to the pass that saw them end, by task type and outcome",
            tasks.clone(),
        );
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "proxmox_requests",
            "Requests to the Proxmox VE API by method, path template and HTTP code",
            requests.clone(),
        );
        let event_failures = Counter::default();
        registry.register(
            "event_publish_failures",
            "Kubernetes events that could not be published",
            event_failures.clone(),
        );
        let vmid_allocations = Counter::default();
        registry.register(
            "vmid_allocations",
            "VMIDs the provider allocated for ProxmoxVMs without vmid",
            vmid_allocations.clone(),
        );
        let download_lookups = Counter::default();
        registry.register(
            "download_host_lookups",
            "Host names of download URLs and OCI registries resolved (DNS, on the provider's side) before a download or pull may be sent",
            download_lookups.clone(),
        );
        let queue_wait = Histogram::new(exponential_buckets(0.001, 4.0, 10));
        registry.register(
            "reconcile_queue_wait_seconds",
            "How long due passes waited for one of the concurrent reconcile slots (served in arrival order)",
            queue_wait.clone(),
        );
        let queue_waiting = Gauge::default();
        registry.register(
            "reconcile_queue_waiting",
            "Due passes waiting for a reconcile slot",
            queue_waiting.clone(),
        );
        let slot_wait = Family::<NodeLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "capacity_wait_oldest_seconds",
            "Per node, how long the ProxmoxVM waiting longest for an import or clone slot has waited",
            slot_wait.clone(),
        );
        let events = Family::<EventLabels, Counter>::default();
        registry.register(
            "events",
            "Kubernetes events by write: create (a new Event), patch (a repeat counted in an existing Event), dropped (over the per-object rate limit)",
            events.clone(),
        );
        let lease_held = Family::<ConfigLabels, Gauge>::default();
        registry.register(
            "config_lease_held",
            "1 while this replica holds the provider config's Lease (reconciles its ProxmoxVMs), 0 after it lost it",
            lease_held.clone(),
        );
        let lease_changes = Family::<LeaseChangeLabels, Counter>::default();
        registry.register(
            "config_lease_changes",
            "Provider config Leases this replica gained or lost (lost: taken over, handed over, or past its renew deadline)",
            lease_changes.clone(),
        );
        Self {
            registry: root,
            states,
            reconciles,
            errors,
            duration,
            tasks,
            requests,
            event_failures,
            vmid_allocations,
            download_lookups,
            queue_wait,
            queue_waiting,
            slot_wait,
            events,
            lease_held,
            lease_changes,
        }
    }
}

impl Metrics {
    /// The registry, for encoding.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The managed kinds' state counts, for each kind to register its own.
    pub fn states(&self) -> &States {
        &self.states
    }

    /// Encodes every metric as OpenMetrics text.
    pub fn encode(&self) -> String {
        self.states.refresh();
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// Counts a finished pass and its duration.
    pub fn reconciled(&self, elapsed: Duration, error: Option<&str>) {
        self.duration.observe(elapsed.as_secs_f64());
        let result = if error.is_some() { "error" } else { "success" };
        self.reconciles
            .get_or_create(&ResultLabels { result })
            .inc();
        if let Some(kind) = error {
            self.errors
                .get_or_create(&ErrorLabels {
                    kind: kind.to_owned(),
                })
                .inc();
        }
    }

    /// Records a Proxmox task that ended.
    pub fn task_finished(&self, type_: &str, success: bool, elapsed: Duration) {
        let labels = TaskLabels {
            r#type: type_.to_owned(),
            outcome: if success { "success" } else { "failed" },
        };
        self.tasks
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a VMID allocation.
    pub fn vmid_allocated(&self) {
        self.vmid_allocations.inc();
    }

    /// Counts a DNS lookup of a download's host name.
    pub fn download_host_looked_up(&self) {
        self.download_lookups.inc();
    }

    /// A pass starts waiting for a reconcile slot.
    pub fn queue_entered(&self) {
        self.queue_waiting.inc();
    }

    /// A pass got its reconcile slot after `waited`.
    pub fn queue_left(&self, waited: Duration) {
        self.queue_waiting.dec();
        self.queue_wait.observe(waited.as_secs_f64());
    }

    /// The longest wait for a slot on a node.
    pub fn slot_wait(&self, config: &str, node: &str, oldest: Duration) {
        self.slot_wait
            .get_or_create(&NodeLabels {
                config: config.to_owned(),
                node: node.to_owned(),
            })
            .set(oldest.as_secs_f64());
    }

    /// Counts an event that could not be published.
    pub fn event_failed(&self) {
        self.event_failures.inc();
    }

    /// Counts what became of an event.
    pub fn event_written(&self, write: EventWrite) {
        let write = match write {
            EventWrite::Create => "create",
            EventWrite::Patch => "patch",
            EventWrite::Dropped => "dropped",
        };
        self.events.get_or_create(&EventLabels { write }).inc();
    }

    /// This replica gained (`true`) or lost the Lease of `config`.
    pub fn lease_changed(&self, config: &str, gained: bool) {
        let config = config.to_owned();
        self.lease_held
            .get_or_create(&ConfigLabels {
                config: config.clone(),
            })
            .set(i64::from(gained));
        let change = if gained { "gained" } else { "lost" };
        self.lease_changes
            .get_or_create(&LeaseChangeLabels { config, change })
            .inc();
    }

    /// A hook for the Proxmox clients that counts their requests.
    pub fn request_hook(&self) -> RequestHook {
        let requests = self.requests.clone();
        RequestHook::new(move |r: &RequestRecord<'_>| {
            let labels = RequestLabels {
                method: r.method.to_owned(),
                path: r.path.to_owned(),
                code: r
                    .status
                    .map_or_else(|| "none".to_owned(), |s| s.to_string()),
            };
            requests.get_or_create(&labels).inc();
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_every_family_with_its_labels() {
        let m = Metrics::default();
        m.reconciled(Duration::from_millis(20), None);
        m.reconciled(Duration::from_millis(20), Some("kube_api"));
        m.task_finished("qmcreate", true, Duration::from_secs(31));
        m.event_failed();
        m.event_written(EventWrite::Dropped);
        m.lease_changed("ClusterProviderConfig a", true);
        m.lease_changed("ClusterProviderConfig b", true);
        m.lease_changed("ClusterProviderConfig b", false);
        let hook = m.request_hook();
        hook_call(&hook, Some(200));
        hook_call(&hook, None);
        m.states()
            .first_ready("g/v, Kind=K", Duration::from_secs(42));
        m.states().add("g/v, Kind=K".to_owned(), || Count {
            exists: 3,
            ready: 1,
            synced: 2,
        });
        let text = m.encode();
        for line in [
            "proxmox_provider_reconcile_total{result=\"success\"} 1",
            "proxmox_provider_reconcile_total{result=\"error\"} 1",
            "proxmox_provider_reconcile_errors_total{kind=\"kube_api\"} 1",
            "proxmox_provider_reconcile_duration_seconds_count 2",
            "proxmox_provider_task_duration_seconds_count{type=\"qmcreate\",outcome=\"success\"} 1",
            "proxmox_provider_proxmox_requests_total{method=\"GET\",path=\"/nodes/{node}/qemu\",code=\"200\"} 1",
            "proxmox_provider_proxmox_requests_total{method=\"GET\",path=\"/nodes/{node}/qemu\",code=\"none\"} 1",
            "proxmox_provider_event_publish_failures_total 1",
            "proxmox_provider_events_total{write=\"dropped\"} 1",
            "proxmox_provider_config_lease_held{config=\"ClusterProviderConfig a\"} 1",
            "proxmox_provider_config_lease_held{config=\"ClusterProviderConfig b\"} 0",
            "proxmox_provider_config_lease_changes_total{config=\"ClusterProviderConfig b\",change=\"lost\"} 1",
            "crossplane_managed_resource_exists{gvk=\"g/v, Kind=K\"} 3",
            "crossplane_managed_resource_ready{gvk=\"g/v, Kind=K\"} 1",
            "crossplane_managed_resource_synced{gvk=\"g/v, Kind=K\"} 2",
            "crossplane_managed_resource_first_time_to_readiness_seconds_bucket{le=\"60.0\",gvk=\"g/v, Kind=K\"} 1",
            "crossplane_managed_resource_first_time_to_readiness_seconds_bucket{le=\"30.0\",gvk=\"g/v, Kind=K\"} 0",
            "# EOF",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    fn hook_call(hook: &RequestHook, status: Option<u16>) {
        let record = RequestRecord {
            method: "GET",
            path: "/nodes/{node}/qemu",
            status,
            elapsed: Duration::from_millis(3),
        };
        hook.call(&record);
    }
}
