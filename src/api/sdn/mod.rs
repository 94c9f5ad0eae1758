//! SDN kinds: `ProxmoxSDNZone` and `ProxmoxVNet` (with its subnets).
//!
//! Namespaced in Kubernetes, cluster-wide on Proxmox, where zone and VNet
//! IDs are at most 8 characters (`[a-zA-Z][a-zA-Z0-9]*[a-zA-Z0-9]`). The
//! provider derives each ID from a hash of the resource's namespace and
//! name (`z` or `v` and 7 hex digits, shown as `status.atProvider.id`), so
//! two teams' zones or VNets never share one; a user-given ID could not be
//! proven ours on Proxmox, since zones carry no comment to hold an owner
//! marker. A VNet names its zone by the ProxmoxSDNZone's Kubernetes name,
//! in its own namespace only.
//!
//! A change is *pending* on Proxmox until the SDN configuration is applied
//! cluster-wide (`PUT /cluster/sdn`, a task that reloads every node's
//! network); the provider applies each provider config's pending changes
//! in one batch, and `status.atProvider.state` says where each object is.

pub mod vnet;
pub mod zone;

#[cfg(test)]
mod tests;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use vnet::{
    DhcpRange, ProxmoxVNet, ProxmoxVNetSpec, ProxmoxVNetStatus, Subnet, VNetAtProvider,
    VNetParameters, ZoneReference,
};
pub use zone::{
    ProxmoxSDNZone, ProxmoxSDNZoneSpec, ProxmoxSDNZoneStatus, SdnZoneParameters, VlanProtocol,
    ZoneAtProvider, ZoneType,
};

/// Where an SDN object's last change stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ApplyState {
    /// Written to Proxmox's pending SDN configuration, not applied yet.
    Pending,
    /// Committed; the apply task that reloads the nodes' networks runs.
    Applying,
    /// Running as written.
    Applied,
    /// Committed, but the apply task failed (see `applyTask` and the
    /// Ready condition); the next change is applied again.
    ApplyFailed,
}
