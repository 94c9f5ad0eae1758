//! `spec.forProvider.restore`: a container created from a vzdump backup
//! archive.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::vm::BackupReference;

/// The backup archive a container is restored from (`vzrestore`), by
/// volume ID or by a ProxmoxBackup of this namespace. Create only: it is
/// read when the container is created and cannot be changed afterwards.
/// The restored container keeps the archive's root filesystem, mount
/// points and config; the restore call sets this resource's hostname,
/// notes with its owner marker and `unprivileged` over them (as
/// pve-container merges a restore's options over the archived config), and
/// its root filesystem and mount points go to `rootfs.storage`. The rest
/// of `forProvider` (CPU, memory, networks, ...) is applied afterwards as
/// to any container the provider created.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.archive) != has(self.backupRef)")
        .message("restore needs exactly one of archive and backupRef")
)]
pub struct ContainerRestore {
    /// The archive's volume ID, e.g.
    /// `local:backup/vzdump-lxc-100-2026_12_05-01_00_00.tar.zst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new(ARCHIVE).message(
        "archive must be a container backup volume ID: STORAGE:backup/vzdump-lxc-VMID-..."
    ))]
    pub archive: Option<String>,
    /// A ProxmoxBackup of this namespace (of a container): its
    /// `status.atProvider.volume` is restored once it is Ready (until then
    /// the container waits, saying so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_ref: Option<BackupReference>,
}

/// A container backup volume ID as `pvesm` names vzdump archives.
const ARCHIVE: &str =
    "self.matches('^[a-zA-Z][a-zA-Z0-9._-]*:backup/vzdump-lxc-[0-9]+-[0-9A-Za-z._-]+$')";
