//! The kube-runtime Controller of ProxmoxContainers, run beside the
//! ProxmoxVMs' and sharing their [`Context`] (provider configs and their
//! clients, the VMID allocator and placement, the cluster view, events,
//! the admission queue).
//!
//! Watched through `DeserializeGuard` (a malformed object cannot stall the
//! watch), with a predicate filter on generation, annotations and
//! finalizers: the controller's own status writes do not trigger passes. A
//! task's end wakes the resource through the VMs' task watcher
//! ([`crate::reconcile::runtime::wake`]); otherwise a pass says itself when
//! to look again (the resync interval once settled).

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use k8s_openapi::api::core::v1::Secret;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};

use super::pass::{error_policy, reconcile};
use crate::api::ProxmoxContainer;
use crate::reconcile::context::Context;
use crate::reconcile::managed::connection_secret::MANAGED_BY;
use crate::reconcile::managed::guard;
use crate::reconcile::managed::watch::{never_listed, scoped};

/// The cache of ProxmoxContainers, made before the [`Context`] that holds
/// its reader.
pub fn store() -> (
    Store<DeserializeGuard<ProxmoxContainer>>,
    Writer<DeserializeGuard<ProxmoxContainer>>,
) {
    kube::runtime::reflector::store()
}

/// Runs the container controller until `stop` resolves; `see` sees each
/// event of its watch before the cache takes it in, and `after` is called
/// once it did (the task watcher's count, the selector wakers' flush).
pub async fn run(
    ctx: Arc<Context>,
    (writer, wakeups): (
        Writer<DeserializeGuard<ProxmoxContainer>>,
        UnboundedReceiver<ObjectRef<DeserializeGuard<ProxmoxContainer>>>,
    ),
    after: impl Fn() + Send + 'static,
    see: impl Fn(&Result<watcher::Event<DeserializeGuard<ProxmoxContainer>>, watcher::Error>)
    + Send
    + 'static,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let reader = ctx.containers.clone();
    let stream = guard::watch::<ProxmoxContainer>(
        &ctx.kube,
        ctx.settings.namespace.as_deref(),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff();
    let stream = crate::reconcile::managed::watch::unserved_as_empty("ProxmoxContainer", stream)
        // Before the cache takes the event in: it holds the old object
        // (what other kinds wake on: the images a container names, the
        // IP sets and backup jobs selecting it).
        .inspect(see)
        .reflect(writer)
        .inspect(move |_| after())
        .applied_objects()
        .predicate_filter(
            predicates::generation
                .combine(predicates::annotations)
                .combine(predicates::finalizers),
            Default::default(),
        );
    // Its connection Secrets (owned, labelled): a deleted or edited one is
    // written again.
    let secrets = watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let run = Controller::for_stream(stream, reader)
        .owns(
            scoped::<Secret>(&ctx.kube, ctx.settings.namespace.as_deref()),
            secrets,
        )
        // The task watcher's wake-ups: a task ended.
        .reconcile_on(wakeups)
        // The shared admission queue caps passes, as for VMs.
        .with_config(Config::default().concurrency(0))
        .graceful_shutdown_on(stop.clone())
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .for_each(|result| async move {
            match result {
                Ok((ct, action)) => tracing::trace!(container = %ct, ?action, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "container controller"),
            }
        });
    let never_listed = never_listed(ctx.containers.clone(), "ProxmoxContainer", stop);
    tokio::select! {
        () = run => {}
        () = never_listed => {}
    }
}
