//! `spec.forProvider.restore`: a VM created from a vzdump backup archive.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::rules::{DNS_NAME, STORAGE_ID, STORAGE_ID_MESSAGE};

/// The backup archive a VM is restored from (`qmrestore`), by volume ID or
/// by a ProxmoxBackup of this namespace. Create only: it is read when the VM
/// is created and cannot be changed afterwards. The restored VM keeps the
/// archive's config and disks; the provider then writes its own owner
/// marker into the notes and applies the rest of `forProvider` (name, CPU,
/// memory, networks, ...) as to any VM it created.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.archive) != has(self.backupRef)")
        .message("restore needs exactly one of archive and backupRef")
)]
pub struct RestoreSource {
    /// The archive's volume ID, e.g.
    /// `local:backup/vzdump-qemu-100-2026_12_05-01_00_00.vma.zst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new(ARCHIVE).message(
        "archive must be a VM backup volume ID: STORAGE:backup/vzdump-qemu-VMID-..."
    ))]
    pub archive: Option<String>,
    /// A ProxmoxBackup of this namespace: its `status.atProvider.volume` is
    /// restored once it is Ready (until then the VM waits, saying so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_ref: Option<BackupReference>,
    /// Storage for the restored disks. Left out: the storages the archive
    /// names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: Option<String>,
}

/// A VM backup volume ID as `pvesm` names vzdump archives.
const ARCHIVE: &str =
    "self.matches('^[a-zA-Z][a-zA-Z0-9._-]*:backup/vzdump-qemu-[0-9]+-[0-9A-Za-z._-]+$')";

/// A ProxmoxBackup in the VM's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BackupReference {
    /// The ProxmoxBackup's name.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(DNS_NAME)
        .message("backupRef.name must be the name of a ProxmoxBackup (a DNS subdomain name)"))]
    pub name: String,
}
