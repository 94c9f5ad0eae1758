//! What the cluster view shows of a node and its storages, as a guest's
//! create is checked against it (VMs and containers alike).

use std::collections::BTreeMap;

/// One storage of a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageView {
    /// Its plugin (`lvmthin`, `lvm`, `dir`, `zfspool`, `rbd`, ...).
    pub plugin: String,
    /// Its size in bytes (0: not reported, e.g. not active).
    pub total: u64,
    /// Bytes in use.
    pub used: u64,
}

impl StorageView {
    /// Whether volumes on it take their whole size when allocated: a thick
    /// LVM volume group does; thin pools, sparse files, Ceph and the rest
    /// overprovision.
    pub fn thick(&self) -> bool {
        self.plugin == "lvm"
    }

    /// Bytes free.
    pub fn free(&self) -> u64 {
        self.total.saturating_sub(self.used)
    }
}

/// A node as a create is checked against it: from the shared cluster view
/// (`/cluster/resources`: `maxcpu`, `maxmem`, each storage's `maxdisk`,
/// `disk` and `plugintype`) and the node's bridges (`/nodes/{node}/network`,
/// read once per node and interval).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostView {
    /// The node.
    pub node: String,
    /// Its logical CPUs; 0 when the view does not tell (no `Sys.Audit`).
    pub cpus: u32,
    /// Its memory in bytes; 0 when the view does not tell.
    pub memory: u64,
    /// Its storages by ID (those the token may audit).
    pub storages: BTreeMap<String, StorageView>,
    /// The bridges and VNets a NIC may name there; `None` when they could
    /// not be read (nothing is refused for them then).
    pub bridges: Option<std::collections::BTreeSet<String>>,
}

impl HostView {
    /// Of a guest's NICs (`spec.forProvider.networks[i].bridge`), those
    /// whose bridge the node does not have: each bridge with a message
    /// naming the field (none when the node's bridges are unknown).
    pub fn missing_bridges<'a>(
        &self,
        bridges: impl IntoIterator<Item = &'a str>,
    ) -> Vec<(&'a str, String)> {
        let Some(has) = &self.bridges else {
            return vec![];
        };
        let list = has.iter().cloned().collect::<Vec<_>>().join(", ");
        bridges
            .into_iter()
            .enumerate()
            .filter(|(_, b)| !has.contains(*b))
            .map(|(i, b)| {
                let why = format!(
                    "spec.forProvider.networks[{i}].bridge {b:?} is neither a bridge nor a VNet of node {} (it has {list})",
                    self.node
                );
                (b, why)
            })
            .collect()
    }
}
