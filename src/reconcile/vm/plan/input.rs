//! What the plan is given: the resource, the provider config's state and
//! what the glue observed on Proxmox, in domain terms (no client types).
//!
//! The glue fills an [`Observation`] as [`Needs`] asks (see
//! [`super::preflight`]). Observe the in-flight task *before* the VM, so the
//! VM is at least as fresh as the task's outcome.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

pub use pve_client::{TaskOutcome, Upid};

pub use crate::reconcile::common::grants::{
    Heavy, Placement, PlacementRequest, SlotGrant, VmidGrant,
};
pub use crate::reconcile::common::images::{ImageLookup, ImageTemplate, NamedImage};
pub use crate::reconcile::common::look::Depth;
pub use crate::reconcile::common::provider::ProviderState;
pub use crate::reconcile::common::restore::BackupLookup;
pub use crate::reconcile::common::tasks::{ActiveTask, TaskState, started_at};
pub use crate::reconcile::common::views::{HostView, StorageView};

use super::output::Sensitive;
use crate::api::ProxmoxVM;

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
    /// Why Proxmox could not be observed this pass, when it could not (a
    /// transient error: the config itself is usable).
    pub observe_error: Option<ObserveError>,
    /// The API server refused a request the pass needed (RBAC).
    pub forbidden: Option<Forbidden>,
}

impl<'a> PlanInput<'a> {
    /// The input of [`super::preflight`]: the resource alone.
    pub fn unresolved(vm: &'a ProxmoxVM, now: Timestamp) -> Self {
        Self {
            vm,
            provider: None,
            observed: Observation::default(),
            now,
            observe_error: None,
            forbidden: None,
        }
    }
}

/// A Kubernetes request the provider's RBAC does not allow (HTTP 403),
/// needed for this resource: reported on it and retried with backoff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forbidden {
    /// The API server's words: the user, verb, resource, namespace and name
    /// (`configmaps "x" is forbidden: User "..." cannot get resource
    /// "configmaps" ...`).
    pub message: String,
    /// When to try again (the glue's per-resource backoff).
    pub retry_in: std::time::Duration,
}

/// An observation that failed for a reason that may pass (HTTP 5xx, 595,
/// 596, a reset, a timeout): reported as what it is and retried with
/// backoff, never as an unusable provider config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObserveError {
    /// What failed, for people.
    pub message: String,
    /// When to try again (the glue's per-resource backoff).
    pub retry_in: std::time::Duration,
}

/// What the glue should look at before calling [`super::plan`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Reserve a free VMID for the resource (it has none recorded or named):
    /// see [`Observation::allocated_vmid`].
    pub allocate_vmid: bool,
    /// Look up this VMID cluster-wide (`/cluster/resources`), then on its
    /// node: `status/current`, `config` + `pending` (unless locked
    /// `create`/`clone`), and the guest agent's interfaces when running with
    /// the agent enabled.
    pub vmid: Option<u32>,
    /// Status of the task recorded in the status (and its log tail when it
    /// stopped): its UPID, parsed from the status once, here.
    pub task: Option<Upid>,
    /// List the active tasks on this node (`/nodes/{node}/tasks?source=active`);
    /// the VM's node when it exists.
    pub active_tasks_on: Option<String>,
    /// Whether these image volumes exist on the node (storage content).
    pub images: Vec<ImageRef>,
    /// The ProxmoxImages the disks name (`disks[].image.name`), read from
    /// the image controller's cache.
    pub named_images: Vec<String>,
    /// The ProxmoxBackup `restore.backupRef` names (about to be restored):
    /// read from Kubernetes for its archive.
    pub backup: Option<String>,
    /// Choose a node for the VM (none is recorded yet).
    pub placement: Option<PlacementRequest>,
    /// Resolve the clone template (by VMID or by name) cluster-wide.
    pub template: Option<TemplateRef>,
    /// Look up, in the cluster view, the VMs whose disks the spec's disks
    /// import (`importFrom: ...vm-N-...`): whether one may be copied is
    /// the clone rule's to say. Not needed by a cheap look (it never adds
    /// a disk).
    pub import_sources: Vec<u32>,
    /// Read the cloud-init password Secret (name, key) in the VM's namespace.
    pub password: Option<(String, String)>,
    /// Take a per-node import or clone slot for the dispatch this pass may
    /// make.
    pub slot: Option<SlotRequest>,
    /// The resource looks idle (Ready, Synced, nothing in flight, its
    /// generation acted on): the VM may be checked cheaply, provided a plan
    /// from that check only ever concludes "up to date".
    pub idle: bool,
    /// Read the VM's HA resource and its node-affinity rule or group.
    pub ha: bool,
    /// Read the VM's firewall (options and rules) and resolve the
    /// security groups and IP sets its rules name: only when the spec
    /// declares a firewall, in a pass that finds the VM.
    pub firewall: bool,
    /// See which resource pool the VM is in.
    pub pool: bool,
    /// Read the `customCloudInit` data and the VM's seed ISOs.
    pub seed: bool,
    /// If the VM is a template, list the linked clones of its base disks
    /// (the resource is being deleted).
    pub linked_clones: bool,
    /// What the VM's node has (CPUs, memory, storages, bridges), once the
    /// VM is known to be absent and its node is known: the limits a create
    /// is checked against ([`Observation::host`]).
    pub host: bool,
}

