//! What the cluster view shows of a storage.

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
