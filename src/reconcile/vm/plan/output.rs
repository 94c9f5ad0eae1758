//! What the plan decides: one step, the status to write, when to look again.

pub use crate::reconcile::common::event::Event;
use std::{collections::BTreeMap, fmt, time::Duration};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use pve_client::vm::VmParams;

use super::HaCall;

use crate::api::{
    ProxmoxVMStatus,
    vm::{ChecksumAlgorithm, InFlightTask, TaskAction},
};

/// The decision of one pass. `S` is the kind of step: [`Step`] for a full
/// plan, [`LocalStep`] for one [`super::preflight`] made before Proxmox was
/// contacted (which therefore cannot hold a Proxmox call).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan<S = Step> {
    /// The one thing to do now.
    pub step: S,
    /// The status to write once the step was carried out and the plan
    /// settled with its outcome (server-side apply; a write equal to the
    /// current status is a no-op).
    pub status: ProxmoxVMStatus,
    /// When to reconcile again after the step; `None`: only on change.
    pub requeue_after: Option<Duration>,
    /// Kubernetes events to publish (failures to publish are not errors).
    pub events: Vec<Event>,
    /// Events said once: one that this process published already, word for
    /// word, is not published again (a long task's `TaskStarted`, which
    /// every look at it while it runs finds to say).
    pub announced: Vec<Event>,
    /// Data for the `writeConnectionSecretToRef` Secret, when set and known.
    pub connection: Option<BTreeMap<String, String>>,
    /// The task this pass saw end, for the metrics.
    pub finished_task: Option<FinishedTask>,
    /// The task a dispatching step starts, recorded by [`super::settle`]
    /// once Proxmox answered with its UPID.
    pub(super) pending_task: Option<InFlightTask>,
}

impl From<Plan<LocalStep>> for Plan {
    fn from(plan: Plan<LocalStep>) -> Self {
        Self {
            step: plan.step.into(),
            status: plan.status,
            requeue_after: plan.requeue_after,
            events: plan.events,
            announced: plan.announced,
            connection: plan.connection,
            finished_task: plan.finished_task,
            pending_task: plan.pending_task,
        }
    }
}

/// A task that ended, as the metrics count it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedTask {
    /// Proxmox task type (`qmcreate`, ...).
    pub type_: String,
    /// `OK` or `WARNINGS: n`.
    pub succeeded: bool,
    /// From its start (as recorded in the status) to this pass.
    pub elapsed: Duration,
}

/// The one action of a pass, by where it acts. Every variant is something
/// the glue carries out as it is: nothing is resolved or rewritten after
/// the plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A write of the ProxmoxVM's metadata.
    Kube(KubeWrite),
    /// A Proxmox call that starts a task.
    Pve(PveCall),
    /// A synchronous write of the VM's HA configuration (no task).
    Ha(HaCall),
    /// A synchronous write of the VM's firewall (no task).
    Firewall(super::firewall::FirewallWrite),
    /// A synchronous move of the VM into its pool (no task).
    Pool(super::pool::PoolMove),
    /// Nothing beyond writing the status.
    Idle(Idle),
}

impl Step {
    /// The step's name, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Kube(w) => w.name(),
            Self::Pve(c) => c.name(),
            Self::Ha(_) => "ConfigureHa",
            Self::Firewall(_) => "ConfigureFirewall",
            Self::Pool(_) => "MovePool",
            Self::Idle(i) => i.name(),
        }
    }

    /// The Proxmox call, if the step starts a task.
    pub fn pve(&self) -> Option<&PveCall> {
        match self {
            Self::Pve(call) => Some(call),
            Self::Kube(_) | Self::Ha(_) | Self::Firewall(_) | Self::Pool(_) | Self::Idle(_) => None,
        }
    }

    /// Whether carrying out the step sends anything to Proxmox.
    pub fn reaches_proxmox(&self) -> bool {
        match self {
            Self::Pve(_) | Self::Ha(_) | Self::Firewall(_) | Self::Pool(_) => true,
            Self::Kube(_) | Self::Idle(_) => false,
        }
    }

    /// What a failure of the step is recorded as (for backoff), if the step
    /// changes anything on Proxmox.
    pub fn action(&self) -> Option<TaskAction> {
        match self {
            Self::Pve(call) => Some(call.action()),
            Self::Ha(_) => Some(TaskAction::ConfigureHa),
            Self::Firewall(_) => Some(TaskAction::ConfigureFirewall),
            Self::Pool(_) => Some(TaskAction::MovePool),
            Self::Kube(_) | Self::Idle(_) => None,
        }
    }
}

