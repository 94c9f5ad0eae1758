//! The ProxmoxIPSet controller: a cluster firewall IP set of static
//! entries, through the shared CRUD pass.
//!
//! | module | concept |
//! |---|---|
//! | [`plan`] | the managed fields, entries as PVE stores them, one correction per pass, pure |
//! | [`pass`] | the kind for [`crate::reconcile::managed::crud::pass`]: what it wants, its calls, who uses it |

pub mod pass;
pub mod plan;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc::UnboundedReceiver;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{ProxmoxIPSet, ProxmoxSecurityGroup};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};

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
    let shared = Arc::new(Ctx { ctx, extra: groups });
    controller::run(shared, cache, "ProxmoxIPSet", stop).await;
}
