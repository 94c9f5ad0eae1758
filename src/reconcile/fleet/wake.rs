//! Wake-ups between images and VMs, from the watches the controller
//! already has (no request of their own):
//!
//! * an image appearing, going, changing its spec or its templates wakes
//!   the VMs that clone it and are not created yet ([`Clones`], on the
//!   image watch, before its cache takes the change in);
//! * a template ProxmoxVM changing, or a clone appearing, moving to a node
//!   or going, wakes its image's fleet pass ([`Images`], on the VM watch):
//!   the templates status follows its children, and a deletion waiting for
//!   clones goes on when the last one is gone.

use futures::channel::mpsc::UnboundedSender;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::child;
use super::templates::clones_image;
use crate::api::meta::EXTERNAL_CREATE_SUCCEEDED;
use crate::api::vm::vm_ref;
use crate::api::{ProxmoxImage, ProxmoxVM};
use crate::reconcile::common::image_cache::{self as cache, Images as ImageStore};
use crate::reconcile::common::images::ImageLookup;
use crate::reconcile::runtime::wake::Waker;

/// Wakes the clones waiting for an image when it changes.
pub struct Clones {
    images: ImageStore,
    vms: Store<DeserializeGuard<ProxmoxVM>>,
    waker: Waker<DeserializeGuard<ProxmoxVM>>,
}

impl Clones {
    /// Compares with `images`, finds the clones in `vms`, wakes them through
    /// `waker`.
    pub fn new(
        images: ImageStore,
        vms: Store<DeserializeGuard<ProxmoxVM>>,
        waker: Waker<DeserializeGuard<ProxmoxVM>>,
    ) -> Self {
        Self { images, vms, waker }
    }

    /// Looks at one event of the image watch.
    pub fn see(&self, event: &Result<watcher::Event<ProxmoxImage>, watcher::Error>) {
        let image = match event {
            Ok(watcher::Event::Apply(image) | watcher::Event::InitApply(image)) => {
                let before = self.images.get(&ObjectRef::from_obj(image));
                if before.is_some_and(|b| progress(&b) == progress(image)) {
                    return;
                }
                image
            }
            Ok(watcher::Event::Delete(image)) => image,
            Ok(watcher::Event::Init | watcher::Event::InitDone) | Err(_) => return,
        };
        for vm in waiting_for(&self.vms, image) {
            tracing::debug!(
                image = %cache::full_name(image), clone = %format!("{}/{}", vm.namespace.as_deref().unwrap_or_default(), vm.name),
                "the image's templates changed; waking its clone"
            );
            self.waker.wake(vm);
        }
    }
}

/// What of an image ends a clone's wait: its spec, its deletion, and the
/// templates that can be cloned. A template listed, given its VMID or
/// anything else short of ready wakes nobody: with a thousand clones
/// waiting, each such wake-up was a thousand passes queued ahead of the
/// template's own (their messages catch up at the next wake-up or resync).
fn progress(image: &ProxmoxImage) -> (Option<i64>, bool, ImageLookup) {
    (
        image.metadata.generation,
        image.metadata.deletion_timestamp.is_some(),
        clonable(cache::of(image)),
    )
}

/// The part of a lookup a waiting clone acts on: the templates ready to
/// clone (with their VMID and whether clones link), not those on the way.
fn clonable(lookup: ImageLookup) -> ImageLookup {
    match lookup {
        ImageLookup::Templates(templates) => ImageLookup::Templates(
            templates
                .into_iter()
                .filter(|t| t.ready && t.vmid.is_some())
                .collect(),
        ),
        other @ (ImageLookup::NotFound | ImageLookup::NoTemplate | ImageLookup::Deleting) => other,
    }
}

/// The ProxmoxVMs in `vms` that clone `image` and are not created yet.
fn waiting_for(
    vms: &Store<DeserializeGuard<ProxmoxVM>>,
    image: &ProxmoxImage,
) -> Vec<crate::api::vm::VmRef> {
    let (namespace, name) = (image.namespace(), image.name_any());
    vms.state()
        .iter()
        .filter_map(|obj| obj.0.as_ref().ok())
        .filter(|vm| vm.namespace() == namespace && clones_image(vm, &name))
        .filter(|vm| vm.annotation(EXTERNAL_CREATE_SUCCEEDED).is_none())
        .map(vm_ref)
        .collect()
}

