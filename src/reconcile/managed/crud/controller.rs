//! The controller of a CRUD kind, whatever the kind: its watch (a pass
//! when the spec, the annotations or the finalizers change), the stop when the watch never
//! listed, and [`super::pass`] for each resource.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};

use kube::core::object::HasStatus;

use super::pass::{self, Ctx, Kind};
use crate::api::managed::ManagedStatus;
use crate::reconcile::managed::states::{self, Lifecycle};
use crate::reconcile::managed::watch;

/// Runs the controller of `K` until `stop` resolves; `writer`: the cache
/// it fills (another kind may read it); `wakeups`: passes asked for (a
/// config gained wakes every resource naming it, see `configs::Users`).
pub async fn run<K, A>(
    shared: Arc<Ctx<K::Extra>>,
    cache: (Writer<K>, UnboundedReceiver<ObjectRef<K>>),
    kind: &'static str,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) where
    K: Kind + HasStatus<Status = ManagedStatus<A>>,
    A: Default + 'static,
{
    run_seeing(shared, cache, kind, |_| {}, stop).await;
}

/// [`run`], with `see` shown each event of the watch before the cache
/// takes it in (what wakes another kind's resources, say).
pub async fn run_seeing<K, A>(
    shared: Arc<Ctx<K::Extra>>,
    (writer, wakeups): (Writer<K>, UnboundedReceiver<ObjectRef<K>>),
    kind: &'static str,
    see: impl Fn(&Result<watcher::Event<K>, watcher::Error>) + Send + 'static,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) where
    K: Kind + HasStatus<Status = ManagedStatus<A>>,
    A: Default + 'static,
{
    let api = watch::scoped::<K>(&shared.ctx.kube, shared.ctx.settings.namespace.as_deref());
    let reader = writer.as_reader();
    let lifecycle = Lifecycle::new::<K>(Arc::clone(&shared.ctx.metrics), states::plain::<K, A>);
    let objects = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    let objects = watch::unserved_as_empty(kind, objects)
        .inspect(move |event| lifecycle.see(event))
        .inspect(see)
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            // Annotations: `crossplane.io/paused` pauses and resumes.
            predicates::generation
                .combine(predicates::annotations)
                .combine(predicates::finalizers),
            Default::default(),
        );
    let never_listed = watch::never_listed(reader.clone(), kind, stop.clone());
    let controller = Controller::for_stream(objects, reader)
        .reconcile_on(wakeups)
        .with_config(Config::default().concurrency(0))
        .graceful_shutdown_on(stop);
    tracing::info!(kind, "controller started");
    let passes = controller
        .run(pass::reconcile::<K, A>, pass::error_policy::<K>, shared)
        .for_each(|result| async move {
            match result {
                Ok((obj, action)) => tracing::trace!(object = %obj, ?action, "reconciled"),
                Err(e) => tracing::debug!(error = %e, kind, "controller"),
            }
        });
    tokio::select! {
        () = passes => {}
        () = never_listed => tracing::info!(kind, "controller stopped before its cache was filled"),
    }
}
