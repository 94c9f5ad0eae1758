//! The ProxmoxSecurityGroup controller: a cluster firewall security group
//! and its ordered rules, through the shared CRUD pass.
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | the managed fields and the one correction per pass, pure |
//! | [`pass`] | the kind for [`crate::reconcile::managed::crud::pass`]: what it wants, its calls |

pub mod pass;
pub mod plan;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedReceiver;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{ProxmoxContainer, ProxmoxIPSet, ProxmoxSecurityGroup, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};

/// The caches a security group's pass reads.
pub struct Caches {
    /// IP sets: a rule naming a set that does not exist waits for it.
    pub ip_sets: Store<ProxmoxIPSet>,
    /// VMs and containers: a group their firewall names is not deleted.
    pub vms: Store<DeserializeGuard<ProxmoxVM>>,
    pub containers: Store<DeserializeGuard<ProxmoxContainer>>,
}

/// Runs the controller until `stop` resolves, filling the cache and passing the wake-ups asked for;
/// `ip_sets`: the IP set cache (a rule naming a set that does not exist
/// waits for it).
pub async fn run(
    ctx: Arc<Context>,
    cache: (
        Writer<ProxmoxSecurityGroup>,
        UnboundedReceiver<ObjectRef<ProxmoxSecurityGroup>>,
    ),
    ip_sets: Store<ProxmoxIPSet>,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let (vms, containers) = (ctx.store.clone(), ctx.containers.clone());
    let caches = Caches {
        ip_sets,
        vms,
        containers,
    };
    let shared = Arc::new(Ctx::new(ctx, caches));
    controller::run(shared, cache, "ProxmoxSecurityGroup", stop).await;
}
