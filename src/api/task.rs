//! The Proxmox task a resource waits for and its last failure: the same
//! status fields for every kind that starts tasks, each kind naming its own
//! actions `A` (so its CRD lists only the actions it performs).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Proxmox task the provider started and is waiting for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InFlightTask<A> {
    /// Proxmox task ID (`UPID:node:...`).
    #[schemars(length(max = 512))]
    pub upid: String,
    /// Why the provider started it.
    pub action: A,
    /// Proxmox task type (`qmcreate`, `download`, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// Node the task runs on.
    pub node: String,
    /// What the task works on: the image volume for a download, the disk
    /// slot for a resize or a disk move, the target node of a migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// When it was started.
    pub started_at: Time,
    /// When it counts as timed out (it is still observed afterwards).
    pub deadline: Time,
    /// Progress in percent, when the task log tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 100))]
    pub progress: Option<u8>,
    /// Short summary for `kubectl get`, e.g. `qmcreate 42%`.
    pub summary: String,
}

impl<A> InFlightTask<A> {
    /// `qmcreate 42%`, or `qmcreate` while progress is unknown.
    pub fn summarize(type_: &str, progress: Option<u8>) -> String {
        match progress {
            Some(p) => format!("{type_} {p}%"),
            None => type_.to_owned(),
        }
    }
}

/// The last failed task.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskFailure<A> {
    /// What failed.
    pub action: A,
    /// Proxmox's exit status or error message.
    pub message: String,
    /// When the failure was seen.
    pub at: Time,
    /// Consecutive failures of this action.
    pub count: u32,
    /// Proxmox refused the create or clone because a VM with this VMID
    /// exists, one the provider's token may not see or that appeared
    /// meanwhile: an allocated VMID is given up and another allocated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vmid_taken: bool,
}

/// A kind whose status records the one Proxmox task it waits for (what
/// the task watcher follows).
pub trait RecordsTask {
    /// The UPID and start of the task its status records.
    fn recorded_task(&self) -> Option<(&str, &Time)>;
}

impl<A> InFlightTask<A> {
    /// Its UPID and start, whatever the kind's actions.
    pub fn started(&self) -> (&str, &Time) {
        (&self.upid, &self.started_at)
    }
}

/// What a task started by a CRUD kind's call does (the call of
/// `managed::crud`): every kind whose calls may start a Proxmox task
/// records it with these actions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum CallAction {
    /// Creating the object.
    Create,
    /// Correcting it as the spec asks (e.g. a requested rollback).
    Update,
    /// Deleting it.
    Delete,
}

/// A task that ended, as a CRUD kind's status remembers it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndedTask {
    /// Proxmox task ID.
    #[schemars(length(max = 512))]
    pub upid: String,
    /// Why it was started.
    pub action: CallAction,
    /// Proxmox task type (`qmsnapshot`, `qmrollback`, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// What it worked on, as the kind recorded it when it started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Whether it ended OK.
    pub succeeded: bool,
    /// Proxmox's exit status when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When its end was seen.
    pub at: Time,
}

/// The tasks of a kind whose calls may start one (`managed::crud`'s task
/// path): the one in flight, the last that ended, the last failure.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    /// The Proxmox task in flight: while it runs nothing else is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<InFlightTask<CallAction>>,
    /// The last task that ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_task: Option<EndedTask>,
    /// The last failure (its count sets the backoff); cleared by a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<TaskFailure<CallAction>>,
}
