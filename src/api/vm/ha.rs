//! `spec.forProvider.ha`: the VM as a Proxmox HA resource.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// High availability: Proxmox's HA manager keeps the VM in `state`,
/// restarts it elsewhere when its node fails, and its load balancer (PVE
/// 9.2) may move it between nodes; the provider follows it wherever it
/// goes. Needs `Sys.Console` on `/`. Removing `ha` leaves the HA resource
/// as it is; deleting the ProxmoxVM removes it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HighAvailability {
    /// The state the HA manager keeps the VM in: `started` (the default;
    /// needs `powerState: Running`), `stopped` (needs `powerState:
    /// Stopped`) or `ignored` (registered, but left alone).
    #[serde(default)]
    pub state: HaState,

    /// Keep the VM on `allowedNodes` (or on `node` when `allowedNodes` is
    /// empty): a node-affinity rule on PVE 9, an HA group on PVE 8, named
    /// `crossplane-vm-<VMID>`, updated when the nodes change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinity>,
}

/// Requested HA states.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HaState {
    /// Keep it running (restarted or moved when its node fails).
    #[default]
    Started,
    /// Keep it stopped.
    Stopped,
    /// Managed by HA, but HA neither starts, stops nor moves it.
    Ignored,
}

impl HaState {
    /// Proxmox's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Stopped => "stopped",
            Self::Ignored => "ignored",
        }
    }
}

/// How strictly the VM stays on its nodes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinity {
    /// `true`: the VM runs only on these nodes (stopped if none is up);
    /// `false` (default): it prefers them.
    #[serde(default)]
    pub strict: bool,
}
