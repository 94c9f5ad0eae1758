//! The resource as a pass must see it ([`fresh`]): the newest copy the
//! controller's cache holds, read afresh while it lags our own last write.

use kube::Api;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;

use crate::api::ProxmoxVM;
use crate::reconcile::context::Context;
use crate::reconcile::error::Error;
use crate::reconcile::identity::Identity;
use crate::reconcile::managed::fresh;

/// The resource for this pass; `None`: it is gone.
pub async fn current(
    obj: &DeserializeGuard<ProxmoxVM>,
    id: &Identity,
    ctx: &Context,
) -> Result<Option<ProxmoxVM>, Error> {
    let cached = match &obj.0 {
        Ok(vm) => {
            let key = ObjectRef::new(&id.name).within(&id.namespace);
            ctx.store
                .get(&key)
                .and_then(|latest| latest.0.as_ref().ok().cloned())
                .unwrap_or_else(|| vm.clone())
        }
        Err(invalid) => {
            return Err(Error::InvalidObject {
                name: id.to_string(),
                message: invalid.error.clone(),
            });
        }
    };
    let api: Api<ProxmoxVM> = Api::namespaced(ctx.kube.clone(), &id.namespace);
    match fresh::current(&cached, &api, &ctx.memory).await {
        Ok(vm) => Ok(vm),
        Err(kube::Error::SerdeError(e)) => Err(Error::InvalidObject {
            name: id.to_string(),
            message: e.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}
