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

use crate::api::firewall::GuestFirewall;
use crate::api::{ProxmoxContainer, ProxmoxIPSet, ProxmoxSecurityGroup, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};
use crate::reconcile::managed::firewall_wake::{RefWaker, usable};
use crate::reconcile::managed::guests::Guests;

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
    let waker = RefWaker::new(
        cache.0.as_reader(),
        Guests::of(&ctx),
        GuestFirewall::security_groups,
        |group: &ProxmoxSecurityGroup| {
            let status = group.status.as_ref()?;
            usable(&status.conditions, status.at_provider.name.as_ref())
        },
    );
    let shared = Arc::new(Ctx::new(ctx, caches));
    let see = move |event: &_| waker.see(event);
    controller::run_seeing(shared, cache, "ProxmoxSecurityGroup", see, stop).await;
}
