//! Naming provider configs and the Secrets they read.

use kube::ResourceExt;

use crate::api::meta::ConfigUser;
use crate::api::{ClusterProviderConfig, ProviderConfig, ProviderConfigKind, ProviderSettings};

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
    /// The config a ProxmoxVM, ProxmoxImage or ProxmoxContainer refers to.
    pub fn of(user: &impl ConfigUser) -> Self {
        let r = user.provider_config_ref();
        Self {
            kind: r.kind,
            namespace: match r.kind {
                ProviderConfigKind::ProviderConfig => {
                    user.meta().namespace.clone().unwrap_or_default()
                }
                ProviderConfigKind::ClusterProviderConfig => String::new(),
            },
            name: r.name.clone(),
        }
    }

    /// A namespaced `ProviderConfig`'s key.
    pub fn provider_config(pc: &ProviderConfig) -> Self {
        Self {
            kind: ProviderConfigKind::ProviderConfig,
            namespace: pc.namespace().unwrap_or_default(),
            name: pc.name_any(),
        }
    }

    /// A `ClusterProviderConfig`'s key.
    pub fn cluster_provider_config(pc: &ClusterProviderConfig) -> Self {
        Self {
            kind: ProviderConfigKind::ClusterProviderConfig,
            namespace: String::new(),
            name: pc.name_any(),
        }
    }

    /// The namespace a Secret reference of this config points into: a
    /// ProviderConfig's own (the API server refuses another), the one a
    /// ClusterProviderConfig names (required there).
    fn secret_namespace(&self, named: Option<&str>) -> Option<String> {
        match self.kind {
            ProviderConfigKind::ProviderConfig => Some(self.namespace.clone()),
            ProviderConfigKind::ClusterProviderConfig => named.map(str::to_owned),
        }
    }

    /// The credentials Secret of a config with these settings; `None` when
    /// a ClusterProviderConfig leaves out its namespace.
    pub fn credentials_secret(&self, settings: &ProviderSettings) -> Option<SecretName> {
        let r = &settings.credentials.secret_ref;
        Some(SecretName {
            namespace: self.secret_namespace(r.namespace.as_deref())?,
            name: r.name.clone(),
        })
    }

    /// The CA bundle Secret and its key, when the config names one.
    pub fn ca_secret(&self, settings: &ProviderSettings) -> Option<(SecretName, String)> {
        let r = settings.tls.ca_bundle_secret_ref.as_ref()?;
        let name = SecretName {
            namespace: self.secret_namespace(r.namespace.as_deref())?,
            name: r.name.clone(),
        };
        Some((name, r.key.clone()))
    }

    /// Whether a config with these settings reads the Secret `name`.
    pub fn reads(&self, settings: &ProviderSettings, name: &SecretName) -> bool {
        self.credentials_secret(settings).as_ref() == Some(name)
            || self.ca_secret(settings).is_some_and(|(ca, _)| &ca == name)
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

/// A Secret's namespace and name.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct SecretName {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for SecretName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(secret_ns: Option<&str>, ca: Option<(&str, Option<&str>)>) -> ProviderSettings {
        let mut v = serde_json::json!({
            "endpoint": "https://pve.example:8006",
            "credentials": {"secretRef": {"name": "creds"}},
        });
        if let Some(ns) = secret_ns {
            v["credentials"]["secretRef"]["namespace"] = ns.into();
        }
        if let Some((name, ns)) = ca {
            v["tls"] = serde_json::json!({"caBundleSecretRef": {"name": name}});
            if let Some(ns) = ns {
                v["tls"]["caBundleSecretRef"]["namespace"] = ns.into();
            }
        }
        serde_json::from_value(v).unwrap()
    }

    fn secret(ns: &str, name: &str) -> SecretName {
        SecretName {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_provider_config_reads_its_own_namespace() {
        let key = ConfigKey {
            kind: ProviderConfigKind::ProviderConfig,
            namespace: "team".into(),
            name: "pve".into(),
        };
        let s = settings(None, Some(("ca", None)));
        assert_eq!(key.credentials_secret(&s), Some(secret("team", "creds")));
        assert_eq!(
            key.ca_secret(&s),
            Some((secret("team", "ca"), "ca.crt".into()))
        );
        assert!(key.reads(&s, &secret("team", "ca")));
        assert!(!key.reads(&s, &secret("other", "creds")));
    }

    #[test]
    fn a_cluster_provider_config_reads_the_namespaces_it_names() {
        let key = ConfigKey {
            kind: ProviderConfigKind::ClusterProviderConfig,
            namespace: String::new(),
            name: "default".into(),
        };
        let s = settings(Some("system"), Some(("ca", Some("certs"))));
        assert!(key.reads(&s, &secret("system", "creds")));
        assert!(key.reads(&s, &secret("certs", "ca")));
        assert!(!key.reads(&s, &secret("certs", "creds")));
        assert_eq!(key.credentials_secret(&settings(None, None)), None);
    }
}
