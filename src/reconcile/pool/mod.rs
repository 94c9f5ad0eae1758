//! The ProxmoxPool controller: a resource pool made and corrected by plain
//! calls, through the shared CRUD path ([`crate::reconcile::managed::crud`]).
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | pure: the pool wanted (comment with owner marker, ACL entries), the diff, the deletion held by members, what a pass says |
//! | [`pass`] | the kind for [`crate::reconcile::managed::crud::pass`]: what it wants, its calls, the refusal naming an entry, its status |
//!
//! Its members are the guests Proxmox lists in the pool. A ProxmoxVM that
//! names the pool (`forProvider.pool`) and gets created, or goes, wakes
//! the pools of its namespace with that ID ([`Members`]), so the status
//! shows it and a deletion waiting for it goes on; guests put in the pool
//! by other means are seen at the resync interval.

pub mod pass;
pub mod plan;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender};
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;

use crate::api::meta::{EXTERNAL_CREATE_SUCCEEDED, EXTERNAL_NAME};
use crate::api::{ProxmoxPool, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};

/// The pool cache and its writer (the VM watch's [`Members`] reads it).
pub fn store() -> (Store<ProxmoxPool>, reflector::store::Writer<ProxmoxPool>) {
    reflector::store()
}

/// Wakes the pools a VM watch event concerns: a VM naming a pool that
/// appears, gets created on Proxmox, is being deleted or goes. Its other
/// changes (status writes every few seconds while a task runs) wake no
/// pool: a pool pass asks Proxmox, and those requests count.
#[derive(Clone)]
pub struct Members {
    pools: Store<ProxmoxPool>,
    /// The VM cache, still holding the version before the event.
    vms: Store<DeserializeGuard<ProxmoxVM>>,
    wake: UnboundedSender<ObjectRef<ProxmoxPool>>,
}

/// What a pool reads of a VM: the pool it names, whether it exists on
/// Proxmox, whether it is going.
fn seen(vm: &ProxmoxVM) -> (Option<&str>, bool, bool, bool) {
    let annotations = vm.annotations();
    (
        vm.spec.for_provider.pool.as_deref(),
        annotations.contains_key(EXTERNAL_NAME),
        annotations.contains_key(EXTERNAL_CREATE_SUCCEEDED),
        vm.metadata.deletion_timestamp.is_some(),
    )
}

impl Members {
    /// Wakes through `wake` the pools of `pools` that VMs of `vms` name.
    pub fn new(
        pools: Store<ProxmoxPool>,
        vms: Store<DeserializeGuard<ProxmoxVM>>,
        wake: UnboundedSender<ObjectRef<ProxmoxPool>>,
    ) -> Self {
        Self { pools, vms, wake }
    }

    /// Sees one event of the VM watch.
    pub fn see(&self, event: &Result<watcher::Event<DeserializeGuard<ProxmoxVM>>, watcher::Error>) {
        let (obj, gone) = match event {
            Ok(watcher::Event::Apply(obj)) => (obj, false),
            Ok(watcher::Event::Delete(obj)) => (obj, true),
            // The pool controller lists every pool when it starts.
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init | watcher::Event::InitDone)
            | Err(_) => return,
        };
        let Ok(vm) = &obj.0 else { return };
        let cached = self.vms.get(&ObjectRef::from_obj(obj));
        let before = cached.as_ref().and_then(|old| old.0.as_ref().ok());
        if !gone && before.map(seen) == Some(seen(vm)) {
            return;
        }
        let namespace = vm.namespace();
        let named = [before.and_then(|b| seen(b).0), seen(vm).0];
        for pool in self.pools.state() {
            let id = pool.spec.for_provider.pool_id.as_str();
            if pool.namespace() == namespace && named.contains(&Some(id)) {
                // Closed only when the controller stopped.
                let _ = self.wake.unbounded_send(ObjectRef::from_obj(pool.as_ref()));
            }
        }
    }
}

/// Runs the pool controller until `stop` resolves, filling the cache and
/// passing the wake-ups asked for (a config gained, a member created or
/// gone: [`Members`]).
pub async fn run(
    ctx: Arc<Context>,
    cache: (
        reflector::store::Writer<ProxmoxPool>,
        UnboundedReceiver<ObjectRef<ProxmoxPool>>,
    ),
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let shared = Arc::new(Ctx::new(ctx, ()));
    controller::run(shared, cache, "ProxmoxPool", stop).await;
}
