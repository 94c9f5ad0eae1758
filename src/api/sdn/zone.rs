//! `ProxmoxSDNZone`: an SDN zone (simple, VLAN, QinQ or VXLAN).

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApplyState;
use crate::api::managed::{ManagedSpec, ManagedStatus};
use crate::api::meta::ProviderConfigReference;
use crate::api::rules::{BRIDGE, BRIDGE_MESSAGE, NODE_NAME_MESSAGE, NODE_NAMES};

/// An SDN zone of the Proxmox cluster: where VNets live and how their
/// traffic is separated.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxSDNZone",
    plural = "proxmoxsdnzones",
    singular = "proxmoxsdnzone",
    namespaced,
    status = "ProxmoxSDNZoneStatus",
    derive = "PartialEq",
    shortname = "psdnzone",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A Proxmox VE SDN zone managed by crossplane-provider-proxmox.",
    printcolumn(name = "ZONE", type_ = "string", json_path = ".status.atProvider.id"),
    printcolumn(name = "TYPE", type_ = "string", json_path = ".spec.forProvider.type"),
    printcolumn(
        name = "STATE",
        type_ = "string",
        json_path = ".status.atProvider.state"
    ),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "SYNCED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].status"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "REASON",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].reason",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxSDNZoneSpec {
    /// The zone as it should be on Proxmox.
    pub for_provider: SdnZoneParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// A zone's type and options. Options the spec leaves out are left as
/// Proxmox has them.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(self.type in ['vlan', 'qinq']) || has(self.bridge)")
        .message("bridge is required for vlan and qinq zones"),
    validation = Rule::new("self.type in ['vlan', 'qinq'] || !has(self.bridge)")
        .message("bridge is only for vlan and qinq zones"),
    validation = Rule::new("(self.type == 'qinq') == has(self.tag)")
        .message("tag (the service VLAN) is required for qinq zones and only for them"),
    validation = Rule::new("self.type == 'qinq' || !has(self.vlanProtocol)")
        .message("vlanProtocol is only for qinq zones"),
    validation = Rule::new("(self.type == 'vxlan') == (has(self.peers) && size(self.peers) > 0)")
        .message("peers are required for vxlan zones and only for them"),
    validation = Rule::new("self.type == 'simple' || !has(self.dhcp)")
        .message("dhcp is only for simple zones")
)]
pub struct SdnZoneParameters {
    /// The zone type: `simple` (an isolated bridge per VNet, routed by the
    /// node), `vlan` (VNets as VLANs on `bridge`), `qinq` (stacked VLANs:
    /// `tag` outside, each VNet's tag inside) or `vxlan` (a layer-2
    /// overlay between `peers`). EVPN and faucet are not supported. Cannot
    /// be changed.
    #[serde(rename = "type")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("type cannot be changed"))]
    pub zone_type: ZoneType,

    /// The node bridge the VLANs go on (vlan and qinq), e.g. `vmbr0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 15))]
    #[x_kube(validation = Rule::new(BRIDGE).message(BRIDGE_MESSAGE))]
    pub bridge: Option<String>,

    /// The service VLAN (qinq only), 1-4094.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub tag: Option<u16>,

    /// The outer VLAN protocol (qinq only); Proxmox's default is 802.1q.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_protocol: Option<VlanProtocol>,

    /// The VXLAN peers (vxlan only): the nodes' IP addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(max = 45)))]
    #[x_kube(validation = Rule::new("self.all(p, p.matches('^[0-9a-fA-F:.]+$'))")
        .message("peers must be IP addresses"))]
    pub peers: Option<Vec<String>>,

    /// The MTU of the VNets' bridges (VXLAN needs 50 bytes less than the
    /// physical network's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 576, max = 65520))]
    pub mtu: Option<u32>,

    /// The nodes the zone is on; left out: every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    #[x_kube(validation = Rule::new(NODE_NAMES).message(NODE_NAME_MESSAGE))]
    pub nodes: Option<Vec<String>>,

    /// The IPAM that tracks the subnets' addresses (`pve`, the built-in
    /// one, or another configured on Proxmox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[a-zA-Z][a-zA-Z0-9_-]*$')")
        .message("ipam must be an IPAM ID such as pve"))]
    pub ipam: Option<String>,

    /// DHCP for the subnets' `dhcpRanges` (simple zones only; needs an
    /// IPAM and dnsmasq on the nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<Dhcp>,
}

/// The supported zone types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ZoneType {
    Simple,
    Vlan,
    Qinq,
    Vxlan,
}

impl ZoneType {
    /// As Proxmox names it.
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneType::Simple => "simple",
            ZoneType::Vlan => "vlan",
            ZoneType::Qinq => "qinq",
            ZoneType::Vxlan => "vxlan",
        }
    }
}

/// A QinQ zone's outer VLAN protocol.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VlanProtocol {
    #[serde(rename = "802.1q")]
    Dot1q,
    #[serde(rename = "802.1ad")]
    Dot1ad,
}

impl VlanProtocol {
    /// As Proxmox names it.
    pub fn as_str(self) -> &'static str {
        match self {
            VlanProtocol::Dot1q => "802.1q",
            VlanProtocol::Dot1ad => "802.1ad",
        }
    }
}

/// The DHCP backend.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Dhcp {
    Dnsmasq,
}

/// Observed state of a ProxmoxSDNZone.
pub type ProxmoxSDNZoneStatus = ManagedStatus<ZoneAtProvider>;

/// The zone on Proxmox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZoneAtProvider {
    /// The zone's Proxmox ID (derived from the namespace and name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Whether its last change is applied; absent while it is not on
    /// Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ApplyState>,
    /// The UPID of the apply task that is running, or that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_task: Option<String>,
}

impl crate::api::meta::ConfigUser for ProxmoxSDNZone {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}
