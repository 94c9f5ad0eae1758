//! The linked clones of a template: VMs whose disks are backed by one of
//! its base volumes.
//!
//! PVE answers the same question (`volume_is_base_and_used`) by listing
//! the base volume's storage: a linked clone's volume name carries its
//! base (`base-100-disk-0/vm-101-disk-0` on ZFS and RBD,
//! `100/base-100-disk-0.qcow2/101/vm-101-disk-0.qcow2` on directories).
//! LVM-thin names carry no base: those clones are independent thin
//! snapshots, and Proxmox destroys such a template anyway.

use std::collections::{BTreeMap, BTreeSet};

use pve_client::Client;
use pve_client::vm::{Drive, DriveFile, is_disk_key};

use crate::reconcile::plan::VmConfig;

/// VMIDs (other than `vmid`) using a base volume of the template `config`.
pub async fn linked(
    client: &Client,
    node: &str,
    vmid: u32,
    config: &VmConfig,
) -> Result<Vec<u32>, pve_client::Error> {
    let mut clones = BTreeSet::new();
    for (storage, bases) in base_volumes(config) {
        let content = client
            .storage_content(node, &storage, Some("images"))
            .await?;
        for entry in content {
            let owner = entry.vmid.and_then(|v| u32::try_from(v).ok());
            if bases.iter().any(|b| is_clone_of(&entry.volid, b))
                && let Some(owner) = owner.filter(|o| *o != vmid)
            {
                clones.insert(owner);
            }
        }
    }
    Ok(clones.into_iter().collect())
}

/// Base volume IDs by storage (`local-lvm` → `local-lvm:base-100-disk-0`).
fn base_volumes(config: &VmConfig) -> BTreeMap<String, Vec<String>> {
    let mut bases: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, value) in &config.current {
        if !is_disk_key(key) {
            continue;
        }
        let Ok(drive) = Drive::parse(value) else {
            continue;
        };
        if drive.is_cdrom() {
            continue;
        }
        if let DriveFile::Volume { storage, name } = &drive.file
            && name
                .rsplit('/')
                .next()
                .is_some_and(|f| f.starts_with("base-"))
        {
            bases
                .entry(storage.clone())
                .or_default()
                .push(format!("{storage}:{name}"));
        }
    }
    bases
}

/// Whether `volid` is a linked clone of the base volume `base`.
fn is_clone_of(volid: &str, base: &str) -> bool {
    volid
        .strip_prefix(base)
        .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_volumes_and_their_clones() {
        let config = VmConfig {
            current: [
                ("scsi0", "zfs:base-100-disk-0,size=8G"),
                ("efidisk0", "local:100/base-100-disk-1.qcow2,efitype=4m"),
                ("ide2", "zfs:vm-100-cloudinit,media=cdrom"),
                ("scsi1", "zfs:vm-100-disk-2"),
                ("net0", "virtio,bridge=vmbr0"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            pending: BTreeMap::new(),
        };
        let bases = base_volumes(&config);
        assert_eq!(bases["zfs"], ["zfs:base-100-disk-0"]);
        assert_eq!(bases["local"], ["local:100/base-100-disk-1.qcow2"]);
        assert!(is_clone_of(
            "zfs:base-100-disk-0/vm-101-disk-0",
            "zfs:base-100-disk-0"
        ));
        assert!(is_clone_of(
            "local:100/base-100-disk-1.qcow2/101/vm-101-disk-0.qcow2",
            "local:100/base-100-disk-1.qcow2"
        ));
        assert!(!is_clone_of("zfs:base-100-disk-01", "zfs:base-100-disk-0"));
        assert!(!is_clone_of("zfs:base-100-disk-0", "zfs:base-100-disk-0"));
    }
}
