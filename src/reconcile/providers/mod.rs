//! Provider configs: which Proxmox a ProxmoxVM talks to, and the one client
//! per config that all its VMs share.
//!
//! A client holds the config's limits, its login ticket and its batched
//! task observer, so it must be shared, not built per pass. It is rebuilt
//! when the config or one of its Secrets changes (their resourceVersions are
//! the cache key's version).

mod build;

pub(crate) use build::secret_value;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};

use super::error::Error;
use super::plan::ProviderState;
use crate::api::{
    ClusterProviderConfig, ProviderConfig, ProviderConfigKind, ProviderSettings, ProxmoxVM,
    provider_config::{Limits, Timing},
};
use crate::proxmox::{Client, RequestHook};

/// Identifies a provider config: kind, namespace (namespaced kind) and name.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct ConfigKey {
    /// Which kind.
    pub kind: ProviderConfigKind,
    /// Namespace of a `ProviderConfig`; empty for the cluster-scoped kind.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ConfigKey {
    /// The config a ProxmoxVM refers to.
    pub fn of(vm: &ProxmoxVM) -> Self {
        let r = &vm.spec.provider_config_ref;
        Self {
            kind: r.kind,
            namespace: match r.kind {
                ProviderConfigKind::ProviderConfig => vm.namespace().unwrap_or_default(),
                ProviderConfigKind::ClusterProviderConfig => String::new(),
            },
            name: r.name.clone(),
        }
    }
}

impl std::fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            ProviderConfigKind::ProviderConfig => {
                write!(f, "ProviderConfig {}/{}", self.namespace, self.name)
            }
            ProviderConfigKind::ClusterProviderConfig => {
                write!(f, "ClusterProviderConfig {}", self.name)
            }
        }
    }
}

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

#[derive(Debug)]
struct Cached {
    version: String,
    connection: Connection,
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

    /// Resolves the config `vm` refers to: `Ok(Ok(connection))` when usable,
    /// `Ok(Err(state))` when missing or unusable (the plan says so on the
    /// resource), `Err` when Kubernetes could not be asked.
    pub async fn connect(
        &self,
        vm: &ProxmoxVM,
    ) -> Result<Result<Connection, ProviderState>, Error> {
        let key = ConfigKey::of(vm);
        let Some((settings, config_version)) = self.read_config(&key).await? else {
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
        let secret_namespace = match key.kind {
            ProviderConfigKind::ProviderConfig => Some(key.namespace.clone()),
            ProviderConfigKind::ClusterProviderConfig => {
                settings.credentials.secret_ref.namespace.clone()
            }
        };
        let unusable = |message: String| Ok(Err(ProviderState::Unusable { message }));
        let Some(secret_namespace) = secret_namespace else {
            return unusable(format!(
                "{key}: credentials.secretRef.namespace is required"
            ));
        };
        let credentials_ref = &settings.credentials.secret_ref;
        let Some(credentials) = self
            .read_secret(&secret_namespace, &credentials_ref.name)
            .await?
        else {
            return unusable(format!(
                "{key}: the credentials Secret {secret_namespace}/{} does not exist",
                credentials_ref.name
            ));
        };
        let ca = match &settings.tls.ca_bundle_secret_ref {
            None => None,
            Some(r) => {
                let namespace = match key.kind {
                    ProviderConfigKind::ProviderConfig => key.namespace.clone(),
                    ProviderConfigKind::ClusterProviderConfig => {
                        r.namespace.clone().unwrap_or_default()
                    }
                };
                match self.read_secret(&namespace, &r.name).await? {
                    Some(secret) => Some((secret, r.key.clone())),
                    None => {
                        return unusable(format!(
                            "{key}: the CA bundle Secret {namespace}/{} does not exist",
                            r.name
                        ));
                    }
                }
            }
        };
        let version = format!(
            "{config_version}/{}/{}",
            credentials.resource_version().unwrap_or_default(),
            ca.as_ref()
                .and_then(|(s, _)| s.resource_version())
                .unwrap_or_default()
        );
        if let Some(cached) = self.cached(&key, &version) {
            return Ok(Ok(cached));
        }
        let mut timing = match settings.timing() {
            Ok(timing) => timing,
            Err(e) => return unusable(format!("{key}: {e}")),
        };
        if settings.resync_interval == DEFAULT_RESYNC {
            timing.resync_interval = self.default_resync;
        }
        let config = build::client_config(
            &settings,
            &credentials,
            ca.as_ref().map(|(s, k)| (s, k.as_str())),
            &timing,
            self.hook.clone(),
        );
        let client = match config.and_then(|c| Client::new(c).map_err(|e| e.to_string())) {
            Ok(client) => client,
            Err(message) => return unusable(format!("{key}: {message}")),
        };
        tracing::info!(config = %key, endpoint = %settings.endpoint, "built a Proxmox client");
        let connection = Connection {
            key: key.clone(),
            client,
            timing,
            limits: settings.limits.clone(),
        };
        self.cache.lock().expect("provider cache poisoned").insert(
            key,
            Cached {
                version,
                connection: connection.clone(),
            },
        );
        Ok(Ok(connection))
    }

    fn cached(&self, key: &ConfigKey, version: &str) -> Option<Connection> {
        let cache = self.cache.lock().expect("provider cache poisoned");
        cache
            .get(key)
            .filter(|c| c.version == version)
            .map(|c| c.connection.clone())
    }

    /// The config's settings and version (uid and resourceVersion).
    async fn read_config(
        &self,
        key: &ConfigKey,
    ) -> Result<Option<(ProviderSettings, String)>, Error> {
        let version = |meta: &kube::api::ObjectMeta| {
            format!(
                "{}@{}",
                meta.uid.as_deref().unwrap_or_default(),
                meta.resource_version.as_deref().unwrap_or_default()
            )
        };
        Ok(match key.kind {
            ProviderConfigKind::ProviderConfig => {
                Api::<ProviderConfig>::namespaced(self.kube.clone(), &key.namespace)
                    .get_opt(&key.name)
                    .await?
                    .map(|c| (c.spec.settings, version(&c.metadata)))
            }
            ProviderConfigKind::ClusterProviderConfig => {
                Api::<ClusterProviderConfig>::all(self.kube.clone())
                    .get_opt(&key.name)
                    .await?
                    .map(|c| (c.spec.settings, version(&c.metadata)))
            }
        })
    }

    async fn read_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>, Error> {
        Ok(Api::<Secret>::namespaced(self.kube.clone(), namespace)
            .get_opt(name)
            .await?)
    }
}
