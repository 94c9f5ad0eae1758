//! Wakes the selector backup jobs a ProxmoxVM or ProxmoxContainer watch
//! event concerns: a guest that appears, goes, is being deleted, gets or
//! loses its VMID or changes labels (see
//! [`crate::reconcile::managed::selector`]).

use futures::channel::mpsc::UnboundedSender;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use super::guests::Guest;
use crate::api::{ProxmoxBackupJob, ProxmoxContainer, ProxmoxVM};
use crate::reconcile::managed::selector::Waker;

/// The waker on the VM watch.
pub type SelectorWaker = Waker<ProxmoxBackupJob, ProxmoxVM, Guest>;

/// Wakes through `sender` the jobs of `jobs` whose selector picks VMs of
/// `vms`.
pub fn waker(
    sender: UnboundedSender<ObjectRef<ProxmoxBackupJob>>,
    jobs: Store<ProxmoxBackupJob>,
    vms: Store<DeserializeGuard<ProxmoxVM>>,
) -> SelectorWaker {
    Waker::new(sender, (jobs, vms), Guest::vm, selects)
}

/// The waker on the container watch.
pub type ContainerWaker = Waker<ProxmoxBackupJob, ProxmoxContainer, Guest>;

/// Wakes through `sender` the jobs of `jobs` whose selector picks
/// containers of `containers`.
pub fn container_waker(
    sender: UnboundedSender<ObjectRef<ProxmoxBackupJob>>,
    jobs: Store<ProxmoxBackupJob>,
    containers: Store<DeserializeGuard<ProxmoxContainer>>,
) -> ContainerWaker {
    Waker::new(sender, (jobs, containers), Guest::container, selects)
}

fn selects(job: &ProxmoxBackupJob, guest: &Guest) -> bool {
    job.spec
        .for_provider
        .guest_selector
        .as_ref()
        .is_some_and(|s| guest.matches(&s.match_labels))
}
