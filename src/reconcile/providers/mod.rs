//! Provider configs: which Proxmox a ProxmoxVM talks to, and the one client
//! per config that all its VMs share.
//!
//! A client holds the config's limits, its login ticket and its batched
//! task observer, so it must be shared, not built per pass. It is rebuilt
//! when the config's spec (its generation) or one of its Secrets (their
//! resourceVersions) changes. The VM passes and the provider config
//! reconciler ([`super::configs`]) share it.

mod build;
pub mod in_use;
mod key;

pub(crate) use build::secret_value;
pub use build::{set_agent, set_task_observe_mode};
pub use key::{ConfigKey, SecretName};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};

use super::error::{Error, is_forbidden, is_invalid, is_not_found};
use super::invalid::why_unreadable;
use crate::api::meta::ConfigUser;
use crate::api::{
    ClusterProviderConfig, ProviderConfig, ProviderConfigKind, ProviderSettings,
    provider_config::{
        CloneSources, ConfigReason, ContainerPolicy, DownloadPolicy, Limits, Timing,
    },
};
use crate::reconcile::common::provider::ProviderState;
use in_use::Guard;
use pve_client::{Client, RequestHook};

/// A usable provider config.
#[derive(Clone, Debug)]
pub struct Connection {
    /// Which config.
    pub key: ConfigKey,
    /// Its client (shared).
    pub client: Client,
    /// Its durations (the resync interval already resolved).
    pub timing: Timing,
    /// Its limits.
    pub limits: Limits,
    /// Its `vmidRange`, when set.
    pub vmid_range: Option<(u32, u32)>,
    /// Its `clonePolicy.allowNonTemplates`, when set.
    pub clones: Option<CloneSources>,
    /// Its `containerPolicy` (left out: nothing beyond an unprivileged
    /// container with `nesting`).
    pub containers: ContainerPolicy,
    /// Its `downloadPolicy`, when set (else the default: public https).
    pub downloads: Option<DownloadPolicy>,
    /// The host of its endpoint (a name or address of a Proxmox node).
    pub endpoint_host: String,
}

impl Connection {
    /// The names the Proxmox nodes answer to, which no download may name:
    /// `nodes` and the endpoint's host.
    pub fn internal_names<'a>(&self, nodes: impl Iterator<Item = &'a str>) -> Vec<String> {
        nodes
            .map(str::to_owned)
            .chain(std::iter::once(self.endpoint_host.clone()))
            .collect()
    }

    /// The plan's view of it.
    pub fn state(&self) -> ProviderState {
        ProviderState::Ready {
            timing: self.timing,
            limits: self.limits.clone(),
            clones: self.clones.clone(),
            downloads: self.downloads.clone(),
            endpoint_host: self.endpoint_host.clone(),
        }
    }
}

/// Why a provider config that exists cannot be used (no Proxmox request
/// was made). The message is for people and never holds a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The `Ready` reason it becomes.
    pub reason: ConfigReason,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    pub(crate) fn new(reason: ConfigReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// What a provider config that exists resolves to.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The versions it was resolved from (config uid and generation, the
    /// Secrets' resourceVersions): when they change, the client is rebuilt.
    pub inputs: String,
    /// The shared client and settings, or why there is none.
    pub connection: Result<Connection, Problem>,
}

#[derive(Debug)]
struct Cached {
    inputs: String,
    connection: Result<Connection, Problem>,
    /// Resolved by the provider config controller, which resolves again on
    /// every change; otherwise by a VM pass, and trusted only briefly.
    watched: bool,
    at: std::time::Instant,
}

/// How long a config resolved by a VM pass (not kept current by the config
/// controller, e.g. outside a test controller's namespace) is reused.
const UNWATCHED_FOR: Duration = Duration::from_secs(30);

/// A config's version: uid and generation (its status changes do not make
/// a new client).
fn config_version(meta: &ObjectMeta) -> String {
    format!(
        "{}@{}",
        meta.uid.as_deref().unwrap_or_default(),
        meta.generation.unwrap_or_default()
    )
}

/// The provider config controllers' watch caches.
struct ConfigStores {
    provider: Store<ProviderConfig>,
    /// `None` in the namespaced mode: no ClusterProviderConfig is watched.
    cluster: Option<Store<ClusterProviderConfig>>,
}

