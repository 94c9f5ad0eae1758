//! The ProxmoxImage controller: a file downloaded once per storage (once
//! for a shared one), shared by the VMs that name it, deleted with the
//! image once nothing refers to it.
//!
//! | module | concept |
//! |---|---|
//! | [`claim`] | which task of its file found in a node's list is an image's own (after a lost status write) |
//! | [`names`] | the file an image downloads and the volume it becomes |
//! | [`plan`] | the decisions, pure: per location, the task, the file, the next call; the deletion |
//! | [`pass`] | one pass: connect, observe, plan, act, settle, write the status (its own fields only) |
//! | [`refs`] | who refers to an image: `disks[].image.name`, its template VMs |
//! | [`Downloads`] | its downloads, for the task watcher to wake it when one ends |
//!
//! It runs beside the VM controller and shares its context: the provider
//! configs and their clients, the shards (a pass only for a config this
//! replica holds), the admission queue, the cluster views, the events.

pub mod claim;
pub mod names;
pub mod pass;
pub mod plan;
pub mod refs;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};

use kube::core::DeserializeGuard;

use crate::api::{ProxmoxContainer, ProxmoxImage, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::managed::states::{self, Lifecycle};
use crate::reconcile::managed::task_watch::{Followed, See};
use crate::reconcile::providers::ConfigKey;

pub use crate::reconcile::managed::images::{lookup, named};

/// Wakes the images a VM watch event concerns (see
/// [`refs::images_of`]) when what they read of the VM changed: a VM that
/// appears, goes, is being deleted, names other images, is placed on a
/// node or gets created. A VM's status writes (every few seconds while its
/// task runs) wake no image: an image pass lists storage content, and
/// those requests count.
#[derive(Clone)]
pub struct ImageWaker {
    sender: UnboundedSender<ObjectRef<ProxmoxImage>>,
    /// The VM cache, still holding the version before the event (the
    /// waker sees events before the cache takes them in).
    vms: Store<DeserializeGuard<ProxmoxVM>>,
}

impl ImageWaker {
    /// The waker and the stream the image controller reads.
    pub fn new(
        vms: Store<DeserializeGuard<ProxmoxVM>>,
    ) -> (Self, UnboundedReceiver<ObjectRef<ProxmoxImage>>) {
        let (sender, rx) = futures::channel::mpsc::unbounded();
        (Self { sender, vms }, rx)
    }

    /// How to ask the image controller for a pass of one image.
    pub fn sender(&self) -> UnboundedSender<ObjectRef<ProxmoxImage>> {
        self.sender.clone()
    }

    /// Sees one event of the VM watch.
    pub fn see(&self, event: &Result<watcher::Event<DeserializeGuard<ProxmoxVM>>, watcher::Error>) {
        let (obj, gone) = match event {
            Ok(watcher::Event::Apply(obj)) => (obj, false),
            Ok(watcher::Event::Delete(obj)) => (obj, true),
            // The image controller lists every image when it starts.
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init | watcher::Event::InitDone)
            | Err(_) => return,
        };
        let Ok(vm) = &obj.0 else { return };
        let cached = self.vms.get(&crate::api::vm::vm_ref(vm));
        let before = cached.as_ref().and_then(|old| old.0.as_ref().ok());
        if !gone && before.map(refs::seen_by_images) == Some(refs::seen_by_images(vm)) {
            return;
        }
        // The images it named before too: one it stopped naming may go.
        let old = before.map(refs::images_of).unwrap_or_default();
        let mut images = refs::images_of(vm);
        for image in old {
            if !images.contains(&image) {
                images.push(image);
            }
        }
        for image in images {
            // Closed only when the controller stopped.
            let _ = self.sender.unbounded_send(image);
        }
    }
}

/// The images' downloads for the task watcher (one task per location):
/// an image is woken when one of them ended, so its file is Ready, and
/// the template made from it created, without waiting for the image's
/// poll interval.
pub struct Downloads {
    /// The images (the fleet controller's cache, the same objects).
    pub store: Store<ProxmoxImage>,
    /// The image controller's wake-ups.
    pub wake: UnboundedSender<ObjectRef<ProxmoxImage>>,
}

