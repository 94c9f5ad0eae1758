//! Wakes the snapshots a ProxmoxVM or ProxmoxContainer watch event
//! concerns: their guest appears, goes, is being deleted, or gets its
//! VMID and node (a snapshot waiting for its guest is taken then, not at
//! the resync). See [`crate::reconcile::managed::selector`].

use futures::channel::mpsc::UnboundedSender;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{ProxmoxContainer, ProxmoxSnapshot, ProxmoxVM};
use crate::reconcile::managed::guests::{Watched, watched_container, watched_vm};
use crate::reconcile::managed::selector::Waker;

/// What a snapshot reads of its guest: kind, name, node, VMID, going.
pub type Seen = Watched;

/// The waker on the VM watch.
pub type VmWaker = Waker<ProxmoxSnapshot, ProxmoxVM, Seen>;
/// The waker on the container watch.
pub type ContainerWaker = Waker<ProxmoxSnapshot, ProxmoxContainer, Seen>;

/// Wakes through `sender` the snapshots of `snapshots` of VMs of `vms`.
pub fn vm_waker(
    sender: UnboundedSender<ObjectRef<ProxmoxSnapshot>>,
    snapshots: Store<ProxmoxSnapshot>,
    vms: Store<DeserializeGuard<ProxmoxVM>>,
) -> VmWaker {
    Waker::new(sender, (snapshots, vms), watched_vm, of)
}

/// Wakes through `sender` the snapshots of `snapshots` of containers of
/// `containers`.
pub fn container_waker(
    sender: UnboundedSender<ObjectRef<ProxmoxSnapshot>>,
    snapshots: Store<ProxmoxSnapshot>,
    containers: Store<DeserializeGuard<ProxmoxContainer>>,
) -> ContainerWaker {
    Waker::new(sender, (snapshots, containers), watched_container, of)
}

fn of(snapshot: &ProxmoxSnapshot, (kind, name, ..): &Seen) -> bool {
    let r = &snapshot.spec.for_provider.guest_ref;
    r.kind == *kind && r.name == *name
}