/// Makes the write gate of a config's client (see
/// [`Providers::with_write_gates`]).
pub type WriteGates = std::sync::Arc<dyn Fn(&ConfigKey) -> pve_client::WriteGate + Send + Sync>;

/// One client per provider config, rebuilt when the config changes.
pub struct Providers {
    stores: std::sync::OnceLock<ConfigStores>,
    kube: kube::Client,
    hook: RequestHook,
    /// The gate each config's client asks before a write goes out.
    gates: Option<WriteGates>,
    default_resync: Duration,
    /// The namespace of the namespaced mode, whose ProviderConfigs alone
    /// are served: no ClusterProviderConfig is read.
    namespaced: Option<String>,
    cache: Mutex<HashMap<ConfigKey, Cached>>,
}

/// The schema default of `resyncInterval`: a config with it defers to the
/// controller's `--poll-interval`.
const DEFAULT_RESYNC: &str = "1m";

impl Providers {
    /// An empty cache; `hook` counts every client's requests. `namespaced`:
    /// serve only that namespace's ProviderConfigs (see
    /// `Settings::namespaced`).
    pub fn new(
        kube: kube::Client,
        hook: RequestHook,
        default_resync: Duration,
        namespaced: Option<String>,
    ) -> Self {
        Self {
            stores: std::sync::OnceLock::new(),
            kube,
            hook,
            default_resync,
            namespaced,
            cache: Mutex::new(HashMap::new()),
            gates: None,
        }
    }

    /// Each config's client asks `gates(config)` before every write it
    /// sends (see [`pve_client::WriteGate`]).
    pub fn with_write_gates(mut self, gates: WriteGates) -> Self {
        self.gates = Some(gates);
        self
    }

    /// Whether ClusterProviderConfigs are served (not in the namespaced
    /// mode).
    pub fn serves_cluster_configs(&self) -> bool {
        self.namespaced.is_none()
    }

    /// Why the config `key` is not served, when it is a ClusterProviderConfig
    /// in the namespaced mode: said on the resource as a config not found
    /// (nothing is read, nothing created).
    fn not_served(&self, key: &ConfigKey) -> Option<ProviderState> {
        let namespace = self.namespaced.as_ref()?;
        (key.kind == ProviderConfigKind::ClusterProviderConfig).then(|| ProviderState::NotFound {
            message: format!(
                "{key} is not served: this provider serves only namespace {namespace} and its ProviderConfigs (--watch-namespace), never a ClusterProviderConfig; name a ProviderConfig of namespace {namespace} in spec.providerConfigRef (kind: ProviderConfig)"
            ),
        })
    }

    /// The resync interval of configs that cannot be resolved (and of
    /// those that keep the default).
    pub fn default_resync(&self) -> Duration {
        self.default_resync
    }

    /// Resolves the config `vm` refers to: `Ok(Ok(connection))` when usable,
    /// `Ok(Err(state))` when missing or unusable (the plan says so on the
    /// resource), `Err` when Kubernetes could not be asked.
    ///
    /// Served from memory once the provider config controller has seen the
    /// config: its metadata (deletion, finalizers) from that controller's
    /// watch cache, its client from the resolution that controller repeats
    /// whenever the config or one of its Secrets changes. So a VM pass reads
    /// neither; only a config not seen yet is read here. A VM that would start
    /// to depend on the config goes through the in-use guard ([`in_use`]).
    pub async fn connect(
        &self,
        vm: &impl ConfigUser,
    ) -> Result<Result<Connection, ProviderState>, Error> {
        let key = ConfigKey::of(vm);
        let started = vm.meta().deletion_timestamp.is_some() || vm.external_name().is_some();
        self.connect_to(&key, started).await
    }