/// A slot to take before dispatching heavy work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRequest {
    /// The node; `None`: the clone template's node, once looked up.
    pub node: Option<String>,
    /// What kind of work.
    pub kind: Heavy,
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
    /// The template of a ProxmoxImage (`clone.image`) on the VM's node.
    Image {
        /// The image, in the VM's namespace.
        name: String,
        /// The node the VM is to be created on, once known: the image's
        /// template there is the one cloned.
        node: Option<String>,
    },
}

/// What the glue saw on Proxmox. Fields the [`Needs`] did not ask for stay
/// at their defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observation {
    /// How the VM was looked at.
    pub depth: Depth,
    /// The VM named by the VMID.
    pub vm: VmState,
    /// The in-flight task from the status, if there is one.
    pub task: Option<TaskState>,
    /// Active tasks on the node of interest.
    pub active_tasks: Vec<ActiveTask>,
    /// Image volumes asked for: `true` when present.
    pub images: BTreeMap<String, bool>,
    /// The ProxmoxImages asked for, by name.
    pub named_images: BTreeMap<String, NamedImage>,
    /// The ProxmoxBackup of [`Needs::backup`].
    pub backup: Option<BackupLookup>,
    /// The VMID the scheduler reserved, when [`Needs::allocate_vmid`]
    /// asked.
    pub allocated_vmid: Option<VmidGrant>,
    /// The node chosen for the VM, when [`Needs::placement`] asked.
    pub placement: Option<Placement>,
    /// The clone template.
    pub template: Option<TemplateLookup>,
    /// The ProxmoxImage of `clone.image`, when [`Needs::template`] names
    /// one.
    pub image: Option<ImageLookup>,
    /// The VMs of [`Needs::import_sources`] as the cluster view shows them
    /// (`Found` or `NotFound`).
    pub import_sources: BTreeMap<u32, TemplateLookup>,
    /// The cloud-init password Secret.
    pub password: Option<PasswordState>,
    /// The per-node slot, when [`Needs::slot`] asked.
    pub slot: Option<SlotGrant>,
    /// The VM's HA configuration, when [`Needs::ha`] asked.
    pub ha: Option<HaView>,
    /// The VM's firewall, when [`Needs::firewall`] asked and the VM is
    /// there.
    pub firewall: Option<super::firewall::FirewallView>,
    /// The VM's pool membership, when the spec names a pool.
    pub pool: Option<super::pool::PoolView>,
    /// The seed, when [`Needs::seed`] asked.
    pub seed: Option<SeedView>,
    /// VMIDs of the linked clones of the template's base disks, when
    /// [`Needs::linked_clones`] asked and the VM is a template.
    pub linked_clones: Option<Vec<u32>>,
    /// The node the VM is to be created on, when [`Needs::host`] asked and
    /// the VM is absent.
    pub host: Option<HostView>,
    /// The Proxmox IDs of other namespaces' ProxmoxVNets (from their
    /// cache: no request), which no NIC of this VM may name.
    pub foreign_vnets: std::collections::BTreeSet<String>,
    /// Disk image URLs whose host name resolves (on the provider's side)
    /// to an address the config's `downloadPolicy` refuses: URL → why,
    /// naming the field. Looked up only while an image volume is missing.
    pub resolved_refusals: BTreeMap<String, String>,
    /// Disk image URL → the size Proxmox reports for it and its storage's
    /// free space: for the image the plan would download next, read only
    /// in a pass that may send it (and when both are known).
    pub rooms: BTreeMap<String, crate::reconcile::downloads::Room>,
}

/// The `customCloudInit` seed, when [`Needs::seed`] asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedView {
    /// The node whose storage was listed.
    pub node: String,
    /// The files, or why they could not be read.
    pub data: Result<crate::reconcile::vm::nocloud::SeedFiles, String>,
    /// The VM's seed ISOs on the storage (volume IDs).
    pub volumes: Vec<String>,
    /// The QEMU process ID of the running VM.
    pub pid: Option<u64>,
    /// Whether the seed's storage is shared by the nodes. Proxmox migrates
    /// no VM with a CD-ROM on a storage that is not (`can't migrate local
    /// disk ...: local cdrom image`).
    pub shared: bool,
}

/// The VM's HA configuration as Proxmox has it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HaView {
    /// PVE 9 or later: node affinity is a rule (else an HA group).
    pub rules: bool,
    /// The VM's HA resource, if it is one.
    pub resource: Option<HaResourceView>,
    /// The rule (PVE 9) or group (PVE 8) named for the VM, if it exists.
    pub affinity: Option<AffinityView>,
}

/// An HA resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaResourceView {
    /// Requested state.
    pub state: String,
    /// PVE 8: its group.
    pub group: Option<String>,
}

/// A node-affinity rule or HA group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AffinityView {
    /// Node names, sorted.
    pub nodes: Vec<String>,
    /// Strict (rule) or restricted (group).
    pub strict: bool,
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

impl VmConfig {
    /// Whether the current config enables the guest agent (`agent: 1`,
    /// `agent: enabled=1,...`).
    pub fn agent_enabled(&self) -> bool {
        self.current
            .get("agent")
            .is_some_and(|a| pve_client::vm::AgentConfig::parse(a).enabled)
    }
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
        /// Its pool, from the cluster view.
        pool: Option<String>,
        /// Its tags, from the cluster view.
        tags: Vec<String>,
    },
    /// No VM matches.
    NotFound,
    /// Several VMs have the name.
    Ambiguous(Vec<u32>),
    /// Not a template yet, but a ProxmoxVM of the same provider config
    /// declares it with `template: true`: it will be one (its VM is being
    /// created, configured or converted).
    Coming {
        /// That ProxmoxVM, `namespace/name`.
        resource: String,
    },
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
