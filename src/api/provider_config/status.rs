//! What the controller reports on a provider config: whether it works
//! (`Ready`), which Proxmox VE version answered, and how many ProxmoxVMs
//! use it.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::condition::Condition;

/// Observed state of a provider config.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions. `Ready` is True when the config, its Secrets and its TLS
    /// settings are usable and Proxmox answered an authenticated
    /// `GET /version`; otherwise its reason says what is wrong.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// Number of ProxmoxVMs using this config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<i64>,
    /// The Proxmox VE version that answered (e.g. `9.1.1`), while Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub version: Option<String>,
    /// The provider replica holding this config's Lease, which reconciles
    /// its ProxmoxVMs and writes this status; absent when the provider runs
    /// without leader election.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub holder: Option<String>,
}

/// Reasons of a provider config's `Ready` condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigReason {
    /// Ready=True: Proxmox answered with these credentials.
    Available,
    /// The credentials (or CA bundle) Secret does not exist.
    SecretNotFound,
    /// The credentials Secret lacks the keys, or they are malformed.
    InvalidCredentials,
    /// A setting cannot be used (endpoint, a duration).
    InvalidConfig,
    /// The TLS settings are unusable, or the server's certificate was
    /// refused (the message shows its fingerprint when pinning).
    TlsError,
    /// Proxmox refused the credentials (401/403).
    Unauthorized,
    /// Proxmox did not answer (connection refused, timeout, proxy error).
    Unreachable,
    /// Proxmox answered with another error.
    ProxmoxError,
    /// The config was deleted and stays while ProxmoxVMs use it (the
    /// message names them).
    Deleting,
    /// Warning=True: the config sends credentials unencrypted
    /// (`tls.insecureAllowPlainHTTP` with an `http://` endpoint) or accepts
    /// any certificate (`tls.insecureSkipTLSVerify`).
    InsecureTransport,
}

impl ConfigReason {
    /// The `reason` string written to the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "Available",
            Self::SecretNotFound => "SecretNotFound",
            Self::InvalidCredentials => "InvalidCredentials",
            Self::InvalidConfig => "InvalidConfig",
            Self::TlsError => "TlsError",
            Self::Unauthorized => "Unauthorized",
            Self::Unreachable => "Unreachable",
            Self::ProxmoxError => "ProxmoxError",
            Self::Deleting => "Deleting",
            Self::InsecureTransport => "InsecureTransport",
        }
    }
}

impl std::fmt::Display for ConfigReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