    /// [`Providers::connect`] for any resource that names the config
    /// `key`: `started` when it already depends on it (being deleted, or
    /// it has made something on Proxmox), as the in-use guard asks.
    pub async fn connect_to(
        &self,
        key: &ConfigKey,
        started: bool,
    ) -> Result<Result<Connection, ProviderState>, Error> {
        let key = key.clone();
        if let Some(state) = self.not_served(&key) {
            return Ok(Err(state));
        }
        let (settings, meta) = match self.watched(&key) {
            Some(config) => config,
            None => match self.read_config(&key).await {
                Ok(Some(config)) => config,
                Ok(None) => return Ok(Err(not_found(&key))),
                // Written around the API server's validation.
                Err(Error::Kube(kube::Error::SerdeError(_))) => {
                    let problem = self.why_unreadable(&key).await?;
                    return Ok(Err(ProviderState::Unusable {
                        message: format!("{key}: {}", problem.message),
                    }));
                }
                Err(e) => return Err(e),
            },
        };
        match in_use::guard_started(started, &key, &meta) {
            Guard::Use => {}
            Guard::Refuse(message) => return Ok(Err(ProviderState::Unusable { message })),
            Guard::Protect => match in_use::set(&self.kube, &key, &meta, true).await {
                Ok(()) => {}
                // Deleted since it was read.
                Err(e) if is_not_found(&e) => return Ok(Err(not_found(&key))),
                // An RBAC without `patch` on provider configs (not the
                // provider's own), or a config written around its schema
                // (every write to it is refused; the problem is reported
                // below): protecting is not possible, using is.
                Err(e) if is_forbidden(&e) || is_invalid(&e) => {
                    tracing::warn!(config = %key, error = %e, "cannot mark the provider config in use");
                }
                Err(e) => return Err(e.into()),
            },
        }
        let connection = match self.known(&key) {
            Some(known) => known,
            None => {
                self.resolve_with(&key, &settings, &meta, false)
                    .await?
                    .connection
            }
        };
        Ok(connection.map_err(|p| ProviderState::Unusable {
            message: format!("{key}: {}", p.message),
        }))
    }

    /// The config as the provider config controller's watch cache holds it,
    /// once that controller runs and has listed it.
    fn watched(&self, key: &ConfigKey) -> Option<(ProviderSettings, ObjectMeta)> {
        let stores = self.stores.get()?;
        match key.kind {
            ProviderConfigKind::ProviderConfig => stores
                .provider
                .get(&ObjectRef::new(&key.name).within(&key.namespace))
                .map(|c| (c.spec.settings.clone(), c.metadata.clone())),
            ProviderConfigKind::ClusterProviderConfig => stores
                .cluster
                .as_ref()?
                .get(&ObjectRef::new(&key.name))
                .map(|c| (c.spec.settings.clone(), c.metadata.clone())),
        }
    }

    /// Whether the config `key` names does not exist, as the config
    /// controllers' watch caches tell once both have listed (`None` before
    /// that: not known yet). One cache lookup: it is asked on
    /// every pass of a resource whose config this replica does not hold.
    /// A ClusterProviderConfig is missing in the namespaced mode.
    pub fn is_missing(&self, key: &ConfigKey) -> Option<bool> {
        if self.not_served(key).is_some() {
            return Some(true);
        }
        let stores = self.listed_stores()?;
        Some(match key.kind {
            ProviderConfigKind::ProviderConfig => stores
                .provider
                .get(&ObjectRef::new(&key.name).within(&key.namespace))
                .is_none(),
            ProviderConfigKind::ClusterProviderConfig => stores
                .cluster
                .as_ref()
                .is_none_or(|c| c.get(&ObjectRef::new(&key.name)).is_none()),
        })
    }

    /// Every config the provider config controllers' watch caches hold,
    /// once both have listed; `None` before.
    pub fn listed_configs(&self) -> Option<Vec<ConfigKey>> {
        let stores = self.listed_stores()?;
        let provider = stores.provider.state();
        let cluster = stores
            .cluster
            .as_ref()
            .map(Store::state)
            .unwrap_or_default();
        Some(
            provider
                .iter()
                .map(|c| ConfigKey::provider_config(c))
                .chain(
                    cluster
                        .iter()
                        .map(|c| ConfigKey::cluster_provider_config(c)),
                )
                .collect(),
        )
    }

    /// The config controllers' watch caches, once both have listed.
    fn listed_stores(&self) -> Option<&ConfigStores> {
        let stores = self.stores.get()?;
        let listed = |ready: Option<Result<(), _>>| matches!(ready, Some(Ok(())));
        use futures::FutureExt;
        (listed(stores.provider.wait_until_ready().now_or_never())
            && stores
                .cluster
                .as_ref()
                .is_none_or(|c| listed(c.wait_until_ready().now_or_never())))
        .then_some(stores)
    }

