//! What the shared scheduler grants a pass: a VMID, a node, a slot for
//! heavy work; decided before the plan, which only reads them.

use crate::api::vm::PlacementPolicy;

/// What placement needs to know about the VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementRequest {
    /// Nodes the VM may go to (`allowedNodes`); empty: any online node.
    pub allowed: Vec<String>,
    /// The VM's memory in bytes.
    pub memory: u64,
    /// Its vCPUs (sockets × cores): a node with fewer CPUs cannot start it.
    pub cpus: u32,
    /// How to choose among them.
    pub policy: PlacementPolicy,
    /// For `SpreadByLabel`: the label key and this resource's value of it
    /// (empty when it has none).
    pub spread_by: Option<(String, String)>,
    /// Prefer the clone template's node when it is allowed (a clone to
    /// another node needs shared storage).
    pub prefer_template_node: bool,
}

/// Heavy work that counts against a per-node limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Heavy {
    /// A create that imports disks.
    Import,
    /// A clone (counted on the template's node, where its task runs).
    Clone,
}

impl Heavy {
    /// The Proxmox task type of the work.
    pub fn task_type(self) -> &'static str {
        match self {
            Self::Import => "qmcreate",
            Self::Clone => "qmclone",
        }
    }

    /// The heavy work a task of `task_type` is, if any.
    pub fn of_task(task_type: &str) -> Option<Self> {
        [Self::Import, Self::Clone]
            .into_iter()
            .find(|kind| kind.task_type() == task_type)
    }
}

/// A VMID reserved for the resource before the plan, as placement and
/// slots are: the plan records it in `crossplane.io/external-name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmidGrant {
    /// This VMID is the resource's until the record is written (or fails).
    Reserved(u32),
    /// None could be reserved, and why.
    Unavailable(String),
}

/// Where placement put the VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On this node, for this reason (e.g. `most free memory`).
    Chosen {
        /// The node.
        node: String,
        /// Why, for the condition message.
        why: String,
    },
    /// No node qualifies.
    NoNode {
        /// Why, for the condition message.
        why: String,
        /// Online allowed nodes exist, but none has the VM's vCPUs and
        /// memory.
        too_small: bool,
    },
}

/// Whether a per-node slot is this pass's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotGrant {
    /// Taken: the dispatch may go ahead (given back if it does not).
    Granted {
        /// The node.
        node: String,
    },
    /// Every slot is in use by work actually in flight.
    Busy {
        /// The node.
        node: String,
        /// Work in flight there.
        in_use: u32,
        /// The limit.
        limit: u32,
        /// How long the line stood still while this resource waited: the
        /// time since a slot of the kind there last went to anyone, or
        /// its own wait if shorter.
        stalled: std::time::Duration,
        /// Resources waiting for a slot of the kind there since before it.
        ahead: u32,
    },
}
