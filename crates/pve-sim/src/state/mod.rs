//! The simulated cluster: nodes, their storages and the VMs.

pub mod seed;
pub mod storage;
pub mod vm;

use std::collections::BTreeMap;

pub use storage::{Storage, StorageKind, Volume};
pub use vm::{Running, Vm};

use crate::http::error::NoSuchVm;

/// The lowest VMID `nextid` hands out (datacenter.cfg `next-id` default).
pub const NEXTID_LOWER: u32 = 100;
pub const NEXTID_UPPER: u32 = 1_000_000;

pub struct Cluster {
    pub nodes: Vec<String>,
    pub storages: BTreeMap<String, Vec<Storage>>,
    pub vms: BTreeMap<u32, Vm>,
}

impl Cluster {
    pub fn has_node(&self, node: &str) -> bool {
        self.nodes.iter().any(|n| n == node)
    }

    /// A VM on a given node, or PVE's "config file does not exist" error.
    pub fn vm(&self, node: &str, vmid: u32) -> Result<&Vm, NoSuchVm> {
        self.vms
            .get(&vmid)
            .filter(|vm| vm.node == node)
            .ok_or_else(|| NoSuchVm::new(node, vmid))
    }

    pub fn vm_mut(&mut self, node: &str, vmid: u32) -> Result<&mut Vm, NoSuchVm> {
        self.vms
            .get_mut(&vmid)
            .filter(|vm| vm.node == node)
            .ok_or_else(|| NoSuchVm::new(node, vmid))
    }

    pub fn storage(&self, node: &str, id: &str) -> Option<&Storage> {
        self.storages.get(node)?.iter().find(|s| s.id == id)
    }

    pub fn storage_mut(&mut self, node: &str, id: &str) -> Option<&mut Storage> {
        self.storages.get_mut(node)?.iter_mut().find(|s| s.id == id)
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

    pub fn next_free_vmid(&self) -> Option<u32> {
        (NEXTID_LOWER..NEXTID_UPPER).find(|id| !self.vms.contains_key(id))
    }
}
