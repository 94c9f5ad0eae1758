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
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::snapshot::GuestKind;
use crate::api::{ProxmoxContainer, ProxmoxSnapshot, ProxmoxVM};
use crate::reconcile::context::Context;
use crate::reconcile::managed::crud::{controller, pass::Ctx};
use crate::reconcile::runtime::wake::Waker;

/// The guests a snapshot's pass reads, and wakes after a rollback.
pub struct Guests {
    pub vms: Store<DeserializeGuard<ProxmoxVM>>,
    pub containers: Store<DeserializeGuard<ProxmoxContainer>>,
    pub vm_waker: Waker<DeserializeGuard<ProxmoxVM>>,
    pub container_waker: Waker<DeserializeGuard<ProxmoxContainer>>,
}

impl Guests {
    /// The guest `name` of `kind` in `snapshot`'s namespace, as its status
    /// shows it: node, VMID, being deleted. `None`: no such resource.
    pub fn seen(
        &self,
        snapshot: &ProxmoxSnapshot,
        kind: GuestKind,
        name: &str,
    ) -> Option<(Option<String>, Option<u32>, bool)> {
        let namespace = snapshot.namespace().unwrap_or_default();
        Some(match kind {
            GuestKind::ProxmoxVM => {
                let vm = self.vms.get(&ObjectRef::new(name).within(&namespace))?;
                let vm = vm.0.as_ref().ok()?;
                let at = vm.status.as_ref().map(|s| &s.at_provider);
                (
                    at.and_then(|a| a.node.clone()),
                    at.and_then(|a| a.vmid),
                    vm.metadata.deletion_timestamp.is_some(),
                )
            }
            GuestKind::ProxmoxContainer => {
                let ct = self
                    .containers
                    .get(&ObjectRef::new(name).within(&namespace))?;
                let ct = ct.0.as_ref().ok()?;
                let at = ct.status.as_ref().map(|s| &s.at_provider);
                (
                    at.and_then(|a| a.node.clone()),
                    at.and_then(|a| a.vmid),
                    ct.metadata.deletion_timestamp.is_some(),
                )
            }
        })
    }
}

impl Guests {
    /// Asks for a pass of the guest `name` of `kind` in `namespace`: a
    /// rollback stopped it (or left it as the snapshot had it), and its
    /// own resource brings it back to its declared state now rather than
    /// at its resync.
    pub fn wake(&self, kind: GuestKind, namespace: &str, name: &str) {
        match kind {
            GuestKind::ProxmoxVM => self.vm_waker.wake(ObjectRef::new(name).within(namespace)),
            GuestKind::ProxmoxContainer => self
                .container_waker
                .wake(ObjectRef::new(name).within(namespace)),
        }
    }
}

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
    let extra = Guests {
        vms: ctx.store.clone(),
        containers: ctx.containers.clone(),
        vm_waker: ctx.waker.clone(),
        container_waker: ctx.container_waker.clone(),
    };
    let shared = Arc::new(Ctx::new(ctx, extra));
    controller::run(shared, cache, "ProxmoxSnapshot", stop).await;
}
