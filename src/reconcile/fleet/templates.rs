//! What the fleet controller does for one image: a pure function of the
//! image, the ProxmoxVMs of its namespace and the storages the provider
//! has seen, so every decision is table-tested.
//!
//! * A template ProxmoxVM ([`super::child`]) on each node whose location
//!   the image controller reports `Ready`, created when missing.
//! * `status.atProvider.templates` and `templateSummary`, and only those
//!   (the image controller owns the rest of the status).
//! * A template whose node left the image (or the image's `template`
//!   went) is deleted once no clone on that node names the image; all of
//!   them once the image is being deleted and no ProxmoxVM names it.

use std::collections::BTreeSet;

use kube::ResourceExt;
use serde_json::{Value, json};

use super::child;
use crate::api::image::{ImageTemplateStatus, LocationPhase};
use crate::api::{ProxmoxImage, ProxmoxVM};

/// What to do for one image.
#[derive(Debug, Default, PartialEq)]
pub struct Work {
    /// Template ProxmoxVMs to create: name and manifest. One that exists
    /// is left as it is: a new volume or template storage applies to new
    /// templates (a template's disk is not imported again, and moving it
    /// is not the fleet's to decide).
    pub create: Vec<(String, Value)>,
    /// Template ProxmoxVMs to delete: name and UID (the delete's
    /// precondition, so a newer object of the name is left alone).
    pub delete: Vec<(String, String)>,
    /// The merge patch of the status, when `templates` or
    /// `templateSummary` change.
    pub status: Option<Value>,
    /// A template is ready but the plugin of its storage is not known yet
    /// (no cluster view read): look again soon.
    pub recheck: bool,
    /// Names a template would have that another ProxmoxVM (not the
    /// image's) has: left alone, never overwritten.
    pub taken: Vec<String>,
}

/// What the provider last saw on Proxmox (its cluster view).
pub trait Seen {
    /// The plugin (`lvmthin`, `dir`, ...) of a storage on a node; `None`:
    /// not seen yet.
    fn plugin(&self, node: &str, storage: &str) -> Option<String>;
    /// Whether VM `vmid` is a template. A template's ProxmoxVM is Ready
    /// before its conversion (the VM exists, stopped as asked), so its
    /// Ready condition alone does not say; its status says once the pass
    /// that saw the conversion end wrote it ([`child::converted`]), and
    /// this is asked only while it does not (a status written before it
    /// said so).
    fn template(&self, vmid: u32) -> bool;
}

