//! The simulated cluster: nodes, their storages and the VMs.

pub mod build;
pub mod file;
pub mod firewall;
pub mod guest;
pub mod ha;
pub mod mapping;
pub mod node;
pub mod sdn;
pub mod seed;
pub mod storage;
pub mod vm;

use std::collections::BTreeMap;

pub use ha::Ha;
pub use node::NodeState;
pub use storage::{Storage, StorageKind, Volume};
pub use vm::{GuestKind, Running, Vm};

use crate::http::error::NoSuchVm;

/// The cluster name (`/cluster/status`, login `clustername`) of a multi-node setup.
pub const CLUSTER_NAME: &str = "pve-sim";

/// The lowest VMID `nextid` hands out (datacenter.cfg `next-id` default).
pub const NEXTID_LOWER: u32 = 100;
pub const NEXTID_UPPER: u32 = 1_000_000;

pub struct Cluster {
    pub nodes: Vec<NodeState>,
    pub storages: BTreeMap<String, Vec<Storage>>,
    /// Guests (VMs and containers share the VMID space).
    pub vms: BTreeMap<u32, Vm>,
    /// datacenter.cfg options as written (`next-id: lower=200,upper=300`).
    pub options: BTreeMap<String, String>,
    /// Quorum taken away by the control API (corosync lost its peers).
    pub quorum_lost: bool,
    /// Resource pools (user.cfg): name → comment and storage members;
    /// guests name their pool in [`Vm::pool`].
    pub pools: BTreeMap<String, Pool>,
    pub ha: Ha,
    /// Cluster resource mappings (PCI, USB).
    pub mappings: mapping::Mappings,
    /// cluster.fw: security groups and IP sets.
    pub firewall: firewall::Firewall,
    /// jobs.cfg's vzdump jobs: ID → options as written.
    pub backup_jobs: BTreeMap<String, BTreeMap<String, String>>,
    /// SDN zones, VNets and subnets: pending and running.
    pub sdn: sdn::Sdn,
}

/// A resource pool of user.cfg.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pool {
    pub comment: Option<String>,
    pub storage: std::collections::BTreeSet<String>,
}

impl Cluster {
    pub fn node(&self, name: &str) -> Option<&NodeState> {
        self.nodes.iter().find(|n| n.name == name)
    }

    pub fn node_mut(&mut self, name: &str) -> Option<&mut NodeState> {
        self.nodes.iter_mut().find(|n| n.name == name)
    }

    /// Corosync quorum: more than half of the nodes online, unless the
    /// control API took it away.
    pub fn quorate(&self) -> bool {
        let online = self.nodes.iter().filter(|n| n.online).count();
        !self.quorum_lost && online * 2 > self.nodes.len()
    }

    pub fn has_node(&self, node: &str) -> bool {
        self.node(node).is_some()
    }

    /// The node names, in configuration order.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// A VM on a given node, or PVE's "config file does not exist" error.
    pub fn vm(&self, node: &str, vmid: u32) -> Result<&Vm, NoSuchVm> {
        self.guest(node, vmid, GuestKind::Qemu)
    }

    pub fn vm_mut(&mut self, node: &str, vmid: u32) -> Result<&mut Vm, NoSuchVm> {
        self.guest_mut(node, vmid, GuestKind::Qemu)
    }

    /// A container on a given node, or PVE's "config file does not exist" error.
    pub fn ct(&self, node: &str, vmid: u32) -> Result<&Vm, NoSuchVm> {
        self.guest(node, vmid, GuestKind::Lxc)
    }

    pub fn ct_mut(&mut self, node: &str, vmid: u32) -> Result<&mut Vm, NoSuchVm> {
        self.guest_mut(node, vmid, GuestKind::Lxc)
    }

    pub fn guest(&self, node: &str, vmid: u32, kind: GuestKind) -> Result<&Vm, NoSuchVm> {
        self.vms
            .get(&vmid)
            .filter(|vm| vm.node == node && vm.kind == kind)
            .ok_or_else(|| NoSuchVm::of(kind, node, vmid))
    }

    pub fn guest_mut(
        &mut self,
        node: &str,
        vmid: u32,
        kind: GuestKind,
    ) -> Result<&mut Vm, NoSuchVm> {
        self.vms
            .get_mut(&vmid)
            .filter(|vm| vm.node == node && vm.kind == kind)
            .ok_or_else(|| NoSuchVm::of(kind, node, vmid))
    }

    /// The storage `id` as `node` sees it. A shared storage is one storage
    /// whichever node asks (a file downloaded through one node is on every
    /// node, as on NFS or CephFS): every node reads and writes the copy of
    /// the first node that has it ([`Cluster::shared_home`]).
    pub fn storage(&self, node: &str, id: &str) -> Option<&Storage> {
        let s = self.storages.get(node)?.iter().find(|s| s.id == id)?;
        match s.shared.then(|| self.shared_home(id)).flatten() {
            Some(home) if home != node => self.storages.get(home)?.iter().find(|s| s.id == id),
            Some(_) | None => Some(s),
        }
    }

    pub fn storage_mut(&mut self, node: &str, id: &str) -> Option<&mut Storage> {
        let shared = self.storage(node, id)?.shared;
        let home = match shared.then(|| self.shared_home(id)).flatten() {
            Some(home) => home.to_owned(),
            None => node.to_owned(),
        };
        self.storages
            .get_mut(&home)?
            .iter_mut()
            .find(|s| s.id == id)
    }

    /// The node whose copy of the shared storage `id` every node uses: the
    /// first node (in the cluster's order) that has it.
    pub fn shared_home(&self, id: &str) -> Option<&str> {
        self.nodes.iter().map(|n| n.name.as_str()).find(|n| {
            self.storages
                .get(*n)
                .is_some_and(|l| l.iter().any(|s| s.id == id && s.shared))
        })
    }

    /// A volume by volume ID on a node.
    pub fn volume(&self, node: &str, volid: &str) -> Option<(&Storage, &Volume)> {
        let (sid, name) = storage::split_volid(volid)?;
        let storage = self.storage(node, sid)?;
        Some((storage, storage.volumes.get(name)?))
    }

    /// Removes a volume; returns whether it existed.
    pub fn free_volume(&mut self, node: &str, volid: &str) -> bool {
        let Some((sid, name)) = storage::split_volid(volid) else {
            return false;
        };
        self.storage_mut(node, sid)
            .and_then(|s| s.volumes.remove(name))
            .is_some()
    }

    /// The `next-id` range of datacenter.cfg: `[lower, upper)`.
    pub fn nextid_range(&self) -> (u32, u32) {
        let mut range = (NEXTID_LOWER, NEXTID_UPPER);
        if let Some(spec) = self.options.get("next-id") {
            for part in spec.split(',') {
                match part.split_once('=') {
                    Some(("lower", v)) => range.0 = v.parse().unwrap_or(range.0),
                    Some(("upper", v)) => range.1 = v.parse().unwrap_or(range.1),
                    _ => {}
                }
            }
        }
        range
    }

    pub fn next_free_vmid(&self) -> Option<u32> {
        let (lower, upper) = self.nextid_range();
        (lower..upper).find(|id| !self.vms.contains_key(id))
    }
}
