//! The provider config reconciler: `status` of every `ProviderConfig` and
//! `ClusterProviderConfig` — `Ready` (the config, its Secrets and TLS
//! settings resolve and Proxmox answered an authenticated `GET /version`),
//! the Proxmox VE version, and `users` (how many ProxmoxVMs, ProxmoxContainers
//! and ProxmoxImages refer to it).
//!
//! One kube-runtime `Controller` per kind rather than a periodic task: the
//! Controller already merges triggers (config edits, Secret edits, VMs
//! coming and going), never runs two passes of one config at once, keeps
//! one timer per config for the resync, and backs off after errors — a
//! periodic task would either check every config on every tick or
//! reinvent that scheduler. The checks themselves are cheap for Proxmox:
//! one `GET /version` per config per resync interval through the config's
//! shared client (`providers`), sooner only when the config or its Secrets
//! changed.
//!
//! Triggers of a config's pass:
//! * its own creation and spec changes (not its status: see
//!   `kind::spec_changes`);
//! * its credentials or CA Secret changing: one metadata-only watch of
//!   Secrets (no data, service-account and Helm release Secrets left out),
//!   mapped to the configs that read each one;
//! * a VM starting or stopping to use it ([`users::Tap`] on the VM watch);
//! * its resync interval.
//!
//! A config's pass wakes its VMs when it became Ready or its inputs
//! changed (a fixed Secret reaches a waiting VM at once, not at its next
//! retry); a spec change or a deletion of a config wakes them directly.
//!
//! A config in use cannot be deleted: see
//! [`crate::reconcile::providers::in_use`].
//!
//! With leader election, only the replica holding a config's Lease runs
//! its passes (checks it, writes its status, which names that replica in
//! `status.holder`); the others skip it until they gain it.

mod kind;
mod probe;
mod reconcile;
mod report;
mod unreadable;
mod users;

