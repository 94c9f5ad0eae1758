//! Crossplane's managed-resource vocabulary: annotations, the finalizer,
//! management policies and references.
//!
//! The names are Crossplane's own (crossplane-runtime `pkg/meta`,
//! crossplane `apis/core/v2`), so tools that know Crossplane read ours.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::rules::{SECRET_NAME, SECRET_NAME_MESSAGE};

/// The external resource's identifier: for a ProxmoxVM, the VMID.
pub const EXTERNAL_NAME: &str = "crossplane.io/external-name";
/// RFC 3339 time written before a create may be sent to Proxmox.
pub const EXTERNAL_CREATE_PENDING: &str = "crossplane.io/external-create-pending";
/// RFC 3339 time written once the create task finished successfully.
pub const EXTERNAL_CREATE_SUCCEEDED: &str = "crossplane.io/external-create-succeeded";
/// RFC 3339 time written when a create failed (informational).
pub const EXTERNAL_CREATE_FAILED: &str = "crossplane.io/external-create-failed";
/// `"true"` stops all reconciliation of the resource.
pub const PAUSED: &str = "crossplane.io/paused";
/// Per-resource override of the resync interval (Go duration, e.g. `30s`).
pub const POLL_INTERVAL: &str = "crossplane.io/poll-interval";
/// `"true"` takes over the guest (VM or container) the external name names
/// although this resource did not create it: once `managementPolicies`
/// allow Update, the provider writes its owner marker into the guest's
/// notes and from then on manages it as one it created. A guest carrying
/// another resource's marker is never taken over. The provider's own key,
/// not Crossplane's: Crossplane has no such opt-in.
pub const ADOPT: &str = "proxmox.crossplane.io/adopt";
/// Finalizer held while a VM this resource created may exist on Proxmox.
pub const FINALIZER: &str = "finalizer.managedresource.crossplane.io";

/// What the provider may do with the external resource.
///
/// `["*"]` (the default) allows everything. `[]` pauses the resource.
/// `["Observe"]` only reads what the resource names (a ProxmoxVM: the VM of
/// its `crossplane.io/external-name` annotation). A set without `Delete`
/// leaves what the resource made on Proxmox when it is deleted (orphan).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ManagementPolicy {
    /// Read the VM and report it in `status.atProvider`.
    Observe,
    /// Create the VM when it does not exist.
    Create,
    /// Correct drift in declared fields and enforce the power state.
    Update,
    /// Destroy the VM when the resource is deleted.
    Delete,
    /// Accepted for Crossplane compatibility; this provider never writes
    /// observed values back into `spec.forProvider`.
    LateInitialize,
    /// All of the above.
    #[serde(rename = "*")]
    All,
}

/// The default management policies: everything.
pub fn default_management_policies() -> Vec<ManagementPolicy> {
    vec![ManagementPolicy::All]
}

/// What a set of management policies allows, once interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Create the VM when it is absent.
    pub create: bool,
    /// Change an existing VM (drift, power state).
    pub update: bool,
    /// Destroy the VM on deletion; without it, deletion orphans the VM.
    pub delete: bool,
}

/// How a list of management policies is to be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyMode {
    /// `[]`: do nothing and say so.
    Paused,
    /// Observe plus the listed capabilities.
    Active(Capabilities),
    /// A set without `Observe` (and without `*`): the provider cannot work
    /// without reading the VM.
    Invalid(String),
}

/// Interprets `spec.managementPolicies`.
pub fn policy_mode(policies: &[ManagementPolicy]) -> PolicyMode {
    use ManagementPolicy::*;
    if policies.is_empty() {
        return PolicyMode::Paused;
    }
    let has = |p| policies.contains(&All) || policies.contains(&p);
    if !has(Observe) {
        return PolicyMode::Invalid(
            "managementPolicies must include Observe (or be [\"*\"]); an empty list pauses".into(),
        );
    }
    PolicyMode::Active(Capabilities {
        create: has(Create),
        update: has(Update),
        delete: has(Delete),
    })
}

