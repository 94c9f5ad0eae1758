//! `status` of a ProxmoxContainer: what the provider observed and the task
//! it waits for (so a restarted provider resumes observing that task rather
//! than starting another).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::managed::ManagedStatus;
use crate::api::vm::{InFlightTask, ObservedState, TaskFailure};

/// Observed state of a ProxmoxContainer.
pub type ProxmoxContainerStatus = ManagedStatus<ContainerAtProvider>;

/// The container as last observed on Proxmox, and the task in flight.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerAtProvider {
    /// VMID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u32>,
    /// Node the container is on (or is being created on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Power state as Proxmox reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ObservedState>,
    /// Proxmox config lock (`create`, `backup`, ...), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// The template volume the container was (or is to be) created from;
    /// for an OCI image, the file the pull wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_volume: Option<String>,
    /// The Proxmox task the provider started and is waiting for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<InFlightTask>,
    /// The last failed task; retried after a backoff that grows with
    /// `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<TaskFailure>,
    /// Config differences the provider reports but does not correct
    /// (create-only fields, features only root@pam may change).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmanaged_drift: Vec<String>,
}