/// What to do for `image`, given the ProxmoxVMs of its namespace (`vms`).
pub fn work(image: &ProxmoxImage, vms: &[&ProxmoxVM], seen: &dyn Seen) -> Work {
    let name = image.name_any();
    let children: Vec<&ProxmoxVM> = vms
        .iter()
        .copied()
        .filter(|vm| child::owned_by(vm, image))
        .collect();
    let clones: Vec<&ProxmoxVM> = vms
        .iter()
        .copied()
        .filter(|vm| clones_image(vm, &name))
        .collect();
    let mut work = Work::default();
    let going = |vm: &&&ProxmoxVM| vm.metadata.deletion_timestamp.is_none();
    if image.metadata.deletion_timestamp.is_some() {
        // The templates go last: after every ProxmoxVM naming the image.
        if clones.is_empty() {
            work.delete = children.iter().filter(going).map(|c| id(c)).collect();
        }
        return work;
    }
    let spec = &image.spec.for_provider;
    let at = image.status.clone().unwrap_or_default().at_provider;
    let wanted: BTreeSet<&str> = match (&spec.template, &at.volume) {
        (Some(_), Some(_)) => at
            .locations
            .iter()
            .filter(|l| l.phase == LocationPhase::Ready)
            .map(|l| l.node.as_str())
            .collect(),
        (None, _) | (_, None) => BTreeSet::new(),
    };
    // Nodes still the image's: a location that is not Ready for a while
    // (downloading again) keeps its template.
    let kept: BTreeSet<&str> = match &spec.template {
        Some(_) => at
            .locations
            .iter()
            .map(|l| l.node.as_str())
            .chain(wanted.iter().copied())
            .filter(|n| spec.nodes.is_empty() || spec.nodes.iter().any(|s| s == n))
            .collect(),
        None => BTreeSet::new(),
    };
    for c in children.iter().filter(going) {
        let node = child::node(c).unwrap_or_default();
        let needed = clones.iter().any(|vm| clone_node(vm) == Some(node));
        if !kept.contains(node) && !needed {
            work.delete.push(id(c));
        }
    }
    let (Some(template), Some(volume)) = (&spec.template, &at.volume) else {
        work.status = status_patch(&at.templates, at.template_summary.as_deref(), &[], None);
        return work;
    };
    let mut templates = vec![];
    for node in &wanted {
        let manifest = child::manifest(image, template, node, volume);
        let child_name = child::name(&name, node);
        let existing = children.iter().find(|c| c.name_any() == child_name);
        let foreign = existing.is_none() && vms.iter().any(|vm| vm.name_any() == child_name);
        if foreign {
            work.taken.push(child_name.clone());
        } else if existing.is_none() {
            work.create.push((child_name.clone(), manifest));
        }
        let plugin = seen.plugin(node, &template.storage);
        let vmid = existing.and_then(|c| child::vmid(c));
        let converted =
            existing.is_some_and(|c| child::converted(c)) || vmid.is_some_and(|v| seen.template(v));
        let ready = existing.is_some_and(|c| child::ready(c));
        // Ready, but not seen converted (or its storage not seen) yet.
        if ready && (plugin.is_none() || !converted) {
            work.recheck = true;
        }
        templates.push(ImageTemplateStatus {
            node: (*node).to_owned(),
            name: child_name,
            vmid,
            ready: ready && converted && plugin.is_some(),
            linkable: template.linked && plugin.as_deref().is_some_and(child::can_link),
        });
    }
    let ready = templates.iter().filter(|t| t.ready).count();
    let summary = format!("{ready}/{} ready", templates.len());
    work.status = status_patch(
        &at.templates,
        at.template_summary.as_deref(),
        &templates,
        Some(&summary),
    );
    work
}

/// Whether `vm` clones `image`'s template.
pub fn clones_image(vm: &ProxmoxVM, image: &str) -> bool {
    vm.spec
        .for_provider
        .clone
        .as_ref()
        .and_then(|c| c.image.as_deref())
        == Some(image)
}

/// The node a clone is on or is to be created on.
fn clone_node(vm: &ProxmoxVM) -> Option<&str> {
    vm.status
        .as_ref()
        .and_then(|s| s.at_provider.node.as_deref())
        .or(vm.spec.for_provider.node.as_deref())
}

fn id(vm: &ProxmoxVM) -> (String, String) {
    (vm.name_any(), vm.uid().unwrap_or_default())
}

