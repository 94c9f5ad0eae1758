//! How the controller runs: what `proxmox-provider run` takes from its flags
//! and environment, as plain data so tests can start the controller
//! in-process.

use std::net::SocketAddr;
use std::time::Duration;

/// The field manager of every write the controller makes (status,
/// connection Secrets), so `kubectl get --show-managed-fields` names us.
pub const FIELD_MANAGER: &str = "crossplane-provider-proxmox";

/// The component named in events and in the labels of connection Secrets.
pub const COMPONENT: &str = "crossplane-provider-proxmox";

/// The prefix of the Leases of leader election (one per provider config,
/// one per replica: see `runtime::shards`).
pub const LEASE_NAME: &str = "crossplane-provider-proxmox";

/// Controller settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How often a VM that is up to date is compared with Proxmox again,
    /// for provider configs that leave `resyncInterval` at its default
    /// (`1m`); a config that sets another value wins, and the
    /// `crossplane.io/poll-interval` annotation wins over both.
    pub poll_interval: Duration,
    /// ProxmoxVMs reconciled at once (one VM's passes never overlap).
    pub max_concurrent_reconciles: u16,
    /// Where `/metrics`, `/healthz` and `/readyz` are served; `None`: not
    /// served (tests).
    pub metrics_addr: Option<SocketAddr>,
    /// Leader election, one Lease per provider config; `None`: this process
    /// reconciles every config unconditionally.
    pub leader_election: Option<LeaderElection>,
    /// Who we are in events (`reportingInstance`) and in the Lease.
    pub identity: String,
    /// Reconcile only the ProxmoxVMs of this namespace, and watch, read and
    /// write only its ProviderConfigs, Secrets, ConfigMaps and Events;
    /// `None`: all namespaces. The Leases stay in the leader election's
    /// namespace, labelled with this one (see `shards::leases`).
    pub namespace: Option<String>,
    /// Serve ClusterProviderConfigs: watch them (cluster-wide) and let
    /// ProxmoxVMs use them. With [`Self::namespace`] only those whose
    /// credentials Secret lives in that namespace get their status
    /// written, so tests run one controller per namespace side by side.
    /// `false` with a namespace is the namespaced mode
    /// (`proxmox-provider run --watch-namespace`): nothing cluster-scoped
    /// is read or written, so a Role in the namespace is all the RBAC it
    /// needs; a ProxmoxVM naming a ClusterProviderConfig is told that only
    /// the namespace's ProviderConfigs are served, and nothing is created.
    pub cluster_configs: bool,
}

impl Settings {
    /// The namespace of the namespaced mode: the one namespace served,
    /// without ClusterProviderConfigs.
    pub fn namespaced(&self) -> Option<&str> {
        self.namespace.as_deref().filter(|_| !self.cluster_configs)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(60),
            max_concurrent_reconciles: 10,
            metrics_addr: None,
            leader_election: None,
            identity: COMPONENT.to_owned(),
            namespace: None,
            cluster_configs: true,
        }
    }
}

/// Where the leader election Leases live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElection {
    /// Namespace of the Leases (the provider's own, `POD_NAMESPACE`).
    pub namespace: String,
}

impl LeaderElection {
    /// The provider's Leases in `namespace`.
    pub fn in_namespace(namespace: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
        }
    }
}
