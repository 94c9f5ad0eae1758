//! Wakes the backups a ProxmoxVM or ProxmoxContainer watch event
//! concerns: their guest appears, goes, is being deleted, or gets its
//! VMID and node (a backup waiting for its guest is taken then, not at the
//! resync). See [`crate::reconcile::managed::selector`].

use futures::channel::mpsc::UnboundedSender;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{ProxmoxBackup, ProxmoxContainer, ProxmoxVM};
use crate::reconcile::managed::guests::{Watched, watched_container, watched_vm};
use crate::reconcile::managed::selector::Waker;

/// The waker on the VM watch.
pub type VmWaker = Waker<ProxmoxBackup, ProxmoxVM, Watched>;
/// The waker on the container watch.
pub type ContainerWaker = Waker<ProxmoxBackup, ProxmoxContainer, Watched>;

/// Wakes through `sender` the backups of `backups` of VMs of `vms`.
pub fn vm_waker(
    sender: UnboundedSender<ObjectRef<ProxmoxBackup>>,
    backups: Store<ProxmoxBackup>,
    vms: Store<DeserializeGuard<ProxmoxVM>>,
) -> VmWaker {
    Waker::new(sender, (backups, vms), watched_vm, names)
}

/// Wakes through `sender` the backups of `backups` of containers of
/// `containers`.
pub fn container_waker(
    sender: UnboundedSender<ObjectRef<ProxmoxBackup>>,
    backups: Store<ProxmoxBackup>,
    containers: Store<DeserializeGuard<ProxmoxContainer>>,
) -> ContainerWaker {
    Waker::new(sender, (backups, containers), watched_container, names)
}

/// Whether `backup` names the guest seen.
fn names(backup: &ProxmoxBackup, (kind, name, ..): &Watched) -> bool {
    let r = &backup.spec.for_provider.guest_ref;
    r.kind == *kind && r.name == *name
}
