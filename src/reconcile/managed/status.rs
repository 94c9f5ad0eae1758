//! Writing `status`: server-side apply on the status subresource with the
//! controller's field manager, only when it changed.
//!
//! Conditions keep their `lastTransitionTime` when nothing else about them
//! changed (see [`crate::api::set_condition`]), so a pass that learns
//! nothing new writes nothing and does not wake the watch again.
//!
//! A status is applied on the resourceVersion its pass read
//! (or its own metadata write produced): the API server refuses it (409)
//! when anything wrote the resource since, so a pass that was paused, or
//! ran on a replica that lost the config's Lease, cannot overwrite the
//! fresher status of the config's new holder. The refused pass is retried
//! on the current version.

use kube::api::{Patch, PatchParams};
use kube::core::object::HasStatus;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::managed::{ManagedStatus, RECONCILE_REQUESTED_AT};
use crate::reconcile::error::{Error, is_not_found};
use crate::reconcile::runtime::settings::FIELD_MANAGER;

/// Server-side applies `status` to the status subresource of the object
/// `name` (owning every field it holds, so a field left out is removed).
/// Returns the resourceVersion written; `Ok(None)`: the object is gone.
pub async fn apply<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<Option<String>, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    apply_on(api, name, status, None).await
}

/// [`apply`], conditional on the object being at `base` when given.
pub async fn apply_on<K, S>(
    api: &Api<K>,
    name: &str,
    status: &S,
    base: Option<&str>,
) -> Result<Option<String>, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let mut body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": serde_json::to_value(status)
            .map_err(|source| Error::Serialize { what: "the status", source })?,
    });
    if let Some(version) = base {
        // An apply that names a resourceVersion is a precondition.
        body["metadata"] = json!({ "resourceVersion": version });
    }
    match api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(written) => Ok(Some(written.resource_version().unwrap_or_default())),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The field manager of `status.lastHandledReconcileAt` alone: the kinds'
/// own status writes (server-side apply with [`FIELD_MANAGER`], owning
/// every field they hold) build their status afresh and leave it out, and
/// a field another manager owns is not removed by leaving it out.
const REQUESTS_MANAGER: &str = "crossplane-provider-proxmox-requests";

/// Answers a `crossplane.io/reconcile-requested-at` request after a pass
/// of `obj` that ran (crossplane-runtime's contract): the annotation's
/// value is echoed in `status.lastHandledReconcileAt`. One write per new
/// value; nothing when there is no request or it was answered already.
pub async fn echo_request<K, A>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = ()>
        + HasStatus<Status = ManagedStatus<A>>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    A: Default,
{
    let Some(token) = unanswered(obj) else {
        return Ok(());
    };
    let body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": {"lastHandledReconcileAt": token},
    });
    let params = PatchParams::apply(REQUESTS_MANAGER).force();
    match api
        .patch_status(&obj.name_any(), &params, &Patch::Apply(&body))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The request of `obj` not answered yet, if any.
fn unanswered<K, A>(obj: &K) -> Option<&str>
where
    K: Resource + HasStatus<Status = ManagedStatus<A>>,
    A: Default,
{
    let token = obj
        .meta()
        .annotations
        .as_ref()?
        .get(RECONCILE_REQUESTED_AT)?;
    let handled = obj
        .status()
        .and_then(|s| s.last_handled_reconcile_at.as_deref());
    (handled != Some(token.as_str())).then_some(token.as_str())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::ProxmoxPool;

    fn pool(request: Option<&str>, handled: Option<&str>) -> ProxmoxPool {
        let mut pool: ProxmoxPool = serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxPool",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "forProvider": {"poolId": "p"},
                "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
            },
        }))
        .unwrap();
        pool.metadata.annotations =
            request.map(|r| BTreeMap::from([(RECONCILE_REQUESTED_AT.to_owned(), r.to_owned())]));
        pool.status = handled.map(|h| ManagedStatus {
            last_handled_reconcile_at: Some(h.to_owned()),
            ..ManagedStatus::default()
        });
        pool
    }

    #[test]
    fn a_request_is_answered_once_per_value() {
        // (annotation, status.lastHandledReconcileAt) -> echoed
        let rows = [
            (None, None, None),
            (None, Some("t1"), None),
            (Some("t1"), None, Some("t1")),
            (Some("t2"), Some("t1"), Some("t2")),
            (Some("t2"), Some("t2"), None),
        ];
        for (request, handled, want) in rows {
            let pool = pool(request, handled);
            assert_eq!(unanswered(&pool), want, "{request:?} {handled:?}");
        }
    }

    #[test]
    fn the_echo_is_not_part_of_what_a_pass_compares() {
        let mut echoed = pool(Some("t1"), Some("t1")).status.unwrap();
        let fresh = ManagedStatus::default();
        assert_eq!(echoed, fresh, "a status built afresh is not a change");
        echoed.observed_generation = Some(2);
        assert_ne!(echoed, fresh);
    }
}
