//! `ProxmoxSecurityGroup`: a cluster firewall security group and its
//! ordered rules.
//!
//! Namespaced in Kubernetes, cluster-wide on Proxmox: the group's Proxmox
//! name is derived from this resource's name and a hash of its namespace
//! and name (`status.atProvider.name`), so two teams' groups never share
//! one; a rule may name an IP set only of its own namespace (by the
//! ProxmoxIPSet's Kubernetes name, resolved by the provider).

mod rule;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use rule::{
    Address, PORTS, PORTS_MESSAGE, RuleAction, RuleDirection, RuleLog, SecurityGroupRule, ip_sets,
};

use crate::api::managed::{ManagedSpec, ManagedStatus};
use crate::api::meta::ProviderConfigReference;
use crate::api::rules::{NO_CONTROL, NO_CONTROL_MESSAGE};

/// A security group of the Proxmox cluster firewall: its rules, in order.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxSecurityGroup",
    plural = "proxmoxsecuritygroups",
    singular = "proxmoxsecuritygroup",
    namespaced,
    status = "ProxmoxSecurityGroupStatus",
    derive = "PartialEq",
    shortname = "psg",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A Proxmox VE cluster firewall security group managed by crossplane-provider-proxmox.",
    printcolumn(
        name = "GROUP",
        type_ = "string",
        json_path = ".status.atProvider.name"
    ),
    printcolumn(
        name = "RULES",
        type_ = "integer",
        json_path = ".status.atProvider.rules"
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
pub struct ProxmoxSecurityGroupSpec {
    /// The group as it should be on Proxmox.
    pub for_provider: SecurityGroupParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// The group's comment and rules.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupParameters {
    /// A note shown beside the group on Proxmox (one line), after the
    /// provider's owner marker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[x_kube(validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE))]
    pub comment: Option<String>,

    /// The rules, first match first. Proxmox holds exactly these, in this
    /// order: a rule changed, added, moved or deleted on Proxmox is put
    /// back.
    #[serde(default)]
    #[schemars(length(max = 200))]
    pub rules: Vec<SecurityGroupRule>,
}

/// Observed state of a ProxmoxSecurityGroup.
pub type ProxmoxSecurityGroupStatus = ManagedStatus<SecurityGroupAtProvider>;

/// The group on Proxmox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupAtProvider {
    /// The group's Proxmox name (what a guest's firewall names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How many rules it has on Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<u32>,
}

impl crate::api::meta::ConfigUser for ProxmoxSecurityGroup {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}
