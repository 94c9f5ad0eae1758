//! What every kind's watch shares: its scope, and the stop when it never
//! listed.

use std::future::Future;

use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::{Api, Resource};

/// An API for all namespaces, or only `namespace`.
pub(crate) fn scoped<K>(kube: &kube::Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(kube.clone(), ns),
        None => Api::all(kube.clone()),
    }
}

/// Resolves once `stop` has resolved if the cache `store` never listed,
/// else never: a controller runs until this or its own end, whichever
/// comes first.
///
/// kube-runtime holds a controller's passes until its cache has listed,
/// and keeps holding them through a graceful shutdown: a watch that never
/// lists (an RBAC without list/watch of the kind, a CRD not installed)
/// would keep the process from stopping. Once stopping, a cache that never
/// listed has no pass to finish, so nothing is cut short.
pub async fn never_listed<K>(store: Store<K>, kind: &'static str, stop: impl Future<Output = ()>)
where
    K: Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    stop.await;
    if store.wait_until_ready().now_or_never().is_none() {
        tracing::warn!(
            kind,
            "the watch never listed (RBAC without list/watch?): stopping without it"
        );
        return;
    }
    std::future::pending::<()>().await;
}

/// Drives a controller's passes until they end, or until `stop` resolved
/// and its cache `store` never listed ([`never_listed`]): what every kind's
/// `run` does once its `Controller` is built.
pub async fn drive<K, E1, E2>(
    kind: &'static str,
    passes: impl Stream<Item = Result<(ObjectRef<K>, Action), controller::Error<E1, E2>>>,
    store: Store<K>,
    stop: impl Future<Output = ()>,
) where
    K: Lookup + Resource + Clone + 'static,
    <K as Lookup>::DynamicType: Eq + std::hash::Hash + Clone,
    <K as Resource>::DynamicType: std::fmt::Debug,
    E1: std::error::Error + 'static,
    E2: std::error::Error + 'static,
{
    tracing::info!(kind, "controller started");
    let passes = passes.for_each(|result| async move {
        match result {
            Ok((object, action)) => tracing::trace!(kind, %object, ?action, "reconciled"),
            Err(e) => tracing::debug!(kind, error = %e, "controller"),
        }
    });
    tokio::select! {
        () = passes => {}
        () = never_listed(store, kind, stop) => {
            tracing::info!(kind, "controller stopped before its cache was filled");
        }
    }
}
