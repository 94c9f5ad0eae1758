//! `status` of a ProxmoxBackup: the archive as last observed and its tasks.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::managed::ManagedStatus;
use crate::api::task::TaskRecord;

/// Observed state of a ProxmoxBackup.
pub type ProxmoxBackupStatus = ManagedStatus<BackupAtProvider>;

/// The archive as last observed on Proxmox, and its tasks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupAtProvider {
    /// The archive's volume ID
    /// (`local:backup/vzdump-qemu-100-2026_12_05-01_00_00.vma.zst`): what a
    /// restore names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// Its size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// When it was made (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctime: Option<String>,
    /// Whether Proxmox protects it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protected: Option<bool>,
    /// The guest's node (the archive's storage is read there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The guest's VMID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u32>,
    /// The task in flight, the last that ended and the last failure.
    #[serde(flatten)]
    pub tasks: TaskRecord,
}
