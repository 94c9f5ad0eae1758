//! The ProxmoxIPSet controller: a cluster firewall IP set of static
//! entries, through the shared CRUD pass.
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | the managed fields, entries as PVE stores them, one correction per pass, pure |
//! | [`members`] | a selector's members: the guests of the namespace it matches and their addresses, pure |
//! | [`wake`] | a VM that comes, goes or changes labels or addresses wakes the sets selecting it |
//! | [`pass`] | the kind for [`crate::reconcile::managed::crud::pass`]: what it wants, its calls, who uses it |

pub mod members;
pub mod pass;
pub mod plan;
pub mod wake;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedReceiver;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};

use kube::ResourceExt;
use kube::core::DeserializeGuard;

use crate::api::firewall::GuestFirewall;
use crate::api::{ProxmoxContainer, ProxmoxIPSet, ProxmoxSecurityGroup, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};
use crate::reconcile::managed::firewall_wake::{RefWaker, usable};
use crate::reconcile::managed::guests::Guests;
use crate::reconcile::managed::selector::of_namespace;

/// The caches an IP set's pass reads.
pub struct Caches {
    /// Security groups: a set named by a rule is not deleted.
    pub groups: Store<ProxmoxSecurityGroup>,
    /// The guests a selector picks members from.
    pub vms: Store<DeserializeGuard<ProxmoxVM>>,
    pub containers: Store<DeserializeGuard<ProxmoxContainer>>,
}

impl Caches {
    /// The guests of `set`'s namespace (those that match the schema).
    pub fn guests(&self, set: &ProxmoxIPSet) -> Vec<members::Guest> {
        let namespace = set.namespace();
        let mut all = of_namespace(&self.vms, namespace.as_deref(), members::Guest::vm);
        all.extend(of_namespace(
            &self.containers,
            namespace.as_deref(),
            members::Guest::container,
        ));
        all
    }
}

/// Runs the controller until `stop` resolves, filling the cache and passing the wake-ups asked for; `groups`:
/// the security group cache (a set still named by a group's rule is not
/// deleted).
pub async fn run(
    ctx: Arc<Context>,
    cache: (
        Writer<ProxmoxIPSet>,
        UnboundedReceiver<ObjectRef<ProxmoxIPSet>>,
    ),
    groups: Store<ProxmoxSecurityGroup>,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let extra = Caches {
        groups,
        vms: ctx.store.clone(),
        containers: ctx.containers.clone(),
    };
    let waker = RefWaker::new(
        cache.0.as_reader(),
        Guests::of(&ctx),
        GuestFirewall::ip_sets,
        |set: &ProxmoxIPSet| {
            let status = set.status.as_ref()?;
            usable(&status.conditions, status.at_provider.name.as_ref())
        },
    );
    let shared = Arc::new(Ctx::new(ctx, extra));
    let see = move |event: &_| waker.see(event);
    controller::run_seeing(shared, cache, "ProxmoxIPSet", see, stop).await;
}
