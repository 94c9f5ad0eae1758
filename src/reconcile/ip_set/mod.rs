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

use crate::api::{ProxmoxContainer, ProxmoxIPSet, ProxmoxSecurityGroup, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};

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
        let vms = self.vms.state().into_iter().filter_map(|g| match &g.0 {
            Ok(vm) if vm.namespace() == namespace => members::Guest::vm(vm),
            Ok(_) | Err(_) => None,
        });
        let cts = self
            .containers
            .state()
            .into_iter()
            .filter_map(|g| match &g.0 {
                Ok(ct) if ct.namespace() == namespace => members::Guest::container(ct),
                Ok(_) | Err(_) => None,
            });
        vms.chain(cts).collect()
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
    let shared = Arc::new(Ctx::new(ctx, extra));
    controller::run(shared, cache, "ProxmoxIPSet", stop).await;
}