/// Wakes the fleet pass of an image when one of its templates or clones
/// changes.
pub struct Images {
    vms: Store<DeserializeGuard<ProxmoxVM>>,
    sender: UnboundedSender<ObjectRef<ProxmoxImage>>,
}

impl Images {
    /// Compares with `vms` (the VM cache, before it takes the event in);
    /// wakes through `sender`.
    pub fn new(
        vms: Store<DeserializeGuard<ProxmoxVM>>,
        sender: UnboundedSender<ObjectRef<ProxmoxImage>>,
    ) -> Self {
        Self { vms, sender }
    }

    /// Looks at one event of the VM watch.
    pub fn see(&self, event: &Result<watcher::Event<DeserializeGuard<ProxmoxVM>>, watcher::Error>) {
        let (vm, deleted) = match event {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => (obj, false),
            Ok(watcher::Event::Delete(obj)) => (obj, true),
            Ok(watcher::Event::Init | watcher::Event::InitDone) | Err(_) => return,
        };
        let Ok(vm) = &vm.0 else { return };
        let Some(namespace) = vm.namespace() else {
            return;
        };
        let image = if let Some(owner) = template_owner(vm) {
            // A template: its status is the image's templates status.
            owner
        } else if let Some(image) = vm
            .spec
            .for_provider
            .clone
            .as_ref()
            .and_then(|c| c.image.clone())
        {
            // A clone matters to its image only by being there, where.
            let before = self.vms.get(&vm_ref(vm));
            let before = before.as_deref().and_then(|o| o.0.as_ref().ok());
            if !deleted && before.is_some_and(|b| placement(b) == placement(vm)) {
                return;
            }
            image
        } else {
            return;
        };
        // Closed only when the controller stopped: nothing to wake.
        let _ = self
            .sender
            .unbounded_send(ObjectRef::new(&image).within(&namespace));
    }
}

/// The image controlling a template ProxmoxVM.
fn template_owner(vm: &ProxmoxVM) -> Option<String> {
    vm.labels().get(child::IMAGE_LABEL)?;
    vm.owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "ProxmoxImage")
        .map(|o| o.name.clone())
}

/// Where a clone is and whether it is going.
fn placement(vm: &ProxmoxVM) -> (Option<&str>, bool) {
    (
        vm.status
            .as_ref()
            .and_then(|s| s.at_provider.node.as_deref()),
        vm.metadata.deletion_timestamp.is_some(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::common::images::ImageTemplate;

    fn template(node: &str, vmid: Option<u32>, ready: bool) -> ImageTemplate {
        ImageTemplate {
            node: node.into(),
            vmid,
            ready,
            linkable: true,
        }
    }

    #[test]
    fn only_a_template_becoming_clonable_ends_a_wait() {
        let on_the_way = ImageLookup::Templates(vec![template("pve1", None, false)]);
        let with_vmid = ImageLookup::Templates(vec![template("pve1", Some(200), false)]);
        let ready = ImageLookup::Templates(vec![template("pve1", Some(200), true)]);
        let table = [
            (
                "listed, then its VMID recorded",
                &on_the_way,
                &with_vmid,
                false,
            ),
            (
                "nothing, then listed",
                &ImageLookup::Templates(vec![]),
                &on_the_way,
                false,
            ),
            ("ready", &with_vmid, &ready, true),
            ("ready no more", &ready, &with_vmid, true),
            ("being deleted", &with_vmid, &ImageLookup::Deleting, true),
            (
                "its template spec gone",
                &on_the_way,
                &ImageLookup::NoTemplate,
                true,
            ),
            (
                "the image appears",
                &ImageLookup::NotFound,
                &ImageLookup::Templates(vec![]),
                true,
            ),
        ];
        for (what, before, after, wakes) in table {
            let changed = clonable(before.clone()) != clonable(after.clone());
            assert_eq!(changed, wakes, "{what}");
        }
    }
}
