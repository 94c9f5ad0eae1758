//! Provider configs: which Proxmox a ProxmoxVM talks to, and the one client
//! per config that all its VMs share.
//!
//! A client holds the config's limits, its login ticket and its batched
//! task observer, so it must be shared, not built per pass. It is rebuilt
//! when the config's spec (its generation) or one of its Secrets (their
//! resourceVersions) changes. The VM passes and the provider config
//! reconciler ([`super::configs`]) share it.

mod build;
mod key;

pub(crate) use build::secret_value;
pub use build::set_task_observe_mode;
pub use key::{ConfigKey, SecretName};

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use kube::{Api, ResourceExt};

use super::error::Error;
use super::plan::ProviderState;
use crate::api::{
    ClusterProviderConfig, ProviderConfig, ProviderConfigKind, ProviderSettings, ProxmoxVM,
    provider_config::{ConfigReason, Limits, Timing},
};
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
}

impl Connection {
    /// The plan's view of it.
    pub fn state(&self) -> ProviderState {
        ProviderState::Ready {
            timing: self.timing,
            limits: self.limits.clone(),
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
    connection: Connection,
}

/// A config's version: uid and generation (its status changes do not make
/// a new client).
fn config_version(meta: &ObjectMeta) -> String {
    format!(
        "{}@{}",
        meta.uid.as_deref().unwrap_or_default(),
        meta.generation.unwrap_or_default()
    )
}

/// One client per provider config, rebuilt when the config changes.
pub struct Providers {
    kube: kube::Client,
    hook: RequestHook,
    default_resync: Duration,
    cache: Mutex<HashMap<ConfigKey, Cached>>,
}

/// The schema default of `resyncInterval`: a config with it defers to the
/// controller's `--poll-interval`.
const DEFAULT_RESYNC: &str = "1m";

impl Providers {
    /// An empty cache; `hook` counts every client's requests.
    pub fn new(kube: kube::Client, hook: RequestHook, default_resync: Duration) -> Self {
        Self {
            kube,
            hook,
            default_resync,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The resync interval of configs that cannot be resolved (and of
    /// those that keep the default).
    pub fn default_resync(&self) -> Duration {
        self.default_resync
    }

    /// Resolves the config `vm` refers to: `Ok(Ok(connection))` when usable,
    /// `Ok(Err(state))` when missing or unusable (the plan says so on the
    /// resource), `Err` when Kubernetes could not be asked.
    pub async fn connect(
        &self,
        vm: &ProxmoxVM,
    ) -> Result<Result<Connection, ProviderState>, Error> {
        let key = ConfigKey::of(vm);
        let Some(resolved) = self.resolve(&key).await? else {
            let message = match key.kind {
                ProviderConfigKind::ProviderConfig => format!(
                    "ProviderConfig {:?} not found in namespace {}",
                    key.name, key.namespace
                ),
                ProviderConfigKind::ClusterProviderConfig => {
                    format!("ClusterProviderConfig {:?} not found", key.name)
                }
            };
            return Ok(Err(ProviderState::NotFound { message }));
        };
        Ok(resolved.connection.map_err(|p| ProviderState::Unusable {
            message: format!("{key}: {}", p.message),
        }))
    }

    /// Reads the config `key` and resolves it ([`Providers::resolve_config`]).
    /// `Ok(None)`: the config does not exist; `Err`: Kubernetes could not
    /// be asked.
    pub async fn resolve(&self, key: &ConfigKey) -> Result<Option<Resolved>, Error> {
        let Some((settings, meta)) = self.read_config(key).await? else {
            return Ok(None);
        };
        self.resolve_config(key, &settings, &meta).await.map(Some)
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
        let mut inputs = config_version(meta);
        let connection = self.connection(key, settings, &mut inputs).await?;
        if let Ok(connection) = &connection {
            self.cache.lock().expect("provider cache poisoned").insert(
                key.clone(),
                Cached {
                    inputs: inputs.clone(),
                    connection: connection.clone(),
                },
            );
        }
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
        }))
    }

    fn cached(&self, key: &ConfigKey, inputs: &str) -> Option<Connection> {
        let cache = self.cache.lock().expect("provider cache poisoned");
        cache
            .get(key)
            .filter(|c| c.inputs == inputs)
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
