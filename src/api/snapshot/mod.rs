//! `ProxmoxSnapshot`: one snapshot of a guest, a ProxmoxVM or a
//! ProxmoxContainer of the same namespace, named by reference (never by a
//! raw VMID, so no team can snapshot or roll back another's guest).
//!
//! Taken once (`qmsnapshot`/`vzsnapshot`), its description changed in
//! place, deleted with the resource (`qmdelsnapshot`/`vzdelsnapshot`;
//! Proxmox re-parents the snapshots taken after it), and rolled back on
//! request (`rollbackRequest`: each new value is one tracked rollback
//! task). Every task is recorded in the status and observed on later
//! passes, never waited for.
//!
//! **The snapshot name is used as it is, and ownership is its
//! description's owner marker.** Snapshot names are per guest and people
//! name them (`before-upgrade`), so the name is spelled out
//! (`forProvider.name`) rather than derived; what tells this resource's
//! snapshot from one of the same name made by hand or by another resource
//! is the marker line the create call writes into the snapshot's
//! description (as a VM carries one in its own). It is on Proxmox with the
//! snapshot, set by the same call that makes it, so neither a restart nor
//! a lost status write can lose it, and a person sees in the GUI who
//! manages it. A snapshot of that name without this resource's marker is
//! never rolled back, changed or deleted (`NotOwned`).

mod status;
#[cfg(test)]
mod tests;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use status::{ProxmoxSnapshotStatus, RollbackOutcome, SnapshotAtProvider};

use crate::api::managed::ManagedSpec;
use crate::api::meta::ProviderConfigReference;

/// A snapshot of a ProxmoxVM or ProxmoxContainer.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxSnapshot",
    plural = "proxmoxsnapshots",
    singular = "proxmoxsnapshot",
    namespaced,
    status = "ProxmoxSnapshotStatus",
    derive = "PartialEq",
    shortname = "psnap",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A snapshot of a ProxmoxVM or ProxmoxContainer, managed by crossplane-provider-proxmox.",
    printcolumn(
        name = "GUEST",
        type_ = "string",
        json_path = ".spec.forProvider.guestRef.name"
    ),
    printcolumn(
        name = "SNAPSHOT",
        type_ = "string",
        json_path = ".spec.forProvider.name"
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
        name = "TASK",
        type_ = "string",
        json_path = ".status.atProvider.task.summary"
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
pub struct ProxmoxSnapshotSpec {
    /// The snapshot as it should be on Proxmox.
    pub for_provider: SnapshotParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// The guest, the snapshot's name and description, RAM, and a rollback
/// request.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.vmstate) || !self.vmstate || self.guestRef.kind == 'ProxmoxVM'")
        .message("vmstate (saving the RAM) exists for VMs only: a ProxmoxContainer snapshot cannot have it; remove vmstate")
)]
pub struct SnapshotParameters {
    /// The guest to snapshot: a ProxmoxVM or ProxmoxContainer of this
    /// namespace. Cannot be changed.
    #[x_kube(validation = Rule::new("self == oldSelf").message("guestRef cannot be changed: create another ProxmoxSnapshot"))]
    pub guest_ref: GuestReference,

    /// The snapshot's name on Proxmox (a configuration ID: a letter, then
    /// letters, digits, `_` or `-`; 2 to 40 characters; not `current` or
    /// `pending`). A snapshot of this name on the guest that this resource
    /// did not take is never touched (`NotOwned`). Cannot be changed.
    #[schemars(length(min = 2, max = 40))]
    #[x_kube(
        validation = Rule::new("self.matches('^[A-Za-z][A-Za-z0-9_-]+$')")
            .message("name must start with a letter and hold only letters, digits, '_' and '-' (a Proxmox configuration ID)"),
        validation = Rule::new("!self.matches('^(current|[Pp][Ee][Nn][Dd][Ii][Nn][Gg])$')")
            .message("name cannot be current or pending: Proxmox reserves them"),
        validation = Rule::new("self == oldSelf")
            .message("name cannot be changed: create another ProxmoxSnapshot")
    )]
    pub name: String,

    /// The snapshot's description. The provider adds its owner marker as
    /// the last line; a description changed on Proxmox is set back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    #[x_kube(validation = Rule::new("!self.contains('Managed by crossplane-provider-proxmox:')")
        .message("description must not contain the owner marker \"Managed by crossplane-provider-proxmox:\": the provider adds that line itself"))]
    pub description: Option<String>,

    /// Also save the VM's RAM (VMs only): rolling back to the snapshot then
    /// resumes the VM where it was. Default false. Cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("vmstate cannot be changed: it is part of the snapshot taken"))]
    pub vmstate: Option<bool>,

    /// Set or change this to ask for one rollback of the guest to this
    /// snapshot: each new value (a timestamp, say) is one request, carried
    /// out once as a tracked rollback task (`qmrollback`/`vzrollback`);
    /// `status.atProvider.lastRollback` says which request was handled and
    /// how it ended (a failed one is tried again with backoff). Proxmox
    /// stops a running guest to roll it back: from a snapshot with RAM
    /// (`vmstate`) the VM resumes running; without it the guest is left
    /// stopped, and its own resource brings it back to its declared
    /// `powerState`. Removing the field asks for nothing. A value present
    /// when the snapshot is taken is carried out right after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub rollback_request: Option<String>,
}

/// A guest of the same namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GuestReference {
    /// `ProxmoxVM` or `ProxmoxContainer`.
    pub kind: GuestKind,
    /// The resource's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The kinds of guest a snapshot can be of.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum GuestKind {
    ProxmoxVM,
    ProxmoxContainer,
}

impl crate::api::meta::ConfigUser for ProxmoxSnapshot {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

impl crate::api::task::RecordsTask for ProxmoxSnapshot {
    fn recorded_task(
        &self,
    ) -> Option<(&str, &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)> {
        let task = self.status.as_ref()?.at_provider.tasks.task.as_ref()?;
        Some(task.started())
    }
}