/// What [`super::preflight`] may decide: anything but a Proxmox call.
#[derive(Clone, Debug, PartialEq)]
pub enum LocalStep {
    /// A write of the ProxmoxVM's metadata.
    Kube(KubeWrite),
    /// Nothing beyond writing the status.
    Idle(Idle),
}

impl From<LocalStep> for Step {
    fn from(step: LocalStep) -> Self {
        match step {
            LocalStep::Kube(w) => Self::Kube(w),
            LocalStep::Idle(i) => Self::Idle(i),
        }
    }
}

impl From<KubeWrite> for Step {
    fn from(w: KubeWrite) -> Self {
        Self::Kube(w)
    }
}

impl From<PveCall> for Step {
    fn from(c: PveCall) -> Self {
        Self::Pve(c)
    }
}

impl From<HaCall> for Step {
    fn from(c: HaCall) -> Self {
        Self::Ha(c)
    }
}

impl From<super::firewall::FirewallWrite> for Step {
    fn from(c: super::firewall::FirewallWrite) -> Self {
        Self::Firewall(c)
    }
}

impl From<Idle> for Step {
    fn from(i: Idle) -> Self {
        Self::Idle(i)
    }
}

impl From<KubeWrite> for LocalStep {
    fn from(w: KubeWrite) -> Self {
        Self::Kube(w)
    }
}

impl From<Idle> for LocalStep {
    fn from(i: Idle) -> Self {
        Self::Idle(i)
    }
}

/// A metadata write. Each carries the resourceVersion the pass read, so a
/// write based on a stale object fails with 409 (two writers cannot both
/// believe they recorded a VMID).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubeWrite {
    /// Set `crossplane.io/external-name` to `vmid` and, when
    /// `create_pending`, `crossplane.io/external-create-pending` to now and
    /// add the finalizer (a create may follow, whose VM deletion must clean
    /// up). A write of its own before the create: the status, a
    /// subresource, cannot carry metadata (docs/architecture.md, "The
    /// Kubernetes writes of a VM's creation").
    RecordExternalName {
        /// The VMID.
        vmid: u32,
        /// Also mark a create as possibly sent from now on.
        create_pending: bool,
    },
    /// Remove `crossplane.io/external-name` and the create annotations; the
    /// allocated VMID turned out to belong to another VM.
    ForgetExternalName,
    /// Add the finalizer.
    AddFinalizer,
    /// Set `crossplane.io/external-create-succeeded` to now. A write of its
    /// own: the VMID's write came before the create, and the status is
    /// another subresource (its pass leaves the create's end to the next
    /// pass, so it costs no status write: see `converge::record_creation_first`).
    RecordCreateSucceeded,
    /// Remove the finalizer; the resource may go.
    RemoveFinalizer,
    /// Fill unset `spec.forProvider` fields (`LateInitialize`): this merge
    /// patch of `forProvider`, sent with its own field manager.
    LateInitialize(Box<serde_json::Value>),
}

impl KubeWrite {
    /// The write's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::RecordExternalName { .. } => "RecordExternalName",
            Self::ForgetExternalName => "ForgetExternalName",
            Self::AddFinalizer => "AddFinalizer",
            Self::RecordCreateSucceeded => "RecordCreateSucceeded",
            Self::RemoveFinalizer => "RemoveFinalizer",
            Self::LateInitialize(_) => "LateInitialize",
        }
    }

    /// The write in words, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            Self::RecordExternalName { .. } => "record the VMID",
            Self::ForgetExternalName => "forget the VMID",
            Self::AddFinalizer => "add the finalizer",
            Self::RecordCreateSucceeded => "record the successful create",
            Self::RemoveFinalizer => "remove the finalizer",
            Self::LateInitialize(_) => "fill unset spec fields from the VM",
        }
    }
}

