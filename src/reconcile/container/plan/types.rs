//! What the plan decides from and what it decides.

use std::time::Duration;

use pve_client::lxc::{ContainerConfig, ContainerUpdate, CreateContainer, OciPull};
use pve_client::vzdump::Restore;

use crate::api::condition::Reason;
use crate::api::container::ContainerTaskAction;
use crate::api::container::ProxmoxContainerStatus;
use crate::api::provider_config::ContainerPolicy;
use crate::reconcile::common::event::Event;
use crate::reconcile::common::firewall::{FirewallCall, FirewallView};
use crate::reconcile::common::grants::{Placement, VmidGrant};
use crate::reconcile::common::images::NamedImage;
use crate::reconcile::common::provider::ProviderState;
use crate::reconcile::common::restore::BackupLookup;
use crate::reconcile::common::views::HostView;

/// The container as the pass found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Container {
    /// Not looked at (no VMID yet, or nothing to look with).
    Unknown,
    /// No guest has the VMID.
    Absent,
    /// The VMID belongs to a guest that is not a container (a VM).
    Taken(String),
    /// The container, on `node`.
    Present(Seen),
}

/// An existing container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub node: String,
    pub config: ContainerConfig,
    pub running: bool,
}

/// The recorded task, as Proxmox tells.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskSeen {
    Running,
    Succeeded,
    Failed(String),
}

/// What the pass observed, for the plan to decide from.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// The provider config: `Err` says why it cannot be used.
    pub connection: Result<(), ProviderState>,
    /// The resync interval of the config.
    pub poll: Duration,
    /// The config's `containerPolicy`: what a create may ask for beyond
    /// an unprivileged container.
    pub policy: ContainerPolicy,
    /// A VMID reserved for this resource (asked for without an
    /// external name and without `vmid`).
    pub vmid: Option<VmidGrant>,
    /// Where to create it (asked for without `node`).
    pub placement: Option<Placement>,
    pub container: Container,
    /// The recorded task's state.
    pub task: Option<TaskSeen>,
    /// A task of this VMID (or this OCI pull) the node lists as running.
    pub busy: Option<String>,
    /// Whether the OCI image's file is on the node's storage (looked at
    /// only before a create from an image).
    pub template_present: Option<bool>,
    /// The Proxmox VE version (`Proxmox VE 8.4.1`) when it has no
    /// oci-registry-pull (before 9.1) and a pull is due; `None` otherwise.
    pub oci_unsupported: Option<String>,
    /// Why the provider config's `downloadPolicy` refuses `template.oci`'s
    /// registry (looked at only before a create); nothing is pulled.
    pub download_refused: Option<String>,
    /// The ProxmoxImage `template.image` names, from the image cache
    /// (looked at only before a create).
    pub image: Option<NamedImage>,
    /// Whether the password Secret's key could be read (`Err`: why not,
    /// and the reason to report); `None`: no password asked for, or not
    /// needed this pass.
    pub password: Option<Result<(), (Reason, String)>>,
    /// The node the container is to be created on, as a create is checked
    /// against it (looked at only before a create).
    pub host: Option<HostView>,
    /// Proxmox could not be asked (why): nothing is decided this pass.
    pub proxmox: Option<String>,
    /// The container's firewall, read when the spec declares one and the
    /// container is there.
    pub firewall: Option<FirewallView>,
    /// The pool the container is in (`Some(None)`: none), looked at when
    /// the spec names one and the cluster view lists the container.
    pub pool: Option<Option<String>>,
    /// The ProxmoxBackup `restore.backupRef` names, read afresh (looked at
    /// only before a restore).
    pub backup: Option<BackupLookup>,
    /// The Proxmox IDs of other namespaces' ProxmoxVNets (from their
    /// cache: no request), which no NIC of this container may name.
    pub foreign_vnets: std::collections::BTreeSet<String>,
}

impl Observation {
    /// Nothing observed yet, with the config's resync interval.
    pub fn unobserved(poll: Duration) -> Self {
        Self {
            connection: Ok(()),
            poll,
            policy: ContainerPolicy::default(),
            vmid: None,
            placement: None,
            container: Container::Unknown,
            task: None,
            busy: None,
            template_present: None,
            oci_unsupported: None,
            download_refused: None,
            image: None,
            password: None,
            host: None,
            proxmox: None,
            firewall: None,
            pool: None,
            backup: None,
            foreign_vnets: Default::default(),
        }
    }
}

/// The one step a pass takes.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing to do now.
    Idle,
    AddFinalizer,
    RemoveFinalizer,
    /// Fills unset `spec.forProvider` fields (`LateInitialize`): a merge
    /// patch of `forProvider`, written with its own field manager.
    LateInitialize(Box<serde_json::Value>),
    /// Records the VMID in the external-name annotation (before any create).
    RecordVmid(u32),
    /// Forgets an allocated VMID another guest took before this container
    /// was created (the annotations go; another VMID is allocated next).
    ForgetVmid(u32),
    /// Pulls the OCI image into `storage` on `node`.
    Pull {
        node: String,
        storage: String,
        pull: OciPull,
    },
    /// Creates the container (the pass adds the password).
    Create {
        node: String,
        create: Box<CreateContainer>,
    },
    /// Restores the container from a backup archive (`vzrestore`).
    Restore {
        node: String,
        restore: Box<Restore>,
    },
    /// Writes the container's firewall options or one rule correction
    /// (synchronous).
    Firewall {
        node: String,
        vmid: u32,
        call: FirewallCall,
    },
    /// Corrects drift (synchronous).
    Configure {
        node: String,
        vmid: u32,
        update: ContainerUpdate,
    },
    Start {
        node: String,
        vmid: u32,
    },
    Shutdown {
        node: String,
        vmid: u32,
    },
    Stop {
        node: String,
        vmid: u32,
    },
    /// Destroys it with `purge` and `destroy-unreferenced-disks`.
    Destroy {
        node: String,
        vmid: u32,
    },
    /// Into the pool the spec names (synchronous; `allow_move` when it is
    /// in another one now).
    MovePool {
        pool: String,
        vmid: u32,
        allow_move: bool,
    },
}

impl Step {
    /// The action a task of this step is recorded under, with the node it
    /// runs on; `None` for steps that start no task.
    pub fn task(&self) -> Option<(ContainerTaskAction, &str)> {
        match self {
            Step::Pull { node, .. } => Some((ContainerTaskAction::DownloadImage, node)),
            Step::Create { node, .. } => Some((ContainerTaskAction::Create, node)),
            Step::Restore { node, .. } => Some((ContainerTaskAction::Restore, node)),
            Step::Start { node, .. } => Some((ContainerTaskAction::Start, node)),
            Step::Shutdown { node, .. } => Some((ContainerTaskAction::Shutdown, node)),
            Step::Stop { node, .. } => Some((ContainerTaskAction::Stop, node)),
            Step::Destroy { node, .. } => Some((ContainerTaskAction::Destroy, node)),
            Step::Idle
            | Step::LateInitialize(_)
            | Step::AddFinalizer
            | Step::RemoveFinalizer
            | Step::RecordVmid(_)
            | Step::ForgetVmid(_)
            | Step::Firewall { .. }
            | Step::Configure { .. }
            | Step::MovePool { .. } => None,
        }
    }
}

/// What a pass decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub step: Step,
    pub status: ProxmoxContainerStatus,
    pub events: Vec<Event>,
    /// When to look again.
    pub requeue: Duration,
}

/// What carrying out the step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done without a task.
    Done,
    /// A task started.
    Started { upid: String, type_: String },
    /// Proxmox or Kubernetes refused (the message is for people).
    Failed(String),
}
