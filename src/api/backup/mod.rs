//! `ProxmoxBackup`: one backup on demand (`vzdump`) of a guest, a
//! ProxmoxVM or a ProxmoxContainer of the same namespace named by
//! reference (never by a raw VMID, so no team can back up another's
//! guest), kept as one archive on a storage.
//!
//! Taken once (a `vzdump` task, recorded in the status and observed, never
//! waited for); Ready once the archive exists; its protection changed in
//! place; the archive deleted with the resource (unless the management
//! policies leave out `Delete`). The archive is this resource's by the
//! owner marker the vzdump call writes as the first line of its notes (the
//! line Proxmox lists), so neither a restart nor a lost status write loses
//! it; an archive without it is never changed or deleted.

mod status;
#[cfg(test)]
mod tests;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use status::{BackupAtProvider, ProxmoxBackupStatus};

pub use crate::api::snapshot::{GuestKind, GuestReference};

use crate::api::managed::ManagedSpec;
use crate::api::meta::ProviderConfigReference;

/// A backup on demand of a ProxmoxVM or ProxmoxContainer.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxBackup",
    plural = "proxmoxbackups",
    singular = "proxmoxbackup",
    namespaced,
    status = "ProxmoxBackupStatus",
    derive = "PartialEq",
    shortname = "pbak",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A backup on demand (vzdump) of a ProxmoxVM or ProxmoxContainer, managed by crossplane-provider-proxmox.",
    printcolumn(
        name = "GUEST",
        type_ = "string",
        json_path = ".spec.forProvider.guestRef.name"
    ),
    printcolumn(
        name = "VOLUME",
        type_ = "string",
        json_path = ".status.atProvider.volume"
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
pub struct ProxmoxBackupSpec {
    /// The backup as it should be on Proxmox.
    pub for_provider: BackupParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// The guest, where the archive goes and how it is made.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupParameters {
    /// The guest to back up: a ProxmoxVM or ProxmoxContainer of this
    /// namespace. Cannot be changed.
    #[x_kube(validation = Rule::new("self == oldSelf").message("guestRef cannot be changed: create another ProxmoxBackup"))]
    pub guest_ref: GuestReference,

    /// The storage the archive is written to (a storage ID with `backup`
    /// content, on the guest's node). Cannot be changed.
    #[schemars(length(min = 2, max = 64))]
    #[x_kube(
        validation = Rule::new("self.matches('^[A-Za-z][A-Za-z0-9._-]+$')")
            .message("storage must be a Proxmox storage ID: a letter, then letters, digits, '.', '_' or '-'"),
        validation = Rule::new("self == oldSelf").message("storage cannot be changed: create another ProxmoxBackup")
    )]
    pub storage: String,

    /// How the guest is kept consistent while it is read: `snapshot`
    /// (default: it keeps running), `suspend` or `stop`. Cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("mode cannot be changed: it is how the archive was made"))]
    pub mode: Option<BackupMode>,

    /// The archive's compression: `none` (default), `lzo`, `gzip` or
    /// `zstd`. Cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("compress cannot be changed: it is how the archive was made"))]
    pub compress: Option<Compression>,

    /// The archive's notes, after the owner marker line the provider writes
    /// first: `{{guestname}}`, `{{node}}`, `{{vmid}}` and `{{cluster}}` are
    /// filled in by Proxmox; `\n` is a new line and `\\` a backslash (any
    /// other backslash Proxmox refuses). Cannot be changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 900))]
    #[x_kube(
        validation = Rule::new(r"self.matches('^([^\\\\]|\\\\[n\\\\])*$')")
            .message("notesTemplate may use a backslash only as \\n (a new line) or \\\\ (a backslash), as Proxmox reads it"),
        validation = Rule::new("!self.contains('Managed by crossplane-provider-proxmox:')")
            .message("notesTemplate must not contain the owner marker \"Managed by crossplane-provider-proxmox:\": the provider writes that line itself"),
        validation = Rule::new("self == oldSelf").message("notesTemplate cannot be changed: the notes are written with the archive")
    )]
    pub notes_template: Option<String>,

    /// Protect the archive from deletion and pruning on Proxmox. Changed
    /// in place; the provider lifts it itself before it deletes the
    /// archive with the resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected: Option<bool>,
}

/// `mode`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BackupMode {
    Snapshot,
    Suspend,
    Stop,
}

/// `compress`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Compression {
    None,
    Lzo,
    Gzip,
    Zstd,
}

impl crate::api::meta::ConfigUser for ProxmoxBackup {
    fn provider_config_ref(&self) -> &ProviderConfigReference {
        &self.spec.managed.provider_config_ref
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

impl crate::api::task::RecordsTask for ProxmoxBackup {
    fn recorded_task(
        &self,
    ) -> Option<(&str, &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)> {
        let task = self.status.as_ref()?.at_provider.tasks.task.as_ref()?;
        Some(task.started())
    }
}