/// The kind of provider config a resource refers to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ProviderConfigKind {
    /// A namespaced `ProviderConfig` in the resource's own namespace.
    ProviderConfig,
    /// A cluster-scoped `ClusterProviderConfig`.
    ClusterProviderConfig,
}

/// Which provider config (Proxmox endpoint and credentials) manages this VM.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ProviderConfigReference {
    /// `ProviderConfig` (namespaced, looked up in the resource's namespace)
    /// or `ClusterProviderConfig`.
    pub kind: ProviderConfigKind,
    /// Name of the provider config.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

impl Default for ProviderConfigReference {
    fn default() -> Self {
        Self {
            kind: ProviderConfigKind::ClusterProviderConfig,
            name: "default".into(),
        }
    }
}

/// A managed resource that names a provider config (a ProxmoxVM, a
/// ProxmoxContainer): what the provider config's users, keys and in-use
/// guard need of it.
pub trait ConfigUser {
    /// The provider config it names.
    fn provider_config_ref(&self) -> &ProviderConfigReference;
    /// Its metadata.
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    /// The VMID recorded in its `crossplane.io/external-name` annotation, raw.
    fn external_name(&self) -> Option<&str> {
        self.meta()
            .annotations
            .as_ref()?
            .get(EXTERNAL_NAME)
            .map(String::as_str)
    }
    /// Whether it carries [`ADOPT`] `"true"`.
    fn adopt_requested(&self) -> bool {
        self.meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(ADOPT))
            .is_some_and(|v| v == "true")
    }
}

impl ConfigUser for super::ProxmoxVM {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

impl ConfigUser for super::ProxmoxImage {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

impl ConfigUser for super::ProxmoxContainer {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

impl ConfigUser for super::ProxmoxPool {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

/// A Secret in the same namespace as the referring resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
pub struct LocalSecretReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(SECRET_NAME).message(SECRET_NAME_MESSAGE))]
    pub name: String,
}

/// A kind that writes its connection details to a Secret it names
/// (`spec.writeConnectionSecretToRef`, Crossplane's field).
pub trait WritesConnectionSecret {
    /// The Secret the spec names, if any.
    fn connection_secret_ref(&self) -> Option<&LocalSecretReference>;
}

/// One key of a Secret in the same namespace as the referring resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
pub struct LocalSecretKeySelector {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(SECRET_NAME).message(SECRET_NAME_MESSAGE))]
    pub name: String,
    /// Key within the Secret's data.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

#[cfg(test)]
mod tests {
    use super::ManagementPolicy::*;
    use super::*;

    #[test]
    fn policies_are_interpreted_like_crossplane() {
        let all = Capabilities {
            create: true,
            update: true,
            delete: true,
        };
        let cases: &[(&str, &[ManagementPolicy], PolicyMode)] = &[
            ("star", &[All], PolicyMode::Active(all)),
            (
                "spelled out",
                &[Observe, Create, Update, Delete, LateInitialize],
                PolicyMode::Active(all),
            ),
            ("empty pauses", &[], PolicyMode::Paused),
            (
                "observe only",
                &[Observe],
                PolicyMode::Active(Capabilities {
                    create: false,
                    update: false,
                    delete: false,
                }),
            ),
            (
                "orphan on delete",
                &[Observe, Create, Update, LateInitialize],
                PolicyMode::Active(Capabilities {
                    create: true,
                    update: true,
                    delete: false,
                }),
            ),
        ];
        for (name, policies, want) in cases {
            assert_eq!(&policy_mode(policies), want, "{name}");
        }
        assert!(matches!(
            policy_mode(&[Create, Delete]),
            PolicyMode::Invalid(_)
        ));
    }

    #[test]
    fn star_serializes_as_a_star() {
        assert_eq!(serde_json::to_string(&All).unwrap(), "\"*\"");
        let back: ManagementPolicy = serde_json::from_str("\"*\"").unwrap();
        assert_eq!(back, All);
    }
}
