//! What every kind's watch shares: its scope, a kind whose CRD is not
//! served, and the stop when it never listed.

use std::future::Future;

use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{Lookup, ObjectRef, Store};
use kube::runtime::watcher;
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

/// A watch whose kind's CRD is not served reads as a kind without objects.
///
/// Crossplane's safe-start installs a provider's CRDs only as operators
/// activate its kinds (a `ManagedResourceActivationPolicy`), so any kind
/// may be missing, and may come later. Its watch's list is then answered
/// 404; that means "no such objects", and is passed on as an empty list
/// (the cache is filled, empty), so nothing waits for it: neither
/// `/readyz` nor a provider config counting its users. The watch keeps
/// retrying with its backoff (at most 30 s apart) and lists for real as
/// soon as the CRD is served: each kind's controller starts when its CRD
/// comes, and none keeps the others from running.
pub fn unserved_as_empty<K, S>(
    kind: impl Into<String>,
    events: S,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>>
where
    S: Stream<Item = watcher::Result<watcher::Event<K>>>,
{
    let (kind, mut unserved) = (kind.into(), false);
    events.flat_map(move |event| {
        let now_unserved = matches!(
            &event,
            Err(watcher::Error::InitialListFailed(kube::Error::Api(status))) if status.code == 404
        );
        if now_unserved != unserved && (now_unserved || event.is_ok()) {
            unserved = now_unserved;
            if unserved {
                tracing::info!(%kind, "its CRD is not served: no objects until it is");
            } else {
                tracing::info!(%kind, "its CRD is served: watching it");
            }
        }
        futures::stream::iter(if now_unserved {
            vec![Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)]
        } else {
            vec![event]
        })
    })
}

/// Resolves once `stop` has resolved if the cache `store` never listed,
/// else never: a controller runs until this or its own end, whichever
/// comes first.
///
/// kube-runtime holds a controller's passes until its cache has listed,
/// and keeps holding them through a graceful shutdown: a watch that never
/// lists (an RBAC without list/watch of the kind)
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::Status;

    fn refused(code: u16) -> watcher::Result<watcher::Event<ConfigMap>> {
        let status = Status::failure("refused", "Refused").with_code(code);
        Err(watcher::Error::InitialListFailed(kube::Error::Api(
            status.boxed(),
        )))
    }

    /// What comes out, as short words.
    async fn seen(events: Vec<watcher::Result<watcher::Event<ConfigMap>>>) -> Vec<String> {
        unserved_as_empty("ConfigMap", futures::stream::iter(events))
            .map(|event| match event {
                Ok(watcher::Event::Init) => "init".to_owned(),
                Ok(watcher::Event::InitApply(_)) => "init-apply".to_owned(),
                Ok(watcher::Event::InitDone) => "init-done".to_owned(),
                Ok(watcher::Event::Apply(_)) => "apply".to_owned(),
                Ok(watcher::Event::Delete(_)) => "delete".to_owned(),
                Err(e) => format!("error: {e}"),
            })
            .collect()
            .await
    }

    #[tokio::test]
    async fn an_unserved_kind_lists_empty_until_its_crd_is_served() {
        let events = vec![
            refused(404),
            refused(404),
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(ConfigMap::default())),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(ConfigMap::default())),
        ];
        assert_eq!(
            seen(events).await,
            [
                "init",
                "init-done",
                "init",
                "init-done",
                "init",
                "init-apply",
                "init-done",
                "apply"
            ]
        );
    }

    #[tokio::test]
    async fn other_refusals_stay_errors() {
        // 403: the kind is served, the provider may not list it; nothing
        // may read as empty then (a config's users would be miscounted).
        let out = seen(vec![refused(403), refused(500)]).await;
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|o| o.starts_with("error: ")), "{out:?}");
    }
}
