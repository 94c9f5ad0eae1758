//! Writing `status`: server-side apply on the status subresource with the
//! controller's field manager, only when it changed.
//!
//! Conditions keep their `lastTransitionTime` when nothing else about them
//! changed (see [`crate::api::set_condition`]), so a pass that learns
//! nothing new writes nothing and does not wake the watch again.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::error::{Error, is_not_found};
use super::settings::FIELD_MANAGER;
use crate::api::{ProxmoxVM, ProxmoxVMStatus};

/// Writes `status` unless `vm` already has it. A resource that is gone
/// (deleted after its finalizer was removed) is not an error.
pub async fn write(
    kube: &kube::Client,
    vm: &ProxmoxVM,
    status: &ProxmoxVMStatus,
) -> Result<bool, Error> {
    if vm.status.as_ref() == Some(status) {
        return Ok(false);
    }
    let body = json!({
        "apiVersion": ProxmoxVM::api_version(&()),
        "kind": ProxmoxVM::kind(&()),
        "status": serde_json::to_value(status)
            .map_err(|source| Error::Serialize { what: "the status", source })?,
    });
    let api: Api<ProxmoxVM> = Api::namespaced(kube.clone(), &vm.namespace().unwrap_or_default());
    match api
        .patch_status(
            &vm.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
