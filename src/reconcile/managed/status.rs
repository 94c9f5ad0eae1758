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
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

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
