//! The guest a resource names by reference (a ProxmoxVM or
//! ProxmoxContainer of its namespace: a snapshot's, a backup's), as that
//! guest's resource shows it, and its wake-up; shared by the kinds that
//! act on another resource's guest.

use std::sync::Arc;

use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use pve_client::{Guest, GuestType};

use crate::api::snapshot::GuestKind;
use crate::api::{ProxmoxContainer, ProxmoxVM};
use crate::reconcile::context::Context;

/// What a guest's resource shows: node, VMID, being deleted.
pub type Seen = (Option<String>, Option<u32>, bool);

/// The guests such a kind's pass reads, and wakes: the VM and container
/// caches, their wakers and what their passes remember, all the context's.
pub struct Guests {
    context: Arc<Context>,
}

impl Guests {
    /// The guests of the context.
    pub fn of(ctx: &Arc<Context>) -> Self {
        Self {
            context: Arc::clone(ctx),
        }
    }

    /// The cache of ProxmoxVMs.
    pub fn vms(&self) -> &Store<DeserializeGuard<ProxmoxVM>> {
        &self.context.store
    }

    /// The cache of ProxmoxContainers.
    pub fn containers(&self) -> &Store<DeserializeGuard<ProxmoxContainer>> {
        &self.context.containers
    }

    /// The guest `name` of `kind` in `namespace`, as its status shows it.
    /// `None`: no such resource.
    pub fn seen(&self, namespace: &str, kind: GuestKind, name: &str) -> Option<Seen> {
        let key = ObjectRef::new(name).within(namespace);
        Some(match kind {
            GuestKind::ProxmoxVM => {
                let vm = self.vms().get(&key)?;
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
                    .containers()
                    .get(&ObjectRef::new(name).within(namespace))?;
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

    /// The Proxmox guest of `name` of `kind` in `namespace`, or why there
    /// is none yet ([`resolve`]).
    pub fn guest(&self, namespace: &str, kind: GuestKind, name: &str) -> Result<Guest, String> {
        resolve(kind, name, self.seen(namespace, kind, name))
    }

    /// Another resource's task changed the guest (a rollback stopped it:
    /// its own resource brings it back to its declared state now rather
    /// than at its resync): what its
    /// last look showed no longer holds, so its next look is a full one
    /// (never a coarse look from a view that may predate the change), and
    /// it is woken.
    pub fn changed(&self, kind: GuestKind, namespace: &str, name: &str) {
        let uid = match kind {
            GuestKind::ProxmoxVM => self
                .vms()
                .get(&ObjectRef::new(name).within(namespace))
                .and_then(|vm| vm.0.as_ref().ok()?.metadata.uid.clone()),
            GuestKind::ProxmoxContainer => self
                .containers()
                .get(&ObjectRef::new(name).within(namespace))
                .and_then(|ct| ct.0.as_ref().ok()?.metadata.uid.clone()),
        };
        if let Some(uid) = uid {
            self.context.memory.forget_look(&uid);
        }
        self.wake(kind, namespace, name);
    }

    /// Asks for a pass of the guest `name` of `kind` in `namespace`.
    pub fn wake(&self, kind: GuestKind, namespace: &str, name: &str) {
        match kind {
            GuestKind::ProxmoxVM => self
                .context
                .waker
                .wake(ObjectRef::new(name).within(namespace)),
            GuestKind::ProxmoxContainer => self
                .context
                .container_waker
                .wake(ObjectRef::new(name).within(namespace)),
        }
    }
}

/// The guest of a reference, pure: its Proxmox type, node and VMID as its
/// resource's status shows them, or why there is none yet.
pub fn resolve(kind: GuestKind, name: &str, seen: Option<Seen>) -> Result<Guest, String> {
    let (node, vmid, deleting) =
        seen.ok_or_else(|| format!("{kind:?} {name} does not exist in this namespace"))?;
    if deleting {
        return Err(format!("{kind:?} {name} is being deleted"));
    }
    match (node, vmid) {
        (Some(node), Some(vmid)) => Ok(Guest {
            kind: match kind {
                GuestKind::ProxmoxVM => GuestType::Qemu,
                GuestKind::ProxmoxContainer => GuestType::Lxc,
            },
            node,
            vmid,
        }),
        _ => Err(format!("{kind:?} {name} has no VMID and node yet")),
    }
}

/// What a kind naming a guest reads of a guest's resource on its watch:
/// kind, name, node, VMID, going (a change of any wakes the kinds naming
/// it, through [`crate::reconcile::managed::selector::Waker`]).
pub type Watched = (GuestKind, String, Option<String>, Option<u32>, bool);

/// [`Watched`] of a ProxmoxVM.
pub fn watched_vm(vm: &ProxmoxVM) -> Option<Watched> {
    let at = vm.status.as_ref().map(|s| &s.at_provider);
    Some((
        GuestKind::ProxmoxVM,
        vm.metadata.name.clone()?,
        at.and_then(|a| a.node.clone()),
        at.and_then(|a| a.vmid),
        vm.metadata.deletion_timestamp.is_some(),
    ))
}

/// [`Watched`] of a ProxmoxContainer.
pub fn watched_container(ct: &ProxmoxContainer) -> Option<Watched> {
    let at = ct.status.as_ref().map(|s| &s.at_provider);
    Some((
        GuestKind::ProxmoxContainer,
        ct.metadata.name.clone()?,
        at.and_then(|a| a.node.clone()),
        at.and_then(|a| a.vmid),
        ct.metadata.deletion_timestamp.is_some(),
    ))
}
