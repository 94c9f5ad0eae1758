//! The controller's cache of ProxmoxImages, as the VMs that clone an
//! image's template (`clone.image`) read it: no request of their own.

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::ProxmoxImage;
use crate::reconcile::common::images::{ImageLookup, ImageTemplate};

/// The ProxmoxImages the controller watches.
pub type Images = Store<ProxmoxImage>;

/// The image `name` of `namespace`, as a clone of its template sees it.
pub fn lookup(images: &Images, namespace: &str, name: &str) -> ImageLookup {
    let Some(image) = images.get(&ObjectRef::new(name).within(namespace)) else {
        return ImageLookup::NotFound;
    };
    of(&image)
}

/// What a clone of `image`'s template sees of it.
pub fn of(image: &ProxmoxImage) -> ImageLookup {
    if image.spec.for_provider.template.is_none() {
        return ImageLookup::NoTemplate;
    }
    if image.metadata.deletion_timestamp.is_some() {
        return ImageLookup::Deleting;
    }
    let templates = image
        .status
        .as_ref()
        .map(|s| s.at_provider.templates.as_slice())
        .unwrap_or_default();
    ImageLookup::Templates(
        templates
            .iter()
            .map(|t| ImageTemplate {
                node: t.node.clone(),
                vmid: t.vmid,
                ready: t.ready,
                linkable: t.linkable,
            })
            .collect(),
    )
}

/// `namespace/name` of an image.
pub fn full_name(image: &ProxmoxImage) -> String {
    format!(
        "{}/{}",
        image.namespace().unwrap_or_default(),
        image.name_any()
    )
}
