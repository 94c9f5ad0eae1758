//! A ProxmoxImage as the kinds that use one (a VM's disk or clone, a
//! container's template) see it: from the image cache, read afresh just
//! before a use.

use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::ProxmoxImage;
use crate::reconcile::common::images::NamedImage;

/// The image `namespace/name` in the controller's image cache
/// (`Context::images`), once the cache has listed: `Some(None)` when it
/// does not exist, `None` before the cache is filled.
pub fn lookup(
    images: &Store<ProxmoxImage>,
    namespace: &str,
    name: &str,
) -> Option<Option<Arc<ProxmoxImage>>> {
    futures::FutureExt::now_or_never(images.wait_until_ready())?.ok()?;
    Some(images.get(&ObjectRef::new(name).within(namespace)))
}

/// The image `namespace/name` as a resource about to use it must see it:
/// from the cache, and read afresh when the cache says it is usable, so
/// nothing starts on an image whose deletion the cache does not show yet
/// (the race guard of b5d2f37, for VMs and containers alike). The image
/// counts its users from the same caches, so one that saw no deletion
/// here holds the image's files. One GET, only before a use.
pub async fn named(
    kube: &kube::Client,
    images: &Store<ProxmoxImage>,
    namespace: &str,
    name: &str,
) -> Result<NamedImage, kube::Error> {
    Ok(match lookup(images, namespace, name) {
        None => NamedImage::Unknown,
        Some(None) => NamedImage::NotFound,
        Some(Some(cached)) if NamedImage::of(&cached).usable() => {
            match kube::Api::<ProxmoxImage>::namespaced(kube.clone(), namespace)
                .get_opt(name)
                .await?
            {
                Some(fresh) => NamedImage::of(&fresh),
                None => NamedImage::NotFound,
            }
        }
        Some(Some(cached)) => NamedImage::of(&cached),
    })
}
