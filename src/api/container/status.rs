//! `status` of a ProxmoxContainer: what the provider observed and the task
//! it waits for (so a restarted provider resumes observing that task rather
//! than starting another).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::managed::ManagedStatus;
use crate::api::task;
use crate::api::vm::ObservedState;

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
    pub task: Option<ContainerTask>,
    /// The last failed task; retried after a backoff that grows with
    /// `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<ContainerTaskFailure>,
    /// Config differences the provider reports but does not correct
    /// (create-only fields, features only root@pam may change).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmanaged_drift: Vec<String>,
    /// The VMID a restore task of this resource created (`restore`), until
    /// the container carries this resource's owner marker: notes that
    /// still carry the archive's marker are written over only with this
    /// proof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_vmid: Option<u32>,
    /// The container's firewall as Proxmox shows it, when the spec
    /// declares one (read in each pass that finds the container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<crate::api::firewall::ObservedFirewall>,
    /// The container's configuration as Proxmox shows it, under the names
    /// of `spec.forProvider` (`cpu`, `memory`, `swap`, `rootfs`,
    /// `networks`, `tags`, `description`, ...): what to copy into the spec
    /// when importing a container.
    #[serde(flatten)]
    pub config: super::ContainerObserved,
}

/// What a container's task was started for (a subset of the VM's actions,
/// under the same names, so a status written before containers had their
/// own list still reads).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ContainerTaskAction {
    /// Pull of an OCI image into a template volume.
    DownloadImage,
    /// Container create.
    Create,
    /// Restore of a backup archive (`spec.forProvider.restore`).
    Restore,
    /// Config update (synchronous; recorded only as a failure).
    Configure,
    /// Start.
    Start,
    /// Graceful shutdown.
    Shutdown,
    /// Hard stop.
    Stop,
    /// Destroy with purge.
    Destroy,
}

/// A Proxmox task a ProxmoxContainer waits for.
pub type ContainerTask = task::InFlightTask<ContainerTaskAction>;

/// The last failed task of a ProxmoxContainer.
pub type ContainerTaskFailure = task::TaskFailure<ContainerTaskAction>;

impl task::RecordsTask for super::ProxmoxContainer {
    fn recorded_task(
        &self,
    ) -> Option<(&str, &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)> {
        let task = self.status.as_ref()?.at_provider.task.as_ref()?;
        Some(task.started())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status written while containers recorded the VM's actions still
    /// reads: every action the container's pass ever recorded (a pull, the
    /// create, the power changes, the destroy, a failed config write) is
    /// one of the container's own, under the same name.
    #[test]
    fn a_status_recorded_with_the_shared_actions_still_reads() {
        for action in [
            "DownloadImage",
            "Create",
            "Configure",
            "Start",
            "Shutdown",
            "Stop",
            "Destroy",
        ] {
            let status = serde_json::json!({
                "atProvider": {
                    "vmid": 120,
                    "task": {
                        "upid": "UPID:pve:0000A1B2:0001C3D4:65000000:vzcreate:120:root@pam:",
                        "action": action,
                        "type": "vzcreate",
                        "node": "pve",
                        "startedAt": "2026-01-01T00:00:00Z",
                        "deadline": "2026-01-01T00:30:00Z",
                        "summary": "vzcreate",
                    },
                    "lastFailure": {
                        "action": action,
                        "message": "refused",
                        "at": "2026-01-01T00:00:00Z",
                        "count": 2,
                    },
                },
            });
            let read: ProxmoxContainerStatus = serde_json::from_value(status)
                .unwrap_or_else(|e| panic!("{action} does not read: {e}"));
            let task = read.at_provider.task.expect("the task");
            let failure = read.at_provider.last_failure.expect("the failure");
            assert_eq!(task.action, failure.action);
            assert_eq!(
                serde_json::to_value(task.action).expect("serializes"),
                serde_json::json!(action),
            );
        }
    }

    /// The VM-only actions are not the container's: a status naming one
    /// is refused rather than read as something else.
    #[test]
    fn a_vm_only_action_is_not_a_container_action() {
        for action in ["ConfigureHa", "UploadSeed", "Clone", "Migrate", "Template"] {
            let read = serde_json::from_value::<ContainerTaskAction>(serde_json::json!(action));
            assert!(read.is_err(), "{action} read as {read:?}");
        }
    }
}
