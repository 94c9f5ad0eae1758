//! The kube-runtime Controller: what is watched and what triggers a pass.
//!
//! * ProxmoxVMs in all namespaces, through `DeserializeGuard` (one
//!   malformed object cannot stall the watch) and a predicate filter on
//!   generation, annotations and finalizers: a status write (ours, every
//!   few seconds while a task runs) does not trigger another pass, while a
//!   spec change, a pause annotation or a deletion does.
//! * Connection Secrets (owned, labelled): a deleted or edited one is
//!   written again.
//! * ProviderConfigs and ClusterProviderConfigs: a change requeues every
//!   ProxmoxVM that refers to the config (found in the controller's cache).
//!
//! Many VMs reconcile in parallel (`max_concurrent_reconciles`); the
//! Controller never runs two passes of one VM at once.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use kube::{Api, Resource, ResourceExt};

use super::connection::MANAGED_BY;
use super::context::Context;
use super::metrics::Metrics;
use super::pass::{error_policy, reconcile};
use super::providers::ConfigKey;
use super::server::Readiness;
use super::settings::Settings;
use crate::api::{ClusterProviderConfig, ProviderConfig, ProviderConfigKind, ProxmoxVM};

/// Runs the controller until `stop` resolves (then lets running passes
/// finish).
pub async fn run(
    kube: kube::Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<DeserializeGuard<ProxmoxVM>> = scoped(&kube, settings.namespace.as_deref());
    let (reader, writer) = reflector::store();
    let vms = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            predicates::generation
                .combine(predicates::annotations)
                .combine(predicates::finalizers),
            Default::default(),
        );
    let secrets = watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let concurrency = settings.max_concurrent_reconciles;
    let namespace = settings.namespace.clone();
    let ctx = Arc::new(Context::new(
        kube.clone(),
        settings,
        metrics,
        reader.clone(),
    ));
    let controller = Controller::for_stream(vms, reader.clone())
        .owns(scoped::<Secret>(&kube, namespace.as_deref()), secrets)
        .watches(
            scoped::<ProviderConfig>(&kube, namespace.as_deref()),
            watcher::Config::default(),
            users(reader.clone(), |pc: &ProviderConfig| ConfigKey {
                kind: ProviderConfigKind::ProviderConfig,
                namespace: pc.namespace().unwrap_or_default(),
                name: pc.name_any(),
            }),
        )
        .watches(
            Api::<ClusterProviderConfig>::all(kube),
            watcher::Config::default(),
            users(reader.clone(), |pc: &ClusterProviderConfig| ConfigKey {
                kind: ProviderConfigKind::ClusterProviderConfig,
                namespace: String::new(),
                name: pc.name_any(),
            }),
        )
        .with_config(Config::default().concurrency(concurrency))
        .graceful_shutdown_on(stop);
    let synced = tokio::spawn({
        let readiness = Arc::clone(&readiness);
        let reader = reader.clone();
        async move {
            // The store's readiness signal wakes only its latest waiter (the
            // Controller waits on it too), so look again every second.
            loop {
                let wait = reader.wait_until_ready();
                match tokio::time::timeout(Duration::from_secs(1), wait).await {
                    Ok(Ok(())) => break,
                    Ok(Err(_)) => return,
                    Err(_) => continue,
                }
            }
            tracing::info!("ProxmoxVM cache filled");
            readiness.set_synced(true);
        }
    });
    tracing::info!(concurrency, "controller started");
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((vm, action)) => tracing::trace!(vm = %vm, ?action, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "controller"),
            }
        })
        .await;
    synced.abort();
    readiness.set_synced(false);
    tracing::info!("controller stopped");
}

/// An API for all namespaces, or only `namespace`.
pub(super) fn scoped<K>(kube: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(kube.clone(), ns),
        None => Api::all(kube.clone()),
    }
}

/// Maps a provider config to the ProxmoxVMs that use it.
fn users<C>(
    store: Store<DeserializeGuard<ProxmoxVM>>,
    key: impl Fn(&C) -> ConfigKey + Send + Sync + 'static,
) -> impl Fn(C) -> Vec<ObjectRef<DeserializeGuard<ProxmoxVM>>> + Send + Sync + 'static {
    move |config: C| {
        let key = key(&config);
        store
            .state()
            .iter()
            .filter(|g| matches!(&g.0, Ok(vm) if ConfigKey::of(vm) == key))
            .map(|g| ObjectRef::from_obj(g.as_ref()))
            .collect()
    }
}