/// A Proxmox call that starts a task (its UPID is recorded in the status).
#[derive(Clone, Debug, PartialEq)]
pub enum PveCall {
    /// `POST /nodes/{node}/storage/{storage}/download-url` (`content=import`).
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
    /// `POST /nodes/{node}/qemu` with `vmid` and `params`.
    CreateVm {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// Every create parameter except `vmid`.
        params: Box<Params>,
    },
    /// `POST /nodes/{source_node}/qemu/{template}/clone`.
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
    /// `POST /nodes/{node}/qemu` with `archive` (a `qmrestore` task), never
    /// `force`: Proxmox refuses it when the VMID exists.
    RestoreVm {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// The archive's volume ID.
        archive: String,
        /// `storage` for the disks.
        storage: Option<String>,
        /// `pool`.
        pool: Option<String>,
        /// `name`, over the archived config.
        name: String,
        /// `description` with the owner marker, over the archived config.
        description: String,
    },
    /// `POST /nodes/{node}/qemu/{vmid}/config` (async).
    Configure {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// Keys to set and delete, and the digest they were computed from.
        changes: Box<ConfigChanges>,
    },
    /// `PUT /nodes/{node}/qemu/{vmid}/resize` to an absolute size.
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
    /// `POST .../status/start`.
    Start {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
    },
    /// `POST .../status/shutdown` with `timeout` (no `forceStop`).
    Shutdown {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// Seconds to wait for the guest.
        timeout: Duration,
    },
    /// `POST .../status/stop`.
    Stop {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
    },
    /// `DELETE /nodes/{node}/qemu/{vmid}?purge=1&destroy-unreferenced-disks=1`.
    Destroy {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
    },
    /// `POST .../migrate` to `target` (see [`super::motion`]).
    Migrate {
        /// The node the VM is on.
        node: String,
        /// VMID.
        vmid: u32,
        /// The node `spec.forProvider.node` names.
        target: String,
        /// Live (the VM runs).
        online: bool,
    },
    /// `POST /nodes/{node}/qemu/{vmid}/template`.
    ConvertToTemplate {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
    },
    /// `POST .../move_disk` of `slot` to `storage`, the old volume deleted.
    MoveDisk {
        /// Node.
        node: String,
        /// VMID.
        vmid: u32,
        /// Disk slot.
        slot: String,
        /// Target storage.
        storage: String,
        /// The config digest the move was decided from.
        digest: Option<String>,
    },
    /// `POST .../storage/{storage}/upload` of a NoCloud seed ISO built
    /// from `files` (see [`super::seed`]).
    UploadSeed {
        /// Node.
        node: String,
        /// Storage (content `iso`).
        storage: String,
        /// The ISO's file name.
        filename: String,
        /// Its files (`Debug` shows names and sizes only).
        files: crate::reconcile::vm::nocloud::SeedFiles,
    },
    /// `DELETE .../storage/{storage}/content/{volume}` of a seed ISO no
    /// longer attached.
    DeleteVolume {
        /// Node.
        node: String,
        /// Storage.
        storage: String,
        /// Volume ID.
        volume: String,
    },
}

impl PveCall {
    /// What the task is started for.
    pub fn action(&self) -> TaskAction {
        match self {
            Self::DownloadImage { .. } => TaskAction::DownloadImage,
            Self::CreateVm { .. } => TaskAction::Create,
            Self::CloneVm { .. } => TaskAction::Clone,
            Self::RestoreVm { .. } => TaskAction::Restore,
            Self::Configure { .. } => TaskAction::Configure,
            Self::ResizeDisk { .. } => TaskAction::ResizeDisk,
            Self::Start { .. } => TaskAction::Start,
            Self::Shutdown { .. } => TaskAction::Shutdown,
            Self::Stop { .. } => TaskAction::Stop,
            Self::Destroy { .. } => TaskAction::Destroy,
            Self::Migrate { .. } => TaskAction::Migrate,
            Self::MoveDisk { .. } => TaskAction::MoveDisk,
            Self::UploadSeed { .. } => TaskAction::UploadSeed,
            Self::DeleteVolume { .. } => TaskAction::DeleteVolume,
            Self::ConvertToTemplate { .. } => TaskAction::Template,
        }
    }

