//! `status` of a ProxmoxSnapshot: the snapshot as last observed, the task
//! in flight and the last rollback.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::managed::ManagedStatus;
use crate::api::task::TaskRecord;

/// Observed state of a ProxmoxSnapshot.
pub type ProxmoxSnapshotStatus = ManagedStatus<SnapshotAtProvider>;

/// The snapshot as last observed on Proxmox, and its tasks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotAtProvider {
    /// The guest's VMID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u32>,
    /// The guest's node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// When the snapshot was taken (RFC 3339), once seen with this
    /// resource's ownership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snaptime: Option<String>,
    /// The snapshot it was taken after (Proxmox re-parents it when that
    /// one is deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Whether it holds the VM's RAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmstate: Option<bool>,
    /// Its description, without the owner marker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The task in flight, the last that ended and the last failure.
    #[serde(flatten)]
    pub tasks: TaskRecord,
    /// The last rollback request handled, and how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rollback: Option<RollbackOutcome>,
}

/// A rollback request and how it ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackOutcome {
    /// The `rollbackRequest` value it answers.
    pub request: String,
    /// Whether the rollback task ended OK (a failed one is tried again
    /// with backoff while the request stands).
    pub succeeded: bool,
    /// Proxmox's exit status when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The rollback task.
    pub upid: String,
    /// When its end was seen.
    pub at: Time,
}
