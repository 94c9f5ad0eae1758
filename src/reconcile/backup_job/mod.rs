//! The ProxmoxBackupJob controller: a scheduled vzdump job whose guests a
//! label selector (or a ProxmoxPool) chooses, through the shared CRUD pass.
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | the managed fields, one correction per pass, a job without guests never created, pure |
//! | [`guests`] | a selector's guests: the namespace's VMs and containers it matches that have a VMID, pure |
//! | [`wake`] | a VM or container that comes, goes, gets its VMID or changes labels wakes the jobs selecting it |
//! | [`pass`] | the kind for [`crate::reconcile::managed::crud::pass`]: what it wants, its calls, its status |
//!
//! A pool's members are read from its status at each pass (a pool's
//! change wakes no job: seen at the resync).

pub mod guests;
pub mod pass;
pub mod plan;
pub mod runs;
pub mod wake;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedReceiver;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{ProxmoxBackupJob, ProxmoxContainer, ProxmoxPool, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};
use crate::reconcile::managed::selector::of_namespace;

/// The caches a job's pass reads.
pub struct Caches {
    /// The pools a job may name.
    pub pools: Store<ProxmoxPool>,
    /// The guests a selector picks from.
    pub vms: Store<DeserializeGuard<ProxmoxVM>>,
    pub containers: Store<DeserializeGuard<ProxmoxContainer>>,
    /// The jobs' last runs, read from the cluster's task list.
    pub runs: Arc<runs::Runs>,
}

impl Caches {
    /// The guests of `job`'s namespace (those that match the schema).
    pub fn guests(&self, job: &ProxmoxBackupJob) -> Vec<guests::Guest> {
        let namespace = job.namespace();
        let mut all = of_namespace(&self.vms, namespace.as_deref(), guests::Guest::vm);
        all.extend(of_namespace(
            &self.containers,
            namespace.as_deref(),
            guests::Guest::container,
        ));
        all
    }

    /// The ProxmoxPool `name` of `job`'s namespace.
    pub fn pool(&self, job: &ProxmoxBackupJob, name: &str) -> Option<Arc<ProxmoxPool>> {
        let namespace = job.namespace().unwrap_or_default();
        self.pools.get(&ObjectRef::new(name).within(&namespace))
    }
}

/// Runs the controller until `stop` resolves, filling the cache and
/// passing the wake-ups asked for; `pools`: the ProxmoxPool cache.
pub async fn run(
    ctx: Arc<Context>,
    cache: (
        Writer<ProxmoxBackupJob>,
        UnboundedReceiver<ObjectRef<ProxmoxBackupJob>>,
    ),
    pools: Store<ProxmoxPool>,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let extra = Caches {
        pools,
        vms: ctx.store.clone(),
        containers: ctx.containers.clone(),
        runs: Arc::default(),
    };
    let shared = Arc::new(Ctx::new(ctx, extra));
    controller::run(shared, cache, "ProxmoxBackupJob", stop).await;
}
