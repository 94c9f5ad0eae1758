//! The managed part every kind's spec and status share, whatever the kind
//! (issue 30's `api/managed.rs`): which provider config, what the provider
//! may do, and the conditions with the generation they were computed from.
//! A kind embeds them flattened (`#[serde(flatten)]`), so the fields stay
//! where Crossplane tooling looks for them (`spec.providerConfigRef`,
//! `spec.managementPolicies`, `status.conditions`,
//! `status.observedGeneration`) and their CEL is written once.
//!
//! ProxmoxPool is the first kind on them; ProxmoxVM, ProxmoxContainer and
//! ProxmoxImage still declare their own copies (moving them changes their
//! CRDs: ProxmoxImage has no `managementPolicies` yet).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::condition::Condition;
use crate::api::meta::{ManagementPolicy, ProviderConfigReference, default_management_policies};

/// `spec.providerConfigRef` and `spec.managementPolicies`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedSpec {
    /// Which provider config (Proxmox endpoint and credentials) to use.
    /// Defaults to the ClusterProviderConfig named `default`.
    #[serde(default)]
    pub provider_config_ref: ProviderConfigReference,

    /// What the provider may do: any of Observe, Create, Update, Delete,
    /// LateInitialize, or "*" (everything, the default). Without Delete the
    /// external resource is left on Proxmox when this resource is deleted;
    /// [] pauses the resource.
    #[serde(default = "default_management_policies")]
    #[schemars(length(max = 6))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new("!self.exists(p, p == '*') || size(self) == 1")
            .message("\"*\" already allows everything and cannot be combined with other policies"),
        validation = Rule::new("size(self) == 0 || self.exists(p, p == 'Observe' || p == '*')")
            .message("managementPolicies must include Observe (the provider cannot work without reading what it manages); use [] to pause")
    )]
    pub management_policies: Vec<ManagementPolicy>,
}

impl Default for ManagedSpec {
    fn default() -> Self {
        Self {
            provider_config_ref: ProviderConfigReference::default(),
            management_policies: default_management_policies(),
        }
    }
}

/// `status.conditions` and `status.observedGeneration`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedStatus {
    /// `Ready` and `Synced` conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// The `metadata.generation` the provider last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
