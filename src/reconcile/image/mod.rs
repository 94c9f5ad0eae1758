//! The ProxmoxImage controller: a file downloaded once per storage (once
//! for a shared one), shared by the VMs that name it, deleted with the
//! image once nothing refers to it.
//!
//! | module | concept |
//! |---|---|
//! | [`names`] | the file an image downloads and the volume it becomes |
//! | [`plan`] | the decisions, pure: per location, the task, the file, the next call; the deletion |
//! | [`pass`] | one pass: connect, observe, plan, act, settle, write the status (its own fields only) |
//! | [`refs`] | who refers to an image: `disks[].image.name`, its template VMs |
//!
//! It runs beside the VM controller and shares its context: the provider
//! configs and their clients, the shards (a pass only for a config this
//! replica holds), the admission queue, the cluster views, the events.

pub mod names;
pub mod pass;
pub mod plan;
pub mod refs;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};

use crate::api::ProxmoxImage;
use crate::reconcile::runtime::context::Context;

/// The image controller's cache, for the VM passes that read an image.
#[derive(Default)]
pub struct Images {
    store: OnceLock<Store<ProxmoxImage>>,
}

impl Images {
    /// The image `namespace/name`, once the cache has listed: `Some(None)`
    /// when it does not exist, `None` before the cache is filled.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Option<Arc<ProxmoxImage>>> {
        let store = self.store.get()?;
        futures::FutureExt::now_or_never(store.wait_until_ready())?.ok()?;
        Some(store.get(&ObjectRef::new(name).within(namespace)))
    }
}

/// Wakes the images a VM watch event concerns (see
/// [`refs::images_of`]): a referring VM gone lets a deleted image go, a VM
/// placed on a node brings the file there.
#[derive(Clone, Debug)]
pub struct ImageWaker(UnboundedSender<ObjectRef<ProxmoxImage>>);

impl ImageWaker {
    /// The waker and the stream the image controller reads.
    pub fn new() -> (Self, UnboundedReceiver<ObjectRef<ProxmoxImage>>) {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        (Self(tx), rx)
    }

    /// Sees one event of the VM watch.
    pub fn see(
        &self,
        event: &Result<
            watcher::Event<kube::core::DeserializeGuard<crate::api::ProxmoxVM>>,
            watcher::Error,
        >,
    ) {
        let Ok(event) = event else { return };
        let vms = match event {
            watcher::Event::Apply(obj)
            | watcher::Event::Delete(obj)
            | watcher::Event::InitApply(obj) => std::slice::from_ref(obj),
            watcher::Event::Init | watcher::Event::InitDone => return,
        };
        for obj in vms {
            let Ok(vm) = &obj.0 else { continue };
            for image in refs::images_of(vm) {
                // Closed only when the controller stopped.
                let _ = self.0.unbounded_send(image);
            }
        }
    }
}

/// The templates the fleet controller reports, as a predicate value: the
/// image's Ready depends on them, so a change must trigger a pass.
fn templates(image: &ProxmoxImage) -> Option<u64> {
    let templates = image.status.as_ref().map(|s| &s.at_provider.templates)?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(templates).ok()?.hash(&mut hasher);
    Some(hasher.finish())
}

/// Runs the image controller until `stop` resolves.
pub async fn run(
    ctx: Arc<Context>,
    wakeups: UnboundedReceiver<ObjectRef<ProxmoxImage>>,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let api = crate::reconcile::runtime::controller::scoped::<ProxmoxImage>(
        &ctx.kube,
        ctx.settings.namespace.as_deref(),
    );
    let (reader, writer) = reflector::store();
    // The VM passes read images from this cache.
    let _ = ctx.images.store.set(reader.clone());
    let images = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            predicates::generation
                .combine(predicates::finalizers)
                .combine(templates),
            Default::default(),
        );
    let controller = Controller::for_stream(images, reader)
        .reconcile_on(wakeups)
        .with_config(Config::default().concurrency(0))
        .graceful_shutdown_on(stop);
    tracing::info!("image controller started");
    controller
        .run(pass::reconcile, pass::error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((image, action)) => tracing::trace!(image = %image, ?action, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "image controller"),
            }
        })
        .await;
}
