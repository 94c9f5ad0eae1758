//! The resource as a pass must see it: the controller's cache when it shows
//! our own last write (no request), else a fresh read.

use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use crate::api::ProxmoxVM;
use crate::reconcile::context::Context;
use crate::reconcile::error::Error;
use crate::reconcile::identity::Identity;

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
    if ctx
        .memory
        .cache_is_current(&id.uid, cached.resource_version().as_deref())
    {
        return Ok(Some(cached));
    }
    let api: Api<ProxmoxVM> = Api::namespaced(ctx.kube.clone(), &id.namespace);
    match api.get_opt(&id.name).await {
        Ok(Some(vm)) => {
            ctx.memory.saw(&id.uid, vm.resource_version());
            Ok(Some(vm))
        }
        Ok(None) => {
            ctx.memory.forget(&id.uid);
            Ok(None)
        }
        Err(kube::Error::SerdeError(e)) => Err(Error::InvalidObject {
            name: id.to_string(),
            message: e.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}
