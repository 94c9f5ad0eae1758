//! What every kind's watch shares: its scope, and the stop when it never
//! listed.

use std::future::Future;

use futures::FutureExt;
use kube::runtime::reflector::{Lookup, Store};
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
