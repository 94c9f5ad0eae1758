//! `status.atProvider`'s copy of the container's configuration, in the
//! shape of `spec.forProvider` (what an import copies into the spec).
//! Plain types of their own: a status carries no CEL.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::vm::PowerState;

/// The configuration Proxmox shows, under the names of `spec.forProvider`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerObserved {
    /// Host name (`hostname`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// CPU cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<ObservedContainerCpu>,
    /// Memory, as a quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Swap, as a quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<String>,
    /// The root filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<ObservedRootFs>,
    /// Network interfaces, by slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<ObservedContainerNetwork>,
    /// Whether root is mapped to an unprivileged host user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unprivileged: Option<bool>,
    /// Features the provider manages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<ObservedFeatures>,
    /// Start at the node's boot (`onboot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_on_boot: Option<bool>,
    /// Whether the container runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<PowerState>,
    /// Proxmox tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The notes, without the provider's owner marker line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// DNS settings (`nameserver`, `searchdomain`), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<ObservedContainerDns>,
    /// Mount points (`mpN`), by slot; a bind mount shows no storage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_points: Vec<ObservedMountPoint>,
}

/// DNS as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedContainerDns {
    /// Name server addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// DNS search domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_domain: Option<String>,
}

/// A mount point as observed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedMountPoint {
    /// `mp0` ...
    pub slot: String,
    /// Storage holding it (none for a bind mount of a host path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Size, as a quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Path inside the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// CPU as observed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedContainerCpu {
    /// Cores.
    pub cores: u32,
}

/// The root filesystem as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedRootFs {
    /// Storage holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Size, as a quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
}

/// A network interface as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedContainerNetwork {
    /// `net0` ...
    pub slot: String,
    /// Interface name inside the container.
    pub name: String,
    /// Bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
    /// VLAN tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// IPv4 (`dhcp` or an address with prefix length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// IPv4 gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// IPv6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip6: Option<String>,
    /// Proxmox firewall on this interface.
    pub firewall: bool,
}

/// Features as observed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedFeatures {
    /// Nested containers.
    pub nesting: bool,
    /// keyctl().
    pub keyctl: bool,
    /// FUSE.
    pub fuse: bool,
}
