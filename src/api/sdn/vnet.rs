//! `ProxmoxVNet`: an SDN VNet in a zone, with its subnets inline.
//!
//! Subnets are children of a VNet in the Proxmox API
//! (`/cluster/sdn/vnets/{vnet}/subnets`), are created by their CIDR and
//! cannot outlive it (PVE refuses to delete a VNet with subnets), so they
//! are part of the VNet's spec rather than a kind of their own: one
//! resource, one owner, no ordering between two kinds on delete.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApplyState;
use crate::api::managed::{ManagedSpec, ManagedStatus};
use crate::api::meta::ProviderConfigReference;

/// An IP address (v4 or v6), loosely: Proxmox checks it exactly.
const IP: &str = "self.matches('^([0-9]{1,3}[.]){3}[0-9]{1,3}$') || self.matches('^[0-9a-fA-F:]*:[0-9a-fA-F:.]*$')";
const IP_MESSAGE: &str = "must be an IPv4 or IPv6 address";

/// A VNet of a Proxmox SDN zone: a bridge of the same name on every node
/// of the zone, which a guest's NIC names as its `bridge`.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxVNet",
    plural = "proxmoxvnets",
    singular = "proxmoxvnet",
    namespaced,
    status = "ProxmoxVNetStatus",
    derive = "PartialEq",
    shortname = "pvnet",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A Proxmox VE SDN VNet and its subnets managed by crossplane-provider-proxmox.",
    printcolumn(name = "VNET", type_ = "string", json_path = ".status.atProvider.id"),
    printcolumn(name = "ZONE", type_ = "string", json_path = ".status.atProvider.zone"),
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
pub struct ProxmoxVNetSpec {
    /// The VNet as it should be on Proxmox.
    pub for_provider: VNetParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// A VNet's zone, options and subnets.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(has(self.vlanAware) && self.vlanAware) || !has(self.subnets) || size(self.subnets) == 0")
        .message("a VLAN-aware VNet cannot have subnets")
)]
pub struct VNetParameters {
    /// The ProxmoxSDNZone (of this namespace) the VNet is in.
    pub zone_ref: ZoneReference,

    /// The VLAN tag (vlan and qinq zones: 1-4094, required in a vlan
    /// zone) or VXLAN VNI (vxlan zones, required); none in a simple zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 16_777_215))]
    pub tag: Option<u32>,

    /// Whether guests may send their own VLAN tags through it (no
    /// subnets then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_aware: Option<bool>,

    /// A name for people, shown beside the VNet's ID in Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    #[x_kube(validation = Rule::new("self.matches('^[-()_. a-zA-Z0-9]*$')")
        .message("alias may hold only letters, digits, spaces and ( ) - _ ."))]
    pub alias: Option<String>,

    /// The subnets, by CIDR. Proxmox holds exactly these: a subnet added
    /// or changed on Proxmox is put back, one not listed is deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(
        merge_strategy = ListMerge::Map(vec!["cidr".into()]),
        validation = Rule::new("self.all(s, self.exists_one(o, o.cidr == s.cidr))")
            .message("each subnet's cidr must be unique")
    )]
    pub subnets: Vec<Subnet>,
}

/// A ProxmoxSDNZone of the VNet's namespace, by name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ZoneReference {
    /// The ProxmoxSDNZone's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// One subnet of a VNet.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    /// The network, e.g. `10.0.0.0/24` or `fd00:1::/64`. Cannot be changed
    /// in place: a new CIDR is a new subnet (and the old one goes).
    #[schemars(length(max = 43))]
    #[x_kube(validation = Rule::new("self.matches('^([0-9]{1,3}[.]){3}[0-9]{1,3}/([0-9]|[12][0-9]|3[0-2])$') || self.matches('^[0-9a-fA-F:]*:[0-9a-fA-F:]*/([0-9]|[1-9][0-9]|1[01][0-9]|12[0-8])$')")
        .message("cidr must be a network such as 10.0.0.0/24 or fd00:1::/64"))]
    pub cidr: String,

    /// The gateway address, inside the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 45))]
    #[x_kube(validation = Rule::new(IP).message(IP_MESSAGE))]
    pub gateway: Option<String>,

    /// Masquerade the subnet's traffic leaving the node (simple zones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snat: Option<bool>,

    /// Address ranges the zone's DHCP hands out (the zone needs `dhcp`
    /// and an IPAM).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub dhcp_ranges: Vec<DhcpRange>,
}

/// A DHCP range, both ends inside the subnet.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DhcpRange {
    /// The first address handed out.
    #[schemars(length(max = 45))]
    #[x_kube(validation = Rule::new(IP).message(IP_MESSAGE))]
    pub start: String,
    /// The last address handed out.
    #[schemars(length(max = 45))]
    #[x_kube(validation = Rule::new(IP).message(IP_MESSAGE))]
    pub end: String,
}

/// Observed state of a ProxmoxVNet.
pub type ProxmoxVNetStatus = ManagedStatus<VNetAtProvider>;

/// The VNet on Proxmox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VNetAtProvider {
    /// The VNet's Proxmox ID: the bridge a guest's NIC names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its zone's Proxmox ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// How many subnets it has on Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<u32>,
    /// Whether its last change is applied; absent while it is not on
    /// Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ApplyState>,
    /// The UPID of the apply task that is running, or that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_task: Option<String>,
}

impl crate::api::meta::ConfigUser for ProxmoxVNet {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}