    /// Serves configs from the provider config controllers' watch caches
    /// from now on (`cluster`: none in the namespaced mode).
    pub fn watch(
        &self,
        provider: Store<ProviderConfig>,
        cluster: Option<Store<ClusterProviderConfig>>,
    ) {
        let _ = self.stores.set(ConfigStores { provider, cluster });
    }

    /// Why a config that exists cannot be read as the types this provider
    /// knows (it was written around the API server's validation).
    async fn why_unreadable(&self, key: &ConfigKey) -> Result<Problem, Error> {
        let raw = match key.kind {
            ProviderConfigKind::ProviderConfig => {
                let resource = ApiResource::erase::<ProviderConfig>(&());
                Api::<DynamicObject>::namespaced_with(self.kube.clone(), &key.namespace, &resource)
                    .get(&key.name)
                    .await?
            }
            ProviderConfigKind::ClusterProviderConfig => {
                let resource = ApiResource::erase::<ClusterProviderConfig>(&());
                Api::<DynamicObject>::all_with(self.kube.clone(), &resource)
                    .get(&key.name)
                    .await?
            }
        };
        let raw = serde_json::to_value(raw).map_err(|source| Error::Serialize {
            what: "a provider config",
            source,
        })?;
        let why = match key.kind {
            ProviderConfigKind::ProviderConfig => why_unreadable::<ProviderConfig>(raw),
            ProviderConfigKind::ClusterProviderConfig => {
                why_unreadable::<ClusterProviderConfig>(raw)
            }
        };
        Ok(Problem::new(
            ConfigReason::InvalidConfig,
            format!(
                "cannot be read: {}",
                why.unwrap_or_else(|| "it changed while being read".into())
            ),
        ))
    }

    /// Reads the Secrets of the config `key` (already read: its `settings`
    /// and `meta`) and returns the shared client for them (built when they
    /// changed), or why it cannot be built. `Err`: Kubernetes could not be
    /// asked.
    pub async fn resolve_config(
        &self,
        key: &ConfigKey,
        settings: &ProviderSettings,
        meta: &ObjectMeta,
    ) -> Result<Resolved, Error> {
        self.resolve_with(key, settings, meta, true).await
    }

    async fn resolve_with(
        &self,
        key: &ConfigKey,
        settings: &ProviderSettings,
        meta: &ObjectMeta,
        watched: bool,
    ) -> Result<Resolved, Error> {
        let mut inputs = config_version(meta);
        let connection = self.connection(key, settings, &mut inputs).await?;
        self.cache.lock().expect("provider cache poisoned").insert(
            key.clone(),
            Cached {
                inputs: inputs.clone(),
                connection: connection.clone(),
                watched,
                at: std::time::Instant::now(),
            },
        );
        Ok(Resolved { inputs, connection })
    }

    /// Reads the Secrets (appending their versions to `inputs`) and builds
    /// the client unless the cached one was built from the same inputs.
    async fn connection(
        &self,
        key: &ConfigKey,
        settings: &ProviderSettings,
        inputs: &mut String,
    ) -> Result<Result<Connection, Problem>, Error> {
        let Some(credentials_name) = key.credentials_secret(settings) else {
            return Ok(Err(Problem::new(
                ConfigReason::InvalidConfig,
                "credentials.secretRef.namespace is required",
            )));
        };
        let credentials = self.read_secret(&credentials_name, inputs).await?;
        let ca = match key.ca_secret(settings) {
            None => None,
            Some((name, ca_key)) => Some((self.read_secret(&name, inputs).await?, name, ca_key)),
        };
        let Some(credentials) = credentials else {
            return Ok(Err(Problem::new(
                ConfigReason::SecretNotFound,
                format!("the credentials Secret {credentials_name} does not exist"),
            )));
        };
        let ca = match ca {
            None => None,
            Some((Some(secret), _, ca_key)) => Some((secret, ca_key)),
            Some((None, name, _)) => {
                return Ok(Err(Problem::new(
                    ConfigReason::SecretNotFound,
                    format!("the CA bundle Secret {name} does not exist"),
                )));
            }
        };
        if let Some(cached) = self.cached(key, inputs) {
            return Ok(Ok(cached));
        }
        let mut timing = match settings.timing() {
            Ok(timing) => timing,
            Err(e) => {
                return Ok(Err(Problem::new(
                    ConfigReason::InvalidConfig,
                    e.to_string(),
                )));
            }
        };
        if settings.resync_interval == DEFAULT_RESYNC {
            timing.resync_interval = self.default_resync;
        }
        let client = build::client_config(
            settings,
            &credentials,
            ca.as_ref().map(|(s, k)| (s, k.as_str())),
            &timing,
            self.hook.clone(),
        )
        .map(|mut config| {
            config.write_gate = self.gates.as_ref().map(|gates| gates(key));
            config
        })
        .and_then(build::client);
        let client = match client {
            Ok(client) => client,
            Err(problem) => return Ok(Err(problem)),
        };
        tracing::info!(config = %key, endpoint = %settings.endpoint, "built a Proxmox client");
        Ok(Ok(Connection {
            key: key.clone(),
            client,
            timing,
            limits: settings.limits.clone(),
            vmid_range: settings.vmid_range.map(|r| (r.min, r.max)),
            clones: settings
                .clone_policy
                .as_ref()
                .and_then(|p| p.allow_non_templates.clone()),
            containers: settings.container_policy.clone().unwrap_or_default(),
            downloads: settings.download_policy.clone(),
            endpoint_host: crate::reconcile::downloads::host_of_url(&settings.endpoint)
                .unwrap_or_default(),
        }))
    }

