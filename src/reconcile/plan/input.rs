//! What the plan is given: the resource, the provider config's state and
//! what the glue observed on Proxmox, in domain terms (no client types).
//!
//! The glue fills an [`Observation`] as [`Needs`] asks (see
//! [`super::preflight`]). Observe the in-flight task *before* the VM, so the
//! VM is at least as fresh as the task's outcome.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

pub use pve_client::TaskOutcome;

use super::output::Sensitive;
use crate::api::{
    ProxmoxVM,
    provider_config::{Limits, Timing},
};

/// Everything [`super::plan`] decides from.
#[derive(Clone, Debug)]
pub struct PlanInput<'a> {
    /// The resource as last read (metadata, spec and status).
    pub vm: &'a ProxmoxVM,
    /// The provider config, resolved; `None` before it is (see
    /// [`super::preflight`]).
    pub provider: Option<ProviderState>,
    /// What Proxmox showed, as [`Needs`] asked.
    pub observed: Observation,
    /// The time of this pass.
    pub now: Timestamp,
}

impl<'a> PlanInput<'a> {
    /// The input of [`super::preflight`]: the resource alone.
    pub fn unresolved(vm: &'a ProxmoxVM, now: Timestamp) -> Self {
        Self {
            vm,
            provider: None,
            observed: Observation::default(),
            now,
        }
    }
}

/// The provider config named by `spec.providerConfigRef`, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderState {
    /// Config and credentials read, Proxmox answered the observation.
    Ready {
        /// Parsed durations of the config.
        timing: Timing,
        /// Its concurrency limits.
        limits: Limits,
    },
    /// The named ProviderConfig/ClusterProviderConfig does not exist.
    NotFound {
        /// E.g. `ClusterProviderConfig "default" not found`.
        message: String,
    },
    /// It exists but cannot be used: credentials Secret missing, endpoint
    /// unreachable, authentication refused, observation failed.
    Unusable {
        /// What went wrong.
        message: String,
    },
}

/// What the glue should look at before calling [`super::plan`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Look up this VMID cluster-wide (`/cluster/resources`), then on its
    /// node: `status/current`, `config` + `pending` (unless locked
    /// `create`/`clone`), and the guest agent's interfaces when running with
    /// the agent enabled.
    pub vmid: Option<u32>,
    /// Status of this task (and its log tail when it stopped).
    pub task: Option<TaskRef>,
    /// List the active tasks on this node (`/nodes/{node}/tasks?source=active`);
    /// the VM's node when it exists.
    pub active_tasks_on: Option<String>,
    /// Whether these image volumes exist on the node (storage content).
    pub images: Vec<ImageRef>,
    /// List nodes (online state, free memory) for placement.
    pub nodes: bool,
    /// Resolve the clone template (by VMID or by name) cluster-wide.
    pub template: Option<TemplateRef>,
    /// Read the cloud-init password Secret (name, key) in the VM's namespace.
    pub password: Option<(String, String)>,
    /// Count the in-flight imports and clones of other ProxmoxVMs on this node.
    pub load_on: Option<String>,
}

/// A task to look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRef {
    /// The UPID.
    pub upid: String,
    /// Its node.
    pub node: String,
}

/// An image volume to look for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// Node whose storage to list.
    pub node: String,
    /// Storage ID, e.g. `local`.
    pub storage: String,
    /// Volume ID, e.g. `local:import/jammy-abcdef012345.qcow2`.
    pub volume: String,
}

/// The clone template, as the spec names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateRef {
    /// By VMID.
    Vmid(u32),
    /// By name (must be unique).
    Name(String),
}

/// What the glue saw on Proxmox. Fields the [`Needs`] did not ask for stay
/// at their defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observation {
    /// The VM named by the VMID.
    pub vm: VmState,
    /// The in-flight task from the status, if there is one.
    pub task: Option<TaskState>,
    /// Active tasks on the node of interest.
    pub active_tasks: Vec<ActiveTask>,
    /// Image volumes asked for: `true` when present.
    pub images: BTreeMap<String, bool>,
    /// Placement candidates.
    pub nodes: Vec<NodeCandidate>,
    /// The clone template.
    pub template: Option<TemplateLookup>,
    /// The cloud-init password Secret.
    pub password: Option<PasswordState>,
    /// Imports and clones other ProxmoxVMs have in flight on the node.
    pub load: NodeLoad,
}

