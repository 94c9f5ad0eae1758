//! Clones and their templates.
//!
//! * **The linked clones of a template**: VMs whose disks are backed by
//!   one of its base volumes. PVE answers the same question
//!   (`volume_is_base_and_used`) by listing the base volume's storage: a
//!   linked clone's volume name carries its base
//!   (`base-100-disk-0/vm-101-disk-0` on ZFS and RBD,
//!   `100/base-100-disk-0.qcow2/101/vm-101-disk-0.qcow2` on directories).
//!   LVM-thin names carry no base: those clones are independent thin
//!   snapshots, and Proxmox destroys such a template anyway.
//! * **The ProxmoxVM declaring a clone's template**: one of the same
//!   provider config with `template: true` whose VM the clone names (by
//!   its Proxmox name or VMID). While its VM is not a template yet, the
//!   clone waits for it (`TemplateLookup::Coming`) instead of reporting
//!   the template missing, and its status changing wakes the clone
//!   (`wake::Templates`).

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use pve_client::Client;
use pve_client::vm::{Drive, DriveFile, is_disk_key};

use crate::api::ProxmoxVM;
use crate::api::meta::EXTERNAL_CREATE_SUCCEEDED;
use crate::reconcile::inventory::ClusterView;
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::vm::plan::{TemplateLookup, VmConfig};

/// Whether `clone`'s clone source is the VM of `template`: a ProxmoxVM of
/// the same provider config declaring `template: true`, named by the
/// clone's `templateName` (its Proxmox name: `spec.forProvider.name`, else
/// the resource's name) or `templateVmid` (its recorded VMID or
/// `spec.forProvider.vmid`).
pub fn names_template(clone: &ProxmoxVM, template: &ProxmoxVM) -> bool {
    let Some(source) = &clone.spec.for_provider.clone else {
        return false;
    };
    if template.spec.for_provider.lifecycle.template != Some(true)
        || (clone.namespace(), clone.name_any()) == (template.namespace(), template.name_any())
        || ConfigKey::of(clone) != ConfigKey::of(template)
    {
        return false;
    }
    if let Some(name) = &source.template_name {
        return *name == proxmox_name(template);
    }
    source.template_vmid.is_some() && source.template_vmid == recorded_vmid(template)
}

/// The VM name a ProxmoxVM gives its VM.
fn proxmox_name(vm: &ProxmoxVM) -> String {
    vm.spec
        .for_provider
        .name
        .clone()
        .unwrap_or_else(|| vm.name_any())
}

/// The VMID of a ProxmoxVM's VM, when known.
fn recorded_vmid(vm: &ProxmoxVM) -> Option<u32> {
    vm.external_name()
        .and_then(|v| v.parse().ok())
        .or(vm.spec.for_provider.vmid)
}

/// The clones in `store` that name `template` and are not created yet:
/// those that may be waiting for it.
pub fn waiting_for(
    store: &Store<DeserializeGuard<ProxmoxVM>>,
    template: &ProxmoxVM,
) -> Vec<ProxmoxVM> {
    store
        .state()
        .iter()
        .filter_map(|obj| obj.0.as_ref().ok())
        .filter(|vm| vm.annotation(EXTERNAL_CREATE_SUCCEEDED).is_none())
        .filter(|vm| names_template(vm, template))
        .cloned()
        .collect()
}

/// The clone template of `clone` as the cluster view found it
/// (`looked_up`), or, when that is not a template (yet) while a ProxmoxVM
/// in `store` declares it, as that resource's VM is now: read from Proxmox
/// (the view may lag a conversion that just ended), else
/// [`TemplateLookup::Coming`].
pub async fn template_source(
    client: &Client,
    store: &Store<DeserializeGuard<ProxmoxVM>>,
    clone: &ProxmoxVM,
    looked_up: TemplateLookup,
) -> Result<TemplateLookup, pve_client::Error> {
    let settled = match &looked_up {
        TemplateLookup::Found { template, .. } => *template,
        TemplateLookup::Ambiguous(_) => true,
        TemplateLookup::NotFound | TemplateLookup::Coming { .. } => false,
    };
    if settled {
        return Ok(looked_up);
    }
    let declared = store.state().iter().find_map(|obj| {
        obj.0
            .as_ref()
            .ok()
            .filter(|t| t.metadata.deletion_timestamp.is_none() && names_template(clone, t))
            .cloned()
    });
    let Some(declared) = declared else {
        return Ok(looked_up);
    };
    let resource = format!(
        "{}/{}",
        declared.namespace().unwrap_or_default(),
        declared.name_any()
    );
    let node = declared
        .status
        .as_ref()
        .and_then(|s| s.at_provider.node.clone())
        .or_else(|| declared.spec.for_provider.node.clone());
    if let (Some(vmid), Some(node)) = (recorded_vmid(&declared), node) {
        match client.vm_status(&node, vmid).await {
            Ok(status) if status.template => {
                return Ok(TemplateLookup::Found {
                    vmid,
                    node,
                    template: true,
                    pool: None,
                    tags: vec![],
                });
            }
            // Not created yet, or elsewhere (the view finds it later).
            Ok(_) | Err(pve_client::Error::NotFound { .. } | pve_client::Error::Api { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(TemplateLookup::Coming { resource })
}

/// The template of an image on `node`, VMID `vmid` (from the image's
/// status): as the cluster view shows it, or, when the view does not show
/// a template there (it lags a conversion that just ended), as Proxmox
/// does (one request, only then).
pub async fn image_template(
    client: &Client,
    view: &ClusterView,
    vmid: u32,
    node: &str,
) -> Result<TemplateLookup, pve_client::Error> {
    if let Some(seen) = view.vms.get(&vmid).filter(|v| v.template && v.node == node) {
        return Ok(TemplateLookup::Found {
            vmid,
            node: seen.node.clone(),
            template: true,
            pool: seen.pool.clone(),
            tags: seen.tags.clone(),
        });
    }
    match client.vm_status(node, vmid).await {
        Ok(status) => Ok(TemplateLookup::Found {
            vmid,
            node: node.to_owned(),
            template: status.template,
            pool: None,
            tags: vec![],
        }),
        Err(pve_client::Error::NotFound { .. } | pve_client::Error::Api { .. }) => {
            Ok(TemplateLookup::NotFound)
        }
        Err(e) => Err(e),
    }
}

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
