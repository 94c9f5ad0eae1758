//! The template ProxmoxVM of an image on one node: its name, its manifest,
//! and what it says about the template.
//!
//! The template is an ordinary ProxmoxVM (`template: true`, imported from
//! the image's volume), so the VM machinery creates and converts it exactly
//! once, with every guarantee of a create (VMID recorded first, owner
//! marker, task never waited for); this module only says what it is.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::api::condition::{ConditionType, find};
use crate::api::image::ImageTemplate;
use crate::api::meta::EXTERNAL_CREATE_SUCCEEDED;
use crate::api::{ConditionStatus, ProxmoxImage, ProxmoxVM};

use crate::reconcile::common::images::shorten;
/// The label of an image's template VMs (with an ownerReference to it).
pub use crate::reconcile::common::images::{IMAGE_LABEL, label_value};

/// The field manager of the templates' creates.
pub const FIELD_MANAGER: &str = "proxmox-provider-fleet";

/// Memory of a template: it never runs, and its clones set their own.
const TEMPLATE_MEMORY: &str = "512Mi";

/// The template ProxmoxVM of image `image` on `node`: `<image>-tpl-<node>`,
/// shortened with a hash of the full name when over 63 characters (the
/// name is also the VM's name on Proxmox).
pub fn name(image: &str, node: &str) -> String {
    shorten(&format!("{image}-tpl-{node}"))
}

/// The template ProxmoxVM of `image` on `node`, importing `volume` onto
/// the template's storage: the object the fleet controller creates.
pub fn manifest(image: &ProxmoxImage, template: &ImageTemplate, node: &str, volume: &str) -> Value {
    let owner = OwnerReference {
        api_version: ProxmoxImage::api_version(&()).into_owned(),
        kind: ProxmoxImage::kind(&()).into_owned(),
        name: image.name_any(),
        uid: image.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    json!({
        "apiVersion": ProxmoxVM::api_version(&()),
        "kind": ProxmoxVM::kind(&()),
        "metadata": {
            "name": name(&image.name_any(), node),
            "namespace": image.namespace(),
            "labels": {IMAGE_LABEL: label_value(&image.name_any())},
            "ownerReferences": [owner],
        },
        "spec": {
            "forProvider": {
                "node": node,
                "memory": TEMPLATE_MEMORY,
                "disks": [{"slot": "scsi0", "storage": template.storage, "importFrom": volume}],
                "template": true,
                "powerState": "Stopped",
                "tags": ["crossplane", "image-template"],
            },
            "providerConfigRef": image.spec.managed.provider_config_ref,
        },
    })
}

/// Whether `vm` is a template ProxmoxVM of `image`: controlled by it (its
/// UID, not only its name: a new image of the same name owns nothing of
/// the old one's).
pub fn owned_by(vm: &ProxmoxVM, image: &ProxmoxImage) -> bool {
    let Some(uid) = image.uid() else { return false };
    vm.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.kind == ProxmoxImage::kind(&()) && o.uid == uid)
}

/// The node of a template ProxmoxVM.
pub fn node(vm: &ProxmoxVM) -> Option<&str> {
    vm.spec.for_provider.node.as_deref()
}

/// The VMID of a template ProxmoxVM, once recorded.
pub fn vmid(vm: &ProxmoxVM) -> Option<u32> {
    vm.external_name().and_then(|v| v.parse().ok())
}

/// Whether the template ProxmoxVM's VM is a template that can be cloned:
/// created, Ready for the generation it declares, nothing in flight (the
/// conversion is its last task). A clone still checks on Proxmox that the
/// VMID is a template before it is cloned.
pub fn ready(vm: &ProxmoxVM) -> bool {
    let Some(status) = &vm.status else {
        return false;
    };
    vm.annotation(EXTERNAL_CREATE_SUCCEEDED).is_some()
        && vm.metadata.deletion_timestamp.is_none()
        && status.at_provider.task.is_none()
        && status.observed_generation == vm.metadata.generation
        && find(&status.conditions, ConditionType::Ready)
            .is_some_and(|c| c.status == ConditionStatus::True)
}

/// Whether the template ProxmoxVM's status shows its VM converted: the
/// pass that saw the conversion task end OK wrote it, so the template is
/// ready from that write, not from a later cluster view.
pub fn converted(vm: &ProxmoxVM) -> bool {
    vm.status
        .as_ref()
        .is_some_and(|s| s.at_provider.config.template == Some(true))
}

/// Whether clones of a template on storage of `plugin` can be linked:
/// the storage can snapshot a base volume (PVE's `clone` feature of a base
/// image: thin LVM, ZFS, Ceph RBD, Btrfs, and qcow2 files on directory
/// storages). Thick LVM and iSCSI LUNs cannot.
pub fn can_link(plugin: &str) -> bool {
    matches!(
        plugin,
        "lvmthin" | "zfspool" | "zfs" | "rbd" | "btrfs" | "dir" | "nfs" | "cifs" | "glusterfs"
    )
}
