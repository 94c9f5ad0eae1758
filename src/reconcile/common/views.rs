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
    /// The VNets among them that are not VLAN-aware (a NIC on one takes
    /// no tag).
    pub untagged_vnets: std::collections::BTreeSet<String>,
    /// The Proxmox IDs of other namespaces' ProxmoxVNets: a guest may not
    /// name them (a team uses only its own namespace's VNets).
    pub foreign_vnets: std::collections::BTreeSet<String>,
}

/// Why NIC `i` may not be on `bridge`, another namespace's VNet.
pub fn foreign_vnet(i: usize, bridge: &str) -> String {
    format!(
        "spec.forProvider.networks[{i}].bridge {bridge:?} is the VNet of a ProxmoxVNet of another namespace: a guest may name only its own namespace's VNets (their status.atProvider.id)"
    )
}

impl HostView {
    /// Of a guest's NICs (`spec.forProvider.networks[i]`: its bridge and
    /// VLAN tag), those the node cannot carry as asked: another
    /// namespace's VNet, a bridge it does not have, or a tag on a VNet
    /// that is not VLAN-aware; each with a message naming the field (only
    /// the first when the node's bridges are unknown).
    pub fn missing_bridges<'a>(
        &self,
        nics: impl IntoIterator<Item = (&'a str, Option<u16>)>,
    ) -> Vec<(&'a str, String)> {
        let has = self.bridges.as_ref();
        let list = has.map(|h| h.iter().cloned().collect::<Vec<_>>().join(", "));
        nics.into_iter()
            .enumerate()
            .filter_map(|(i, (b, tag))| {
                let why = if self.foreign_vnets.contains(b) {
                    foreign_vnet(i, b)
                } else if has.is_some_and(|h| !h.contains(b)) {
                    let list = list.as_deref().unwrap_or_default();
                    format!(
                        "spec.forProvider.networks[{i}].bridge {b:?} is neither a bridge nor a VNet of node {} (it has {list})",
                        self.node
                    )
                } else if let (Some(tag), true) = (tag, self.untagged_vnets.contains(b)) {
                    format!(
                        "spec.forProvider.networks[{i}] asks for VLAN tag {tag} on VNet {b:?}, which is not VLAN-aware (Proxmox refuses the tag when the guest starts): leave the tag out, or make the VNet vlanAware"
                    )
                } else {
                    return None;
                };
                Some((b, why))
            })
            .collect()
    }
}