    /// The call's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::DownloadImage { .. } => "DownloadImage",
            Self::CreateVm { .. } => "CreateVm",
            Self::CloneVm { .. } => "CloneVm",
            Self::RestoreVm { .. } => "RestoreVm",
            Self::Configure { .. } => "Configure",
            Self::ResizeDisk { .. } => "ResizeDisk",
            Self::Start { .. } => "Start",
            Self::Shutdown { .. } => "Shutdown",
            Self::Stop { .. } => "Stop",
            Self::Destroy { .. } => "Destroy",
            Self::Migrate { .. } => "Migrate",
            Self::MoveDisk { .. } => "MoveDisk",
            Self::UploadSeed { .. } => "UploadSeed",
            Self::DeleteVolume { .. } => "DeleteVolume",
            Self::ConvertToTemplate { .. } => "ConvertToTemplate",
        }
    }

    /// The node the task runs on (a clone runs on the template's node).
    pub fn node(&self) -> &str {
        match self {
            Self::DownloadImage { node, .. }
            | Self::CreateVm { node, .. }
            | Self::RestoreVm { node, .. }
            | Self::Configure { node, .. }
            | Self::ResizeDisk { node, .. }
            | Self::Start { node, .. }
            | Self::Shutdown { node, .. }
            | Self::Stop { node, .. }
            | Self::Destroy { node, .. }
            | Self::Migrate { node, .. }
            | Self::MoveDisk { node, .. }
            | Self::UploadSeed { node, .. }
            | Self::DeleteVolume { node, .. }
            | Self::ConvertToTemplate { node, .. } => node,
            Self::CloneVm { source_node, .. } => source_node,
        }
    }

    /// What the task works on, for the status: the image volume of a
    /// download, the slot of a resize.
    pub fn target(&self) -> Option<String> {
        match self {
            Self::DownloadImage {
                storage, file_name, ..
            } => Some(format!("{storage}:import/{file_name}")),
            Self::ResizeDisk { slot, .. } | Self::MoveDisk { slot, .. } => Some(slot.clone()),
            Self::Migrate { target, .. } => Some(target.clone()),
            Self::UploadSeed {
                storage, filename, ..
            } => Some(format!("{storage}:iso/{filename}")),
            Self::DeleteVolume { volume, .. } => Some(volume.clone()),
            Self::CreateVm { .. }
            | Self::CloneVm { .. }
            | Self::RestoreVm { .. }
            | Self::Configure { .. }
            | Self::Start { .. }
            | Self::Shutdown { .. }
            | Self::Stop { .. }
            | Self::Destroy { .. }
            | Self::ConvertToTemplate { .. } => None,
        }
    }
}

/// Steps that write nothing but the status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
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
    /// A cheap look at an idle VM found something to do: look again in
    /// full at once, changing nothing meanwhile.
    LookCloser,
}

impl Idle {
    /// The step's name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::SaveStatus => "SaveStatus",
            Self::ObserveTask => "ObserveTask",
            Self::Wait => "Wait",
            Self::Refuse => "Refuse",
            Self::Paused => "Paused",
            Self::UpToDate => "UpToDate",
            Self::LookCloser => "LookCloser",
        }
    }
}

/// Everything a create sends besides `vmid`: the VM's settings in
/// pve-client's typed model, and the pool to add it to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params {
    /// Config settings (the password among them, as a secret).
    pub settings: VmParams,
    /// `pool`.
    pub pool: Option<String>,
}

/// A config update: the settings to set (typed), keys to delete, and the
/// `digest` of the config the changes were computed from, so Proxmox
/// refuses the update if someone changed the config meanwhile.
pub use pve_client::vm::ConfigUpdate as ConfigChanges;

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

/// Converts a timestamp for the status.
pub(super) fn time(ts: Timestamp) -> Time {
    Time(ts)
}
