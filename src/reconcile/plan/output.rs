//! What the plan decides: one step, the status to write, when to look again.

use std::{collections::BTreeMap, fmt, time::Duration};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

use crate::api::{
    ProxmoxVMStatus,
    vm::{ChecksumAlgorithm, InFlightTask, TaskAction},
};

/// The decision of one pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The one thing to do now.
    pub step: Step,
    /// The status to write once the step succeeded (server-side apply; a
    /// write equal to the current status is a no-op). When the step starts a
    /// task, call [`Plan::task_started`] first.
    pub status: ProxmoxVMStatus,
    /// When to reconcile again after the step; `None`: only on change.
    pub requeue_after: Option<Duration>,
    /// Kubernetes events to publish (failures to publish are not errors).
    pub events: Vec<Event>,
    /// Data for the `writeConnectionSecretToRef` Secret, when set and known.
    pub connection: Option<BTreeMap<String, String>>,
    /// The task a dispatching step starts, to be completed by `task_started`.
    pub(super) pending_task: Option<InFlightTask>,
}

impl Plan {
    /// Records the task the step started (its UPID as Proxmox returned it)
    /// in the status, so later passes observe it instead of starting another.
    pub fn task_started(&mut self, upid: &str) {
        if let Some(mut task) = self.pending_task.take() {
            task.upid = upid.to_owned();
            self.status.at_provider.task = Some(task);
        }
    }
}

/// One action. Steps that start a Proxmox task say so in [`Step::action`].
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Kubernetes: set `crossplane.io/external-name` to `vmid` and, when
    /// `create_pending`, `crossplane.io/external-create-pending` to now, in
    /// one update carrying the resourceVersion (a stale object must fail
    /// with 409, so two writers cannot both believe they recorded it).
    RecordExternalName {
        /// The VMID.
        vmid: u32,
        /// Also mark a create as possibly sent from now on.
        create_pending: bool,
    },
    /// Ask Proxmox for the next free VMID (`/cluster/nextid`), then do as
    /// [`Step::RecordExternalName`] with `create_pending: true`.
    AllocateVmid,
    /// Kubernetes: remove `crossplane.io/external-name` and the create
    /// annotations; the allocated VMID turned out to belong to another VM.
    ForgetExternalName,
    /// Kubernetes: add the finalizer (JSON patch with a `test` of the list).
    AddFinalizer,
    /// Kubernetes: set `crossplane.io/external-create-succeeded` to now.
    RecordCreateSucceeded,
    /// Kubernetes: remove the finalizer; the resource may go.
    RemoveFinalizer,

    /// Proxmox: `POST /nodes/{node}/storage/{storage}/download-url`
    /// (`content=import`).
    DownloadImage {
        /// Node.
        node: String,
        /// Storage ID.
        storage: String,
        /// Source URL.
        url: String,
        /// Target file name.
        file_name: String,
        /// Expected checksum.
        checksum: String,
        /// Its algorithm.
        algorithm: ChecksumAlgorithm,
    },
    /// Proxmox: `POST /nodes/{node}/qemu` with `vmid` and `params`.
    CreateVm {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// Every create parameter except `vmid`.
        params: Params,
    },
    /// Proxmox: `POST /nodes/{source_node}/qemu/{template}/clone`.
    CloneVm {
        /// Node of the template.
        source_node: String,
        /// Template VMID.
        template: u32,
        /// New VMID (`newid`).
        vmid: u32,
        /// `target` node, when not the template's.
        target_node: Option<String>,
        /// `full`.
        full: bool,
        /// `storage` (full clones only).
        storage: Option<String>,
        /// `name`.
        name: String,
        /// `description`, carrying the owner marker.
        description: String,
        /// `pool`.
        pool: Option<String>,
    },
    /// Proxmox: `POST /nodes/{node}/qemu/{vmid}/config` (async).
    Configure {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// Keys to set and delete, and the digest they were computed from.
        changes: ConfigChanges,
    },
    /// Proxmox: `PUT /nodes/{node}/qemu/{vmid}/resize` to an absolute size.
    ResizeDisk {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// Disk slot.
        slot: String,
        /// New size in bytes (send as a plain number).
        bytes: u64,
    },
    /// Proxmox: `POST .../status/start`.
    Start {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
    },
    /// Proxmox: `POST .../status/shutdown` with `timeout` (no `forceStop`).
    Shutdown {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// Seconds to wait for the guest.
        timeout: Duration,
    },
    /// Proxmox: `POST .../status/stop`.
    Stop {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
    },
    /// Proxmox: `DELETE /nodes/{node}/qemu/{vmid}?purge=1&destroy-unreferenced-disks=1`.
    Destroy {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
    },

    /// Nothing to do but write the status; reconcile again at once.
    SaveStatus,
    /// A task is in flight: observe it again after `requeue_after`.
    ObserveTask,
    /// Waiting for something outside the provider (a lock, a Secret,
    /// capacity, a backoff); the conditions say what.
    Wait,
    /// The spec cannot be carried out as written; nothing to do until it
    /// changes.
    Refuse,
    /// Reconciliation is paused.
    Paused,
    /// The VM matches the spec.
    UpToDate,
}

impl Step {
    /// The task this step starts on Proxmox, if it starts one.
    pub fn action(&self) -> Option<TaskAction> {
        Some(match self {
            Self::DownloadImage { .. } => TaskAction::DownloadImage,
            Self::CreateVm { .. } => TaskAction::Create,
            Self::CloneVm { .. } => TaskAction::Clone,
            Self::Configure { .. } => TaskAction::Configure,
            Self::ResizeDisk { .. } => TaskAction::ResizeDisk,
            Self::Start { .. } => TaskAction::Start,
            Self::Shutdown { .. } => TaskAction::Shutdown,
            Self::Stop { .. } => TaskAction::Stop,
            Self::Destroy { .. } => TaskAction::Destroy,
            _ => return None,
        })
    }
}

/// Proxmox parameters as the API expects their values (before the form or
/// JSON encoding of the request): `scsi0=local-lvm:0,import-from=...`,
/// `sshkeys` already percent-encoded, `memory` in MiB.
pub type Params = BTreeMap<String, Param>;

/// One parameter value.
#[derive(Clone, PartialEq, Eq)]
pub enum Param {
    /// Plain value.
    Plain(String),
    /// A secret (`cipassword`); never logged.
    Secret(Sensitive),
}

impl Param {
    /// The value to send.
    pub fn expose(&self) -> &str {
        match self {
            Self::Plain(v) => v,
            Self::Secret(s) => s.expose(),
        }
    }
}

impl fmt::Debug for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Plain(v) => fmt::Debug::fmt(v, f),
            Self::Secret(s) => fmt::Debug::fmt(s, f),
        }
    }
}

/// A config update.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigChanges {
    /// Keys to set.
    pub set: Params,
    /// Keys to delete (`delete=a,b`).
    pub delete: Vec<String>,
    /// The `digest` of the config the changes were computed from; send it so
    /// Proxmox refuses the update if someone changed the config meanwhile.
    pub digest: Option<String>,
}

impl ConfigChanges {
    /// Whether there is nothing to change.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.delete.is_empty()
    }
}

/// A string that is never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Sensitive(String);

impl Sensitive {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret itself, for the request that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Sensitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A Kubernetes event to publish about the resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// CamelCase reason, e.g. `TaskSucceeded`.
    pub reason: &'static str,
    /// Human text.
    pub note: String,
}

/// Converts a timestamp for the status.
pub(super) fn time(ts: Timestamp) -> Time {
    Time(ts)
}
