//! Who refers to an image: the ProxmoxVMs and ProxmoxContainers of its
//! namespace that name it, and the template VMs it owns. Read from the
//! controllers' caches (no request of its own).

use std::collections::BTreeSet;

use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use super::plan::Users;
use crate::api::meta::{EXTERNAL_CREATE_SUCCEEDED, EXTERNAL_NAME};
use crate::api::vm::ObservedState;
use crate::api::{ProxmoxContainer, ProxmoxImage, ProxmoxVM};

/// The ProxmoxImage (of its own namespace) a ProxmoxContainer names
/// (`template.image.name`).
pub fn container_image(ct: &ProxmoxContainer) -> Option<&str> {
    let image = ct.spec.for_provider.template.image.as_ref()?;
    Some(image.name.as_str())
}

pub use crate::reconcile::common::images::IMAGE_LABEL;

/// The ProxmoxImages (of its own namespace) a ProxmoxVM names:
/// `disks[].image.name` and `clone.image`.
pub fn image_references(vm: &ProxmoxVM) -> impl Iterator<Item = &str> {
    let p = &vm.spec.for_provider;
    disk_images(vm).chain(p.clone.as_ref().and_then(|c| c.image.as_deref()))
}

/// The images `vm`'s disks import (`disks[].image.name`), not the one it
/// clones the template of.
pub fn disk_images(vm: &ProxmoxVM) -> impl Iterator<Item = &str> {
    vm.spec
        .for_provider
        .disks
        .iter()
        .filter_map(|d| d.image.as_ref()?.name.as_deref())
}

/// Whether the VM is one of the image's template VMs (labelled and owned
/// by it).
fn is_child(vm: &ProxmoxVM, image: &ProxmoxImage) -> bool {
    let label = crate::reconcile::common::images::label_value(&image.name_any());
    let labelled = vm.labels().get(IMAGE_LABEL) == Some(&label);
    let owned = vm
        .owner_references()
        .iter()
        .any(|o| o.kind == "ProxmoxImage" && Some(&o.uid) == image.metadata.uid.as_ref());
    labelled && owned
}

/// Who uses `image`, and the nodes its users are on (or are placed on):
/// the file goes there too.
pub fn users(
    store: &Store<DeserializeGuard<ProxmoxVM>>,
    containers: &Store<DeserializeGuard<ProxmoxContainer>>,
    image: &ProxmoxImage,
) -> (Users, BTreeSet<String>) {
    let namespace = image.namespace().unwrap_or_default();
    let name = image.name_any();
    let mut users = Users::default();
    let mut nodes = BTreeSet::new();
    for obj in store.state() {
        let Ok(vm) = &obj.0 else { continue };
        if vm.namespace().as_deref() != Some(namespace.as_str()) {
            continue;
        }
        if is_child(vm, image) {
            users.children.push(vm.name_any());
            continue;
        }
        if !image_references(vm).any(|n| n == name) {
            continue;
        }
        users.vms.push(vm.name_any());
        if vm.metadata.deletion_timestamp.is_none()
            && vm.annotations().get(EXTERNAL_CREATE_SUCCEEDED).is_none()
        {
            users.creating += 1;
        }
        let node = vm
            .status
            .as_ref()
            .and_then(|s| s.at_provider.node.clone())
            .or_else(|| vm.spec.for_provider.node.clone());
        // A VM that has a VMID but no node yet is being placed.
        if let Some(node) = node.filter(|_| {
            vm.annotations().contains_key(EXTERNAL_NAME) || vm.spec.for_provider.node.is_some()
        }) {
            nodes.insert(node);
        }
    }
    for obj in containers.state() {
        let Ok(ct) = &obj.0 else { continue };
        if ct.namespace().as_deref() != Some(namespace.as_str())
            || container_image(ct) != Some(name.as_str())
        {
            continue;
        }
        users.containers.push(ct.name_any());
        let at = ct.status.as_ref().map(|s| &s.at_provider);
        if ct.metadata.deletion_timestamp.is_none()
            && matches!(at.and_then(|a| a.state), None | Some(ObservedState::Absent))
        {
            users.creating += 1;
        }
        // Where it waits for the file (recorded before it is created) or
        // where its spec puts it.
        if let Some(node) = at
            .and_then(|a| a.node.clone())
            .or_else(|| ct.spec.for_provider.node.clone())
        {
            nodes.insert(node);
        }
    }
    users.vms.sort();
    users.containers.sort();
    users.children.sort();
    (users, nodes)
}

/// What the image controller reads of a VM: the images it names, its
/// node, whether it is being deleted or created, the image it is a
/// template of. A change of anything else wakes no image.
pub fn seen_by_images(vm: &ProxmoxVM) -> SeenByImages {
    SeenByImages {
        images: image_references(vm).map(str::to_owned).collect(),
        placed: vm.status.as_ref().and_then(|s| s.at_provider.node.clone()),
        node: vm.spec.for_provider.node.clone(),
        deleting: vm.metadata.deletion_timestamp.is_some(),
        created: vm.annotations().contains_key(EXTERNAL_CREATE_SUCCEEDED),
        template_of: vm.labels().get(IMAGE_LABEL).cloned(),
    }
}

/// See [`seen_by_images`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenByImages {
    images: Vec<String>,
    placed: Option<String>,
    node: Option<String>,
    deleting: bool,
    created: bool,
    template_of: Option<String>,
}

/// The images a VM watch event concerns: those the VM names, and the one
/// it is a template of (its label).
pub fn images_of(vm: &ProxmoxVM) -> Vec<ObjectRef<ProxmoxImage>> {
    let Some(namespace) = vm.namespace() else {
        return vec![];
    };
    image_references(vm)
        .chain(vm.labels().get(IMAGE_LABEL).map(String::as_str))
        .map(|name| ObjectRef::new(name).within(&namespace))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(disks: serde_json::Value) -> ProxmoxVM {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
            "spec": {"forProvider": {"disks": disks}},
        }))
        .unwrap()
    }

    #[test]
    fn a_vm_refers_to_the_images_its_disks_name() {
        let v = vm(serde_json::json!([
            {"slot": "scsi0", "storage": "local-lvm", "image": {"name": "noble"}},
            {"slot": "scsi1", "storage": "local-lvm", "size": "1Gi"},
            {"slot": "scsi2", "storage": "local-lvm", "image": {"url": "https://x.example/a.qcow2",
                "checksum": "0".repeat(64), "checksumAlgorithm": "sha256"}},
            {"slot": "scsi3", "storage": "local-lvm", "image": {"name": "jammy"}},
        ]));
        assert_eq!(image_references(&v).collect::<Vec<_>>(), ["noble", "jammy"]);
        let mut clone = vm(serde_json::json!([]));
        clone.spec.for_provider.clone =
            serde_json::from_value(serde_json::json!({"image": "fleet", "full": false})).unwrap();
        assert_eq!(image_references(&clone).collect::<Vec<_>>(), ["fleet"]);
        assert_eq!(
            images_of(&v),
            [
                ObjectRef::new("noble").within("ns"),
                ObjectRef::new("jammy").within("ns")
            ]
        );
    }
}
