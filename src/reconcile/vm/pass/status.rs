//! Writing a ProxmoxVM's `status`, only when it changed, on the
//! resourceVersion its pass read (see [`crate::reconcile::managed::status`]).

use kube::Api;

use crate::api::{ProxmoxVM, ProxmoxVMStatus};
use crate::reconcile::error::Error;
use crate::reconcile::identity::Identity;
use crate::reconcile::managed::status::apply_on;

/// Writes `status` unless `vm` already has it, on the resourceVersion
/// `base` (`None`: unconditionally); returns the resourceVersion of the
/// write, if it wrote. A resource that is gone (deleted after its
/// finalizer was removed) is not an error; one written since `base` is
/// (a conflict, retried).
pub async fn write(
    kube: &kube::Client,
    (vm, id): (&ProxmoxVM, &Identity),
    status: &ProxmoxVMStatus,
    base: Option<&str>,
) -> Result<Option<String>, Error> {
    if vm.status.as_ref() == Some(status) {
        return Ok(None);
    }
    let api: Api<ProxmoxVM> = Api::namespaced(kube.clone(), &id.namespace);
    apply_on(&api, &id.name, status, base).await
}
