//! `ProxmoxIPSet`: a cluster firewall IP set of static entries.
//!
//! Namespaced in Kubernetes, cluster-wide on Proxmox: its Proxmox name is
//! derived from this resource's name and a hash of its namespace and name
//! (`status.atProvider.name`), so two teams' sets never share one. Security
//! groups name it by its Kubernetes name (`ipSet`), in its namespace only.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::managed::{ManagedSpec, ManagedStatus};
use crate::api::meta::ProviderConfigReference;
use crate::api::rules::{NO_CONTROL, NO_CONTROL_MESSAGE};

/// An IP set of the Proxmox cluster firewall.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxIPSet",
    plural = "proxmoxipsets",
    singular = "proxmoxipset",
    namespaced,
    status = "ProxmoxIPSetStatus",
    derive = "PartialEq",
    shortname = "pipset",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A Proxmox VE cluster firewall IP set managed by crossplane-provider-proxmox.",
    printcolumn(
        name = "IPSET",
        type_ = "string",
        json_path = ".status.atProvider.name"
    ),
    printcolumn(
        name = "ENTRIES",
        type_ = "integer",
        json_path = ".status.atProvider.entries"
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
pub struct ProxmoxIPSetSpec {
    /// The set as it should be on Proxmox.
    pub for_provider: IPSetParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// The set's comment and entries.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct IPSetParameters {
    /// A note shown beside the set on Proxmox (one line), after the
    /// provider's owner marker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[x_kube(validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE))]
    pub comment: Option<String>,

    /// The entries. Proxmox holds exactly these: an entry added, changed
    /// or deleted on Proxmox is put back. Proxmox stores a network with
    /// its host bits cleared and an address without `/32` (`/128`); two
    /// entries that are the same once stored so are refused.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["cidr".into()]))]
    pub cidrs: Vec<IPSetEntry>,

    /// Members from the ProxmoxVMs and ProxmoxContainers of this namespace
    /// whose labels match: their addresses (a VM's guest-agent addresses
    /// and static cloud-init `ipConfigs`, a container's static `networks`
    /// addresses), each an entry with the guest named in its comment, kept
    /// in step as guests come, go and change address (a VM's change wakes
    /// the set; a container's is seen at the provider config's resync). No
    /// match: no members, not an error. Beside `cidrs`, which stay as
    /// written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<GuestSelector>,
}

/// Which guests of the namespace an IP set holds.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct GuestSelector {
    /// Labels a guest must all have, with these values (`{}` selects
    /// every guest of the namespace).
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub match_labels: std::collections::BTreeMap<String, String>,
}

/// One entry of an IP set.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct IPSetEntry {
    /// An IP address or CIDR network, e.g. `10.0.0.0/24` or `fd00::5`. A
    /// zero prefix (`/0`) is refused, as Proxmox does.
    #[schemars(length(min = 2, max = 64))]
    #[x_kube(
        validation = Rule::new("isIP(self) || isCIDR(self)")
            .message("cidr must be an IP address or a CIDR network such as 10.0.0.0/24"),
        validation = Rule::new("!isCIDR(self) || cidr(self).prefixLength() > 0")
            .message("cidr: a zero prefix is not allowed in IP set entries")
    )]
    pub cidr: String,

    /// Exclude this address or network from the set (ipset `nomatch`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nomatch: bool,

    /// A note on the entry (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[x_kube(validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE))]
    pub comment: Option<String>,
}

/// Observed state of a ProxmoxIPSet.
pub type ProxmoxIPSetStatus = ManagedStatus<IPSetAtProvider>;

/// The set on Proxmox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPSetAtProvider {
    /// The set's Proxmox name (what a rule names as `+<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How many entries it has on Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<u32>,
    /// How many guests `selector` selects (with `selector` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<u32>,
}

impl crate::api::meta::ConfigUser for ProxmoxIPSet {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}
