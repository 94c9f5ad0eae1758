//! What every managed kind's spec and status carry besides its own fields:
//! crossplane-runtime's `ResourceSpec` and `ResourceStatus`, written once.
//!
//! A kind's spec embeds [`ManagedSpec`] with `#[serde(flatten)]` beside its
//! `forProvider`, and its status is a [`ManagedStatus`] of its own
//! `atProvider` type, so the generated CRDs of every kind say the same
//! thing in the same words (`providerConfigRef`, `managementPolicies` with
//! their CEL rules, `conditions` merged by type, `observedGeneration`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::condition::{Condition, Reason};
use super::meta::{
    Capabilities, ManagementPolicy, PAUSED, PolicyMode, ProviderConfigReference,
    default_management_policies, policy_mode,
};

/// The managed fields of a spec.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedSpec {
    /// Which provider config (Proxmox endpoint and credentials) to use.
    /// Defaults to the ClusterProviderConfig named `default`.
    #[serde(default)]
    pub provider_config_ref: ProviderConfigReference,

    /// What the provider may do with what this resource manages on
    /// Proxmox: any of Observe, Create, Update, Delete, LateInitialize, or
    /// "*" (everything, the default). Without Delete it is left on Proxmox
    /// when this resource is deleted; ["Observe"] only reads it; [] pauses
    /// the resource.
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

impl ManagedSpec {
    /// How the provider may act on the resource: paused by the
    /// `crossplane.io/paused` annotation or by `[]`, refused without
    /// Observe, else what the policies allow.
    pub fn mode(&self, meta: &ObjectMeta) -> PolicyMode {
        if paused_by_annotation(meta) {
            return PolicyMode::Paused;
        }
        policy_mode(&self.management_policies)
    }

    /// Whether the policies name `LateInitialize`: unset `forProvider`
    /// fields are filled from what the external object shows. `"*"` does
    /// not: the provider's own choices (the node placement picked, the name
    /// defaulting to the resource's) would be pinned into every spec it
    /// creates. Late initialisation is for importing, and asked for by name.
    pub fn late_initializes(&self) -> bool {
        self.management_policies
            .contains(&ManagementPolicy::LateInitialize)
    }

    /// Why the resource is paused, when it is, in words for a condition.
    pub fn paused_by(&self, meta: &ObjectMeta) -> Option<&'static str> {
        if paused_by_annotation(meta) {
            Some("the crossplane.io/paused annotation is \"true\"")
        } else if self.management_policies.is_empty() {
            Some("managementPolicies is empty")
        } else {
            None
        }
    }
}

impl ManagedSpec {
    /// What a pass may do, or why it does nothing (`ReconcilePaused`, or
    /// `InvalidSpec` for policies without Observe) with the message its
    /// Synced condition says: [`Self::mode`] in the words every kind uses.
    pub fn capabilities(&self, meta: &ObjectMeta) -> Result<Capabilities, (Reason, String)> {
        match self.mode(meta) {
            PolicyMode::Active(caps) => Ok(caps),
            PolicyMode::Paused => Err((
                Reason::ReconcilePaused,
                format!(
                    "reconciliation is paused: {}",
                    self.paused_by(meta).unwrap_or_default()
                ),
            )),
            PolicyMode::Invalid(why) => Err((Reason::InvalidSpec, why)),
        }
    }
}

fn paused_by_annotation(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(PAUSED))
        .is_some_and(|v| v == "true")
}

/// Observed state: what the provider last saw on Proxmox and the
/// conditions that sum it up.
// `JsonSchema`, not `KubeSchema`: kube's derive takes no type parameter, so
// the list-map markers of `conditions` are written out.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct ManagedStatus<A: Default> {
    // No doc comment: the description is the kind's `atProvider` type's.
    #[serde(default)]
    #[schemars(extend("default" = {}))]
    pub at_provider: A,

    /// `Ready` and `Synced` (and a ProxmoxVM's `GuestAgent`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// The `metadata.generation` the provider last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// The last `crossplane.io/reconcile-requested-at` annotation value a
    /// pass handled: setting the annotation to a new value (a timestamp,
    /// say) asks for a pass, and its value appears here once one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

/// Two statuses say the same about the resource whatever request of a
/// pass they echo: `lastHandledReconcileAt` is written on its own (by its
/// own field manager, see `managed::status::echo_request`), so a kind that
/// builds its status afresh compares what it observed, and writes nothing
/// at rest.
impl<A: Default + PartialEq> PartialEq for ManagedStatus<A> {
    fn eq(&self, other: &Self) -> bool {
        self.at_provider == other.at_provider
            && self.conditions == other.conditions
            && self.observed_generation == other.observed_generation
    }
}

/// The field manager `LateInitialize` writes `spec.forProvider` with: a
/// GitOps tool's apply neither owns nor removes what it filled in.
pub const LATE_INIT_MANAGER: &str = "proxmox-provider-late-init";

/// The annotation that asks for a pass (crossplane-runtime v2.3+).
pub const RECONCILE_REQUESTED_AT: &str = "crossplane.io/reconcile-requested-at";

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn meta(paused: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            annotations: paused.map(|v| BTreeMap::from([(PAUSED.to_owned(), v.to_owned())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn the_annotation_pauses_whatever_the_policies_say() {
        let spec = ManagedSpec::default();
        assert_eq!(spec.mode(&meta(Some("true"))), PolicyMode::Paused);
        assert!(spec.paused_by(&meta(Some("true"))).is_some());
        let all = PolicyMode::Active(Capabilities {
            create: true,
            update: true,
            delete: true,
        });
        assert_eq!(spec.mode(&meta(Some("false"))), all);
        assert_eq!(spec.mode(&meta(None)), all);
        assert_eq!(spec.paused_by(&meta(None)), None);
        let empty = ManagedSpec {
            management_policies: vec![],
            ..ManagedSpec::default()
        };
        assert_eq!(empty.mode(&meta(None)), PolicyMode::Paused);
        assert_eq!(
            empty.paused_by(&meta(None)),
            Some("managementPolicies is empty")
        );
    }
}