use kind::{ConfigObject, spec_changes};
pub use users::{Tap, Users};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::{self, UnboundedReceiver, UnboundedSender};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::controller::{self, Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use self::reconcile::{Ctx, error_policy, reconcile};
use super::events::Events;
use super::providers::{ConfigKey, Providers, SecretName};
use crate::api::{ClusterProviderConfig, ProviderConfig, ProviderConfigKind};
use crate::reconcile::managed::watch::{scoped, unserved_as_empty};
use crate::reconcile::runtime::memory::Memory;
use crate::reconcile::runtime::shards::Shards;

/// Secrets that never hold Proxmox credentials, CA bundles or cloud-init
/// data, and are many (also left out of the VM controller's Secret watch).
pub(super) const SECRET_FIELDS: &str =
    "type!=kubernetes.io/service-account-token,type!=helm.sh/release.v1";

/// Config passes at once, per kind.
const CONCURRENCY: u16 = 4;

/// Triggers of one config this close together make one pass (many VMs
/// created at once change its user count once).
const DEBOUNCE: Duration = Duration::from_millis(500);

/// Asks the config controllers for a pass of a config.
#[derive(Clone)]
pub struct Triggers {
    provider: UnboundedSender<ObjectRef<ProviderConfig>>,
    cluster: UnboundedSender<ObjectRef<ClusterProviderConfig>>,
}

/// The receiving ends of [`Triggers`], for [`run`].
pub struct Receivers {
    provider: UnboundedReceiver<ObjectRef<ProviderConfig>>,
    cluster: UnboundedReceiver<ObjectRef<ClusterProviderConfig>>,
}

/// A connected pair.
pub fn triggers() -> (Triggers, Receivers) {
    let (provider, provider_rx) = mpsc::unbounded();
    let (cluster, cluster_rx) = mpsc::unbounded();
    (
        Triggers { provider, cluster },
        Receivers {
            provider: provider_rx,
            cluster: cluster_rx,
        },
    )
}

impl Triggers {
    /// Asks for a pass of `key` (once the controllers run; closed channels
    /// mean they stopped).
    pub fn send(&self, key: &ConfigKey) {
        match key.kind {
            ProviderConfigKind::ProviderConfig => {
                let r = ObjectRef::new(&key.name).within(&key.namespace);
                let _ = self.provider.unbounded_send(r);
            }
            ProviderConfigKind::ClusterProviderConfig => {
                let _ = self.cluster.unbounded_send(ObjectRef::new(&key.name));
            }
        }
    }
}

/// Runs the config controllers (the ClusterProviderConfig one unless in
/// the namespaced mode) and the Secret watch until `stop`.
pub async fn run(
    kube: kube::Client,
    scope: Option<String>,
    (providers, shards): (Arc<Providers>, Arc<Shards>),
    events: Events,
    users: Users,
    (triggers, receivers): (Triggers, Receivers),
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let ctx = Arc::new(Ctx {
        kube: kube.clone(),
        providers,
        users,
        probes: probe::Probes::default(),
        events,
        failures: Memory::<()>::default(),
        scope: scope.clone(),
        shards,
    });
    let (pcs, pc_controller) = controller(
        &kube,
        scoped::<DeserializeGuard<ProviderConfig>>(&kube, scope.as_deref()),
        receivers.provider,
        &ctx,
    );
    // Cluster-scoped: not in the namespaced mode, which reads nothing
    // outside its namespace (and drops their triggers).
    let (cpcs, cpc_controller) = if ctx.providers.serves_cluster_configs() {
        let (store, controller) = controller(
            &kube,
            Api::<DeserializeGuard<ClusterProviderConfig>>::all(kube.clone()),
            receivers.cluster,
            &ctx,
        );
        (Some(store), Some(controller))
    } else {
        drop(receivers.cluster);
        (None, None)
    };
    // VM passes read configs from these caches, not from the API server.
    ctx.providers.watch(pcs.clone(), cpcs.clone());
    let secrets = watch_secrets(kube, scope.as_deref(), pcs, cpcs, triggers);
    tracing::info!("provider config controllers started");
    let cluster = {
        let (ctx, stop) = (Arc::clone(&ctx), stop.clone());
        async move {
            if let Some(controller) = cpc_controller {
                drive(controller, ctx, stop).await;
            }
        }
    };
    futures::join!(
        drive(pc_controller, Arc::clone(&ctx), stop.clone()),
        cluster,
        secrets.take_until(stop).for_each(|()| async {}),
    );
    tracing::info!("provider config controllers stopped");
}

/// A config controller for one kind: triggered by spec changes of the
/// configs (which also wake their VMs) and by `triggers`.
fn controller<K: ConfigObject>(
    kube: &kube::Client,
    api: Api<DeserializeGuard<K>>,
    triggers: UnboundedReceiver<ObjectRef<K>>,
    ctx: &Arc<Ctx>,
) -> (Store<K>, Controller<K>) {
    let (reader, writer) = reflector::store();
    let users = ctx.users.clone();
    let events = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    let events = unserved_as_empty(K::kind(&()), events);
    let changes = spec_changes(unreadable::readable_only(kube.clone(), events).reflect(writer))
        .inspect(move |change| {
            if let Ok(config) = change {
                users.wake(&config.key());
            }
        });
    let controller = Controller::for_stream(changes, reader.clone())
        .reconcile_on(triggers)
        .with_config(
            Config::default()
                .concurrency(CONCURRENCY)
                .debounce(DEBOUNCE),
        );
    (reader, controller)
}

async fn drive<K: ConfigObject>(
    controller: Controller<K>,
    ctx: Arc<Ctx>,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let forget = Arc::clone(&ctx);
    controller
        .graceful_shutdown_on(stop)
        .run(reconcile::<K>, error_policy::<K>, ctx)
        .for_each(move |result| {
            match result {
                // A deleted config: its trigger finds nothing.
                Err(controller::Error::ObjectNotFound(gone)) => {
                    let kind = match gone.namespace {
                        Some(_) => ProviderConfigKind::ProviderConfig,
                        None => ProviderConfigKind::ClusterProviderConfig,
                    };
                    forget.forget(&ConfigKey {
                        kind,
                        namespace: gone.namespace.unwrap_or_default(),
                        name: gone.name,
                    });
                }
                Err(e) => tracing::debug!(error = %e, "provider config controller"),
                Ok(_) => {}
            }
            async {}
        })
        .await;
}

/// Watches the metadata of Secrets (never their data) and asks for a pass
/// of every config reading a Secret that changed, appeared or went.
fn watch_secrets(
    kube: kube::Client,
    scope: Option<&str>,
    pcs: Store<ProviderConfig>,
    cpcs: Option<Store<ClusterProviderConfig>>,
    triggers: Triggers,
) -> impl futures::Stream<Item = ()> + Send {
    let api: Api<PartialObjectMeta<Secret>> = scoped(&kube, scope);
    watcher(api, watcher::Config::default().fields(SECRET_FIELDS))
        .default_backoff()
        .touched_objects()
        .map(move |secret| match secret {
            Ok(secret) => {
                let name = SecretName {
                    namespace: secret.metadata.namespace.unwrap_or_default(),
                    name: secret.metadata.name.unwrap_or_default(),
                };
                let mut keys = readers(&pcs, &name);
                if let Some(cpcs) = &cpcs {
                    keys.append(&mut readers(cpcs, &name));
                }
                for key in keys {
                    tracing::debug!(secret = %name, config = %key, "a Secret of a provider config changed");
                    triggers.send(&key);
                }
            }
            Err(e) => tracing::debug!(error = %e, "Secret watch"),
        })
}

/// The configs in `store` that read the Secret `name`.
fn readers<K: ConfigObject>(store: &Store<K>, name: &SecretName) -> Vec<ConfigKey> {
    store
        .state()
        .iter()
        .map(|c| (c.key(), c))
        .filter(|(key, c)| key.reads(c.settings(), name))
        .map(|(key, _)| key)
        .collect()
}