impl Followed for Downloads {
    fn each(&self, see: &mut See<'_>) {
        for image in self.store.state() {
            let locations = image.status.as_ref().map(|s| &s.at_provider.locations);
            for task in locations
                .into_iter()
                .flatten()
                .filter_map(|l| l.task.as_ref())
            {
                see(
                    &image.metadata,
                    ConfigKey::of(image.as_ref()),
                    task.started(),
                );
            }
        }
    }

    fn wake(&self, namespace: &str, name: &str) {
        // Closed only when the controller stopped.
        let _ = self
            .wake
            .unbounded_send(ObjectRef::new(name).within(namespace));
    }
}

/// The templates the fleet controller reports, as a predicate value: the
/// image's Ready depends on them, so a change must trigger a pass.
/// Wakes the image a ProxmoxContainer names when what the image reads of
/// it changed (its image, node, state, deletion) or it is gone: an image
/// waiting `ImageInUse` goes on, a new node gets the file.
#[derive(Clone)]
pub struct ContainerImages {
    sender: UnboundedSender<ObjectRef<ProxmoxImage>>,
    containers: Store<DeserializeGuard<ProxmoxContainer>>,
}

impl ImageWaker {
    /// The same wake-ups, from the container watch.
    pub fn for_containers(
        &self,
        containers: Store<DeserializeGuard<ProxmoxContainer>>,
    ) -> ContainerImages {
        ContainerImages {
            sender: self.sender.clone(),
            containers,
        }
    }
}

impl ContainerImages {
    /// Looks at one event of the container watch.
    pub fn see(
        &self,
        event: &Result<watcher::Event<DeserializeGuard<ProxmoxContainer>>, watcher::Error>,
    ) {
        let (obj, gone) = match event {
            Ok(watcher::Event::Apply(obj)) => (obj, false),
            Ok(watcher::Event::Delete(obj)) => (obj, true),
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init | watcher::Event::InitDone)
            | Err(_) => return,
        };
        let Ok(ct) = &obj.0 else { return };
        let cached = self.containers.get(&ObjectRef::from_obj(obj));
        let before = cached.as_ref().and_then(|old| old.0.as_ref().ok());
        let seen = |ct: &ProxmoxContainer| {
            let at = ct.status.as_ref().map(|s| &s.at_provider);
            (
                refs::container_image(ct).map(str::to_owned),
                at.and_then(|a| a.node.clone()),
                at.and_then(|a| a.state),
                ct.metadata.deletion_timestamp.is_some(),
            )
        };
        if !gone && before.map(seen) == Some(seen(ct)) {
            return;
        }
        let Some(namespace) = kube::ResourceExt::namespace(ct) else {
            return;
        };
        let names = [
            before.and_then(refs::container_image),
            refs::container_image(ct),
        ];
        let mut sent: Vec<&str> = vec![];
        for name in names.into_iter().flatten() {
            if !sent.contains(&name) {
                sent.push(name);
                let _ = self
                    .sender
                    .unbounded_send(ObjectRef::new(name).within(&namespace));
            }
        }
    }
}

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
    let api = crate::reconcile::managed::watch::scoped::<ProxmoxImage>(
        &ctx.kube,
        ctx.settings.namespace.as_deref(),
    );
    let (reader, writer) = reflector::store();
    let lifecycle = Lifecycle::new::<ProxmoxImage>(Arc::clone(&ctx.metrics), states::plain);
    let images = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    let images = crate::reconcile::managed::watch::unserved_as_empty("ProxmoxImage", images)
        .inspect(move |event| lifecycle.see(event))
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            // Annotations: `crossplane.io/paused` pauses and resumes.
            predicates::generation
                .combine(predicates::annotations)
                .combine(predicates::finalizers)
                .combine(templates),
            Default::default(),
        );
    let never_listed = crate::reconcile::managed::watch::never_listed(
        reader.clone(),
        "ProxmoxImage",
        stop.clone(),
    );
    let controller = Controller::for_stream(images, reader)
        .reconcile_on(wakeups)
        .with_config(Config::default().concurrency(0))
        .graceful_shutdown_on(stop);
    tracing::info!("image controller started");
    let passes = controller
        .run(pass::reconcile, pass::error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((image, action)) => tracing::trace!(image = %image, ?action, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "image controller"),
            }
        });
    tokio::select! {
        () = passes => {}
        () = never_listed => tracing::info!("image controller stopped before its cache was filled"),
    }
}