/// The merge patch setting `templates` and `templateSummary` (only them:
/// a merge patch leaves every other field of the status as it is), when
/// they differ from what the status has.
fn status_patch(
    had: &[ImageTemplateStatus],
    had_summary: Option<&str>,
    templates: &[ImageTemplateStatus],
    summary: Option<&str>,
) -> Option<Value> {
    if had == templates && had_summary == summary {
        return None;
    }
    // `null` removes a field in a merge patch.
    let list = if templates.is_empty() {
        Value::Null
    } else {
        json!(templates)
    };
    Some(json!({"status": {"atProvider": {"templates": list, "templateSummary": summary}}}))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::api::meta::{EXTERNAL_CREATE_SUCCEEDED, EXTERNAL_NAME};

    /// Storage plugins by (node, storage); VMIDs 9000 and up are templates.
    struct Storages(HashMap<(&'static str, &'static str), &'static str>);

    impl Seen for Storages {
        fn plugin(&self, node: &str, storage: &str) -> Option<String> {
            self.0
                .iter()
                .find(|((n, s), _)| *n == node && *s == storage)
                .map(|(_, p)| (*p).to_owned())
        }

        fn template(&self, vmid: u32) -> bool {
            vmid >= 9000
        }
    }

    fn lvm_thin_everywhere() -> Storages {
        Storages(HashMap::from([
            (("pve1", "local-lvm"), "lvmthin"),
            (("pve2", "local-lvm"), "lvmthin"),
        ]))
    }

    /// Image `noble` with a template on local-lvm, its file Ready on the
    /// nodes given (and Downloading on pve3).
    fn image(ready: &[&str]) -> ProxmoxImage {
        let mut locations: Vec<Value> = ready
            .iter()
            .map(|n| json!({"node": n, "storage": "local", "phase": "Ready"}))
            .collect();
        locations.push(json!({"node": "pve3", "storage": "local", "phase": "Downloading"}));
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxImage",
            "metadata": {"name": "noble", "namespace": "ns", "uid": "image-uid"},
            "spec": {
                "forProvider": {
                    "source": {"importFrom": "local:import/noble.qcow2"},
                    "content": "import",
                    "template": {"storage": "local-lvm"},
                },
                "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
            },
            "status": {"atProvider": {"volume": "local:import/noble.qcow2", "locations": locations}},
        }))
        .unwrap()
    }

    /// The template ProxmoxVM `work` creates for `node`, as the API server
    /// would hold it; `ready`: created, converted and Ready.
    fn applied(image: &ProxmoxImage, node: &str, vmid: u32, ready: bool) -> ProxmoxVM {
        let plan = work(image, &[], &lvm_thin_everywhere());
        let (_, manifest) = plan
            .create
            .into_iter()
            .find(|(name, _)| name.ends_with(node))
            .unwrap();
        let mut vm: ProxmoxVM = serde_json::from_value(manifest).unwrap();
        vm.metadata.uid = Some(format!("uid-{node}"));
        vm.metadata.generation = Some(1);
        let mut annotations =
            std::collections::BTreeMap::from([(EXTERNAL_NAME.to_owned(), vmid.to_string())]);
        if ready {
            annotations.insert(
                EXTERNAL_CREATE_SUCCEEDED.into(),
                "2026-01-01T00:00:00Z".into(),
            );
            vm.status = Some(
                serde_json::from_value(json!({
                    "observedGeneration": 1,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                }))
                .unwrap(),
            );
        }
        vm.metadata.annotations = Some(annotations);
        vm
    }

    fn clone(name: &str, node: Option<&str>) -> ProxmoxVM {
        let mut vm: ProxmoxVM = serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {
                "forProvider": {"clone": {"image": "noble", "full": false}},
                "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
            },
        }))
        .unwrap();
        if let Some(node) = node {
            vm.status =
                Some(serde_json::from_value(json!({"atProvider": {"node": node}})).unwrap());
        }
        vm
    }

    #[test]
    fn a_template_is_applied_on_each_node_whose_file_is_ready() {
        let image = image(&["pve1", "pve2"]);
        let plan = work(&image, &[], &lvm_thin_everywhere());
        let names: Vec<&str> = plan.create.iter().map(|(n, ..)| n.as_str()).collect();
        assert_eq!(
            names,
            ["noble-tpl-pve1", "noble-tpl-pve2"],
            "not pve3: downloading"
        );
        let (_, manifest) = &plan.create[0];
        assert_eq!(manifest["metadata"]["labels"][child::IMAGE_LABEL], "noble");
        let owner = &manifest["metadata"]["ownerReferences"][0];
        assert_eq!(
            (
                &owner["kind"],
                &owner["uid"],
                &owner["controller"],
                &owner["blockOwnerDeletion"]
            ),
            (
                &json!("ProxmoxImage"),
                &json!("image-uid"),
                &json!(true),
                &json!(true)
            )
        );
        assert_eq!(
            manifest["spec"]["forProvider"],
            json!({
                "node": "pve1",
                "memory": "512Mi",
                "disks": [{"slot": "scsi0", "storage": "local-lvm", "importFrom": "local:import/noble.qcow2"}],
                "template": true,
                "powerState": "Stopped",
                "tags": ["crossplane", "image-template"],
            })
        );
        assert_eq!(
            manifest["spec"]["providerConfigRef"],
            json!({"kind": "ProviderConfig", "name": "pve"})
        );
        // Nothing ready yet: listed, not ready.
        assert_eq!(
            plan.status,
            Some(json!({"status": {"atProvider": {
                "templates": [
                    {"node": "pve1", "name": "noble-tpl-pve1", "ready": false, "linkable": true},
                    {"node": "pve2", "name": "noble-tpl-pve2", "ready": false, "linkable": true},
                ],
                "templateSummary": "0/2 ready",
            }}}))
        );
    }

    #[test]
    fn templates_status_follows_the_children_and_is_written_only_when_it_changes() {
        let mut image = image(&["pve1", "pve2"]);
        let one = applied(&image, "pve1", 9001, true);
        let two = applied(&image, "pve2", 9002, false);
        let plan = work(&image, &[&one, &two], &lvm_thin_everywhere());
        assert!(
            plan.create.is_empty(),
            "both there already: {:?}",
            plan.create
        );
        let patch = plan.status.unwrap();
        let at = &patch["status"]["atProvider"];
        assert_eq!(at["templateSummary"], "1/2 ready");
        assert_eq!(at["templates"][0]["vmid"], 9001);
        assert_eq!(at["templates"][0]["ready"], true);
        assert_eq!(at["templates"][1]["ready"], false);
        // Only the fleet's two fields.
        assert_eq!(
            patch["status"]["atProvider"].as_object().unwrap().len(),
            2,
            "{patch}"
        );
        assert!(patch["status"].get("conditions").is_none());
        // Written: the next pass writes nothing.
        let status = image.status.as_mut().unwrap();
        status.at_provider.templates = serde_json::from_value(at["templates"].clone()).unwrap();
        status.at_provider.template_summary = Some("1/2 ready".into());
        assert_eq!(
            work(&image, &[&one, &two], &lvm_thin_everywhere()).status,
            None
        );
        // Another storage for templates: the existing ones are left as
        // they are (no disk move of a template, no import again).
        image.spec.for_provider.template.as_mut().unwrap().storage = "ceph".into();
        assert!(
            work(&image, &[&one, &two], &lvm_thin_everywhere())
                .create
                .is_empty()
        );
    }

    #[test]
    fn a_template_is_linkable_only_on_storage_that_snapshots_and_when_the_image_allows() {
        let image = image(&["pve1", "pve2"]);
        let one = applied(&image, "pve1", 9001, true);
        let thick = Storages(HashMap::from([(("pve1", "local-lvm"), "lvm")]));
        let plan = work(&image, &[&one], &thick);
        let at = &plan.status.unwrap()["status"]["atProvider"];
        assert_eq!(
            at["templates"][0]["linkable"],
            Value::Null,
            "thick LVM: full clones"
        );
        assert_eq!(at["templates"][0]["ready"], true);
        // Ready, not seen converted yet (the status is Ready before the
        // conversion): not ready, looked at again.
        let converting = applied(&image, "pve1", 101, true);
        let plan = work(&image, &[&converting], &lvm_thin_everywhere());
        assert!(plan.recheck);
        assert_eq!(
            plan.status.unwrap()["status"]["atProvider"]["templates"][0]["ready"],
            false
        );
        // Its status says converted (the pass that saw the conversion end
        // wrote it): ready at once, whatever the cluster view shows.
        let mut converted = converting.clone();
        converted
            .status
            .as_mut()
            .unwrap()
            .at_provider
            .config
            .template = Some(true);
        let plan = work(&image, &[&converted], &lvm_thin_everywhere());
        assert!(!plan.recheck);
        assert_eq!(
            plan.status.unwrap()["status"]["atProvider"]["templates"][0]["ready"],
            true
        );
        // Not seen yet: not ready until it is known, and looked at again.
        let unseen = work(&image, &[&one], &Storages(HashMap::new()));
        assert!(unseen.recheck);
        assert_eq!(
            unseen.status.unwrap()["status"]["atProvider"]["templates"][0]["ready"],
            false
        );
        let mut unlinked = image.clone();
        unlinked.spec.for_provider.template.as_mut().unwrap().linked = false;
        let plan = work(&unlinked, &[&one], &lvm_thin_everywhere());
        let at = &plan.status.unwrap()["status"]["atProvider"];
        assert_eq!(at["templates"][0]["linkable"], Value::Null, "linked: false");
    }

    #[test]
    fn templates_go_after_the_clones_that_need_them() {
        let image = image(&["pve1", "pve2"]);
        let one = applied(&image, "pve1", 9001, true);
        let two = applied(&image, "pve2", 9002, true);
        let web = clone("web", Some("pve2"));
        // pve2 left the image: its template waits for web, on pve2.
        let mut fewer = image.clone();
        fewer.spec.for_provider.nodes = vec!["pve1".into()];
        let status = fewer.status.as_mut().unwrap();
        status.at_provider.locations.retain(|l| l.node == "pve1");
        assert!(
            work(&fewer, &[&one, &two, &web], &lvm_thin_everywhere())
                .delete
                .is_empty()
        );
        let plan = work(&fewer, &[&one, &two], &lvm_thin_everywhere());
        assert_eq!(
            plan.delete,
            [("noble-tpl-pve2".to_owned(), "uid-pve2".to_owned())]
        );
        // The image deleted: nothing goes while any ProxmoxVM names it ...
        let mut deleted = image.clone();
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        let waiting = clone("db", None);
        let plan = work(&deleted, &[&one, &two, &waiting], &lvm_thin_everywhere());
        assert_eq!(plan, Work::default(), "nothing created, deleted or written");
        // ... then every template.
        let plan = work(&deleted, &[&one, &two], &lvm_thin_everywhere());
        assert_eq!(plan.delete.len(), 2);
        // A VM of the same name that another image (UID) owns is not ours.
        let mut foreign = two.clone();
        foreign.metadata.owner_references.as_mut().unwrap()[0].uid = "other".into();
        let plan = work(&deleted, &[&foreign], &lvm_thin_everywhere());
        assert!(plan.delete.is_empty());
    }

    #[test]
    fn a_proxmoxvm_of_the_name_that_is_not_the_images_is_left_alone() {
        let image = image(&["pve1"]);
        let mut theirs = clone("noble-tpl-pve1", None);
        theirs.spec.for_provider.clone = None;
        let plan = work(&image, &[&theirs], &lvm_thin_everywhere());
        assert!(plan.create.is_empty(), "{:?}", plan.create);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.taken, ["noble-tpl-pve1"]);
        let at = &plan.status.unwrap()["status"]["atProvider"];
        assert_eq!(at["templates"][0]["ready"], false);
    }

    #[test]
    fn long_names_are_shortened_with_a_hash() {
        assert_eq!(child::name("noble", "pve1"), "noble-tpl-pve1");
        let long = "a".repeat(60);
        let (one, two) = (child::name(&long, "pve1"), child::name(&long, "pve2"));
        assert_eq!(one.len(), 63);
        assert_ne!(one, two, "the hash tells them apart");
        assert!(one.starts_with(&"a".repeat(54)), "{one}");
        assert_eq!(child::label_value("noble"), "noble");
        assert!(child::label_value(&"b".repeat(100)).len() <= 63);
    }
}
