//! `status`: what the provider observed and what it is waiting for.
//!
//! The in-flight task lives here so a restarted provider resumes observing
//! the same Proxmox task instead of starting another one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::managed::ManagedStatus;
use crate::api::task;

/// Observed state of a ProxmoxVM.
pub type ProxmoxVMStatus = ManagedStatus<VmAtProvider>;

/// The VM as last observed on Proxmox, and the task in flight.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmAtProvider {
    /// VMID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u32>,
    /// Node the VM is on (or is being created on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Power state as Proxmox reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ObservedState>,
    /// Proxmox config lock (`create`, `clone`, `backup`, ...), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// The first address the guest agent reports (IPv4 preferred).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address: Option<String>,
    /// Addresses the guest agent reports, without loopback and link-local.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// MAC addresses of the VM's network devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mac_addresses: Vec<String>,
    /// The Proxmox task the provider started and is waiting for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<InFlightTask>,
    /// The last failed task; retries wait for a backoff that grows with `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<TaskFailure>,
    /// Version (resourceVersion) of the password Secret last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_version: Option<String>,
    /// Config keys whose new values wait for the VM's next reboot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_changes: Vec<String>,
    /// The node `spec.forProvider.node` named when the provider last placed
    /// or migrated the VM there. A VM found elsewhere while `node` still
    /// names this one was moved by HA, its load balancer or a person, and
    /// is followed, not moved back; a new `node` is migrated to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_node: Option<String>,
    /// The QEMU process that ran when the `customCloudInit` seed ISO last
    /// changed: until the VM runs another (it was started again), the
    /// guest has not read the new data, and `pendingChanges` lists
    /// `customCloudInit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_changed_under_pid: Option<u64>,
    /// The VMID a restore task of this resource created (`restore`), until
    /// the VM carries this resource's owner marker: the restored notes
    /// carry the archive's marker, and this record is what proves the VM
    /// is this resource's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_vmid: Option<u32>,
    /// The VM's firewall as Proxmox shows it, when the spec declares one
    /// (read in each pass that looks at the VM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<crate::api::firewall::ObservedFirewall>,
    /// The VM's configuration as Proxmox shows it, under the names of
    /// `spec.forProvider` (`cpu`, `memory`, `disks`, `networks`,
    /// `cloudInit`, `tags`, `description`, ...): what to copy into the spec
    /// when importing a VM. Shown for this resource's VM, and for any VM
    /// while `managementPolicies` only observe.
    #[serde(flatten)]
    pub config: super::VmObserved,
}

/// Power state as Proxmox reports it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ObservedState {
    /// Running.
    Running,
    /// Stopped.
    Stopped,
    /// Paused or suspended.
    Paused,
    /// The VM does not exist (yet, or any more).
    Absent,
    /// Proxmox cannot tell (e.g. its node is offline).
    Unknown,
}

/// What a task was started for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum TaskAction {
    /// download-url of a disk image into storage.
    DownloadImage,
    /// VM create (with disk imports).
    Create,
    /// Clone of a template.
    Clone,
    /// Restore of a backup archive (`spec.forProvider.restore`).
    Restore,
    /// Config update.
    Configure,
    /// Disk resize.
    ResizeDisk,
    /// Start.
    Start,
    /// Graceful shutdown.
    Shutdown,
    /// Hard stop.
    Stop,
    /// Destroy with purge.
    Destroy,
    /// Migration to the node `spec.forProvider.node` names (the status
    /// `target`); `hamigrate` when HA manages the VM.
    Migrate,
    /// A disk moved to the storage its spec names (the status `target` is
    /// the slot).
    MoveDisk,
    /// The VM's HA resource, node-affinity rule or group written (a
    /// synchronous call that starts no task; recorded only as a failure).
    ConfigureHa,
    /// The VM's firewall options or one of its rules written (a
    /// synchronous call that starts no task; recorded only as a failure).
    ConfigureFirewall,
    /// The VM moved into the pool `spec.forProvider.pool` names (a
    /// synchronous call that starts no task; recorded only as a failure).
    MovePool,
    /// The `customCloudInit` seed ISO uploaded (the status `target` is its
    /// volume).
    UploadSeed,
    /// A seed ISO no longer attached deleted (the `target` is its volume).
    DeleteVolume,
    /// Conversion into a template.
    Template,
}

impl TaskAction {
    /// The Proxmox task type this action starts (`qmcreate`, ...).
    pub fn pve_type(self) -> &'static str {
        match self {
            Self::DownloadImage => "download",
            Self::Create => "qmcreate",
            Self::Clone => "qmclone",
            Self::Restore => "qmrestore",
            Self::Configure => "qmconfig",
            Self::ResizeDisk => "resize",
            Self::Start => "qmstart",
            Self::Shutdown => "qmshutdown",
            Self::Stop => "qmstop",
            Self::Destroy => "qmdestroy",
            Self::Migrate => "qmigrate",
            Self::MoveDisk => "qmmove",
            Self::ConfigureHa => "ha",
            Self::ConfigureFirewall => "firewall",
            Self::MovePool => "pool",
            Self::UploadSeed => "imgcopy",
            Self::DeleteVolume => "imgdel",
            Self::Template => "qmtemplate",
        }
    }

    /// Words for condition messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::DownloadImage => "download of the disk image",
            Self::Create => "creation of the VM",
            Self::Clone => "clone of the template",
            Self::Restore => "restore of the backup",
            Self::Configure => "configuration update",
            Self::ResizeDisk => "disk resize",
            Self::Start => "start",
            Self::Shutdown => "shutdown",
            Self::Stop => "stop",
            Self::Destroy => "destruction of the VM",
            Self::Migrate => "migration of the VM",
            Self::MoveDisk => "disk move",
            Self::ConfigureHa => "HA configuration",
            Self::ConfigureFirewall => "firewall configuration",
            Self::MovePool => "move into the pool",
            Self::UploadSeed => "upload of the cloud-init seed ISO",
            Self::DeleteVolume => "deletion of an old cloud-init seed ISO",
            Self::Template => "conversion into a template",
        }
    }
}

/// A Proxmox task a ProxmoxVM waits for.
pub type InFlightTask = task::InFlightTask<TaskAction>;

/// The last failed task of a ProxmoxVM.
pub type TaskFailure = task::TaskFailure<TaskAction>;

impl task::RecordsTask for super::ProxmoxVM {
    fn recorded_task(
        &self,
    ) -> Option<(&str, &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)> {
        let task = self.status.as_ref()?.at_provider.task.as_ref()?;
        Some(task.started())
    }
}