    fn cached(&self, key: &ConfigKey, inputs: &str) -> Option<Connection> {
        let cache = self.cache.lock().expect("provider cache poisoned");
        cache
            .get(key)
            .filter(|c| c.inputs == inputs)
            .and_then(|c| c.connection.clone().ok())
    }

    /// The shared client of a config resolved and usable, if it is (for
    /// work outside a pass, such as the task watcher).
    pub fn client_of(&self, key: &ConfigKey) -> Option<Client> {
        let cache = self.cache.lock().expect("provider cache poisoned");
        cache
            .get(key)
            .and_then(|c| c.connection.as_ref().ok())
            .map(|c| c.client.clone())
    }

    /// What the config last resolved to, if it has been.
    fn known(&self, key: &ConfigKey) -> Option<Result<Connection, Problem>> {
        let cache = self.cache.lock().expect("provider cache poisoned");
        cache
            .get(key)
            .filter(|c| c.watched || c.at.elapsed() < UNWATCHED_FOR)
            .map(|c| c.connection.clone())
    }

    /// Forgets the client of a config that is gone.
    pub fn forget(&self, key: &ConfigKey) {
        self.cache
            .lock()
            .expect("provider cache poisoned")
            .remove(key);
    }

    /// The config's settings and metadata.
    async fn read_config(
        &self,
        key: &ConfigKey,
    ) -> Result<Option<(ProviderSettings, ObjectMeta)>, Error> {
        Ok(match key.kind {
            ProviderConfigKind::ProviderConfig => {
                Api::<ProviderConfig>::namespaced(self.kube.clone(), &key.namespace)
                    .get_opt(&key.name)
                    .await?
                    .map(|c| (c.spec.settings, c.metadata))
            }
            ProviderConfigKind::ClusterProviderConfig => {
                Api::<ClusterProviderConfig>::all(self.kube.clone())
                    .get_opt(&key.name)
                    .await?
                    .map(|c| (c.spec.settings, c.metadata))
            }
        })
    }

    /// Reads a Secret, appending its resourceVersion (`-` when missing) to
    /// `inputs`.
    async fn read_secret(
        &self,
        name: &SecretName,
        inputs: &mut String,
    ) -> Result<Option<Secret>, Error> {
        let secret = Api::<Secret>::namespaced(self.kube.clone(), &name.namespace)
            .get_opt(&name.name)
            .await?;
        let version = secret.as_ref().and_then(|s| s.resource_version());
        inputs.push('/');
        inputs.push_str(version.as_deref().unwrap_or("-"));
        Ok(secret)
    }
}

/// The plan's view of a config that does not exist.
fn not_found(key: &ConfigKey) -> ProviderState {
    let message = match key.kind {
        ProviderConfigKind::ProviderConfig => format!(
            "ProviderConfig {:?} not found in namespace {}",
            key.name, key.namespace
        ),
        ProviderConfigKind::ClusterProviderConfig => {
            format!("ClusterProviderConfig {:?} not found", key.name)
        }
    };
    ProviderState::NotFound { message }
}
