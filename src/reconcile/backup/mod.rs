//! The ProxmoxBackup controller: one backup on demand of a guest of the
//! same namespace, through the shared CRUD pass on its task path (the
//! backup and the archive's deletion are Proxmox tasks, recorded in the
//! status and observed, never waited for).
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | pure: the archive wanted (its protection, the guest it can be taken of), whose an archive is (the owner marker in its notes), the one correction, the status |
//! | [`wake`] | a guest that comes, goes or gets its VMID wakes its backups; a backup whose state changes wakes the guests waiting to restore it |
//! | [`pass`] | the kind for [`crate::reconcile::managed::crud::pass`]: what it wants, its calls (tasks), the guest's lock, its own running vzdump adopted, its status |
//!
//! The guest is read from the VM and container caches at each pass
//! ([`crate::reconcile::managed::guests`]); a backup whose guest has no
//! VMID yet waits, woken when it gets one ([`wake`]), and one
//! whose guest is gone keeps its archive, looked for where the status
//! recorded it.

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

use crate::api::ProxmoxBackup;
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};
use crate::reconcile::managed::guests::Guests;

/// Runs the controller until `stop` resolves, filling the cache and
/// passing the wake-ups asked for (a config gained, a task ended).
pub async fn run(
    ctx: Arc<Context>,
    cache: (
        Writer<ProxmoxBackup>,
        UnboundedReceiver<ObjectRef<ProxmoxBackup>>,
    ),
    restorers: wake::Restorers,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let extra = Guests::of(&ctx);
    let shared = Arc::new(Ctx::new(ctx, extra));
    let see = move |event: &_| restorers.see(event);
    controller::run_seeing(shared, cache, "ProxmoxBackup", see, stop).await;
}