/// Whether and how the VM exists.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum VmState {
    /// Not looked up (no VMID yet).
    #[default]
    Unknown,
    /// No VM has this VMID.
    Absent,
    /// A VM has this VMID.
    Present(ObservedVm),
}

/// A VM as Proxmox shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedVm {
    /// Node it is on.
    pub node: String,
    /// Power state from `status/current` (not the 10 s-stale cluster view).
    pub power: Power,
    /// Config lock (`create`, `clone`, `backup`, ...).
    pub lock: Option<String>,
    /// Whether it is a template.
    pub template: bool,
    /// Its config; `None` while locked `create`/`clone` (Proxmox then shows
    /// only the lock) or when it could not be read.
    pub config: Option<VmConfig>,
    /// The guest agent's answer.
    pub agent: AgentState,
}

impl ObservedVm {
    /// Locked by a create or clone that has not finished.
    pub fn creation_locked(&self) -> bool {
        matches!(self.lock.as_deref(), Some("create" | "clone"))
    }
}

/// Power state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Power {
    /// Running.
    Running,
    /// Stopped.
    Stopped,
    /// Paused or suspended (`qmpstatus`).
    Paused,
    /// Proxmox cannot tell (node offline).
    Unknown,
}

/// A VM config as `GET .../config` and `.../pending` return it: values
/// exactly as Proxmox sends them (`sshkeys` still URL-encoded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmConfig {
    /// Current values, including `digest`.
    pub current: BTreeMap<String, String>,
    /// Pending values: `Some(new)` or `None` for a pending deletion.
    pub pending: BTreeMap<String, Option<String>>,
}

/// The guest agent's answer to `network-get-interfaces`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AgentState {
    /// Not asked (agent disabled in the config, or VM not running).
    #[default]
    NotAsked,
    /// Asked; it did not answer (`QEMU guest agent is not running`, timeout).
    NoAnswer(String),
    /// Its interfaces.
    Interfaces(Vec<GuestInterface>),
}

/// One guest network interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestInterface {
    /// Name in the guest (`eth0`, `lo`).
    pub name: String,
    /// Hardware address.
    pub mac: Option<String>,
    /// Addresses without prefix length.
    pub addresses: Vec<String>,
}

/// The state of the in-flight task.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskState {
    /// Still running; progress in percent when the log tells.
    Running {
        /// Percent done.
        progress: Option<u8>,
    },
    /// Stopped: succeeded (possibly with warnings) or failed, with the log
    /// lines that say why.
    Finished(TaskOutcome),
    /// Proxmox answered `no such task` (not visible yet, or gone).
    NotFound,
    /// The status could not be read.
    Unreadable(String),
}

/// A task Proxmox lists as active on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveTask {
    /// The UPID.
    pub upid: String,
    /// Task type (`qmcreate`, `download`, `vzdump`, ...).
    pub type_: String,
    /// Task ID: the VMID, or the file name for a download.
    pub id: String,
    /// Node it runs on.
    pub node: String,
    /// Start time from the UPID.
    pub started_at: Timestamp,
}

/// A node the VM could be placed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCandidate {
    /// Node name.
    pub name: String,
    /// Whether it is online.
    pub online: bool,
    /// Free memory in bytes.
    pub free_memory: u64,
}

/// The clone template, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateLookup {
    /// Found.
    Found {
        /// Its VMID.
        vmid: u32,
        /// Its node.
        node: String,
        /// Whether it is a template (cloning a plain VM works too).
        template: bool,
    },
    /// No VM matches.
    NotFound,
    /// Several VMs have the name.
    Ambiguous(Vec<u32>),
}

/// The cloud-init password Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordState {
    /// The Secret or its key is missing.
    Missing(String),
    /// The password and the Secret's resourceVersion.
    Available {
        /// The password.
        value: Sensitive,
        /// The Secret's resourceVersion, to notice changes.
        version: String,
    },
}

/// Work other ProxmoxVMs have in flight on one node (from the glue's cache
/// of ProxmoxVM statuses), for the per-node limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeLoad {
    /// Creates with disk imports in flight.
    pub imports: u32,
    /// Clones in flight.
    pub clones: u32,
}
