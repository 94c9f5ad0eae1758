//! The ProxmoxSnapshot controller: one snapshot of a guest of the same
//! namespace, through the shared CRUD pass on its task path (taking,
//! rolling back and deleting are Proxmox tasks, recorded in the status and
//! observed, never waited for).
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | pure: the snapshot wanted (description with owner marker, RAM for a VM, the rollback asked for), what was seen, the one correction, the status |
//! | [`wake`] | a guest that comes, goes or gets its VMID wakes its snapshots |
//! | [`pass`] | the kind for [`crate::reconcile::managed::crud::pass`]: what it wants, its calls (tasks), the guest's lock, its own rollback adopted, its status |
//!
//! The guest is read from the VM and container caches at each pass; a
//! snapshot whose guest has no VMID yet waits, woken when it gets one
//! ([`wake`]), and one whose guest is gone has nothing left on Proxmox
//! (its snapshots went with it).

pub mod pass;
pub mod plan;
pub mod wake;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedReceiver;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::store::Writer;

use crate::api::ProxmoxSnapshot;
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};

pub use crate::reconcile::managed::guests::Guests;

/// Runs the controller until `stop` resolves, filling the cache and
/// passing the wake-ups asked for (a config gained, a task ended).
pub async fn run(
    ctx: Arc<Context>,
    cache: (
        Writer<ProxmoxSnapshot>,
        UnboundedReceiver<ObjectRef<ProxmoxSnapshot>>,
    ),
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let extra = Guests::of(&ctx);
    let shared = Arc::new(Ctx::new(ctx, extra));
    controller::run(shared, cache, "ProxmoxSnapshot", stop).await;
}
