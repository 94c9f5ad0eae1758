//! Wakes the selector IP sets a ProxmoxVM or ProxmoxContainer watch event
//! concerns: a guest that appears, goes, is being deleted, changes labels
//! or addresses (see [`crate::reconcile::managed::selector`]).

use futures::channel::mpsc::UnboundedSender;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use super::members::Guest;
use crate::api::{ProxmoxContainer, ProxmoxIPSet, ProxmoxVM};
use crate::reconcile::managed::selector::Waker;

/// The waker on the VM watch.
pub type SelectorWaker = Waker<ProxmoxIPSet, ProxmoxVM, Guest>;

/// Wakes through `sender` the sets of `sets` that select VMs of `vms`.
pub fn waker(
    sender: UnboundedSender<ObjectRef<ProxmoxIPSet>>,
    sets: Store<ProxmoxIPSet>,
    vms: Store<DeserializeGuard<ProxmoxVM>>,
) -> SelectorWaker {
    Waker::new(sender, (sets, vms), Guest::vm, selects)
}

/// The waker on the container watch.
pub type ContainerWaker = Waker<ProxmoxIPSet, ProxmoxContainer, Guest>;

/// Wakes through `sender` the sets of `sets` that select containers of
/// `containers`.
pub fn container_waker(
    sender: UnboundedSender<ObjectRef<ProxmoxIPSet>>,
    sets: Store<ProxmoxIPSet>,
    containers: Store<DeserializeGuard<ProxmoxContainer>>,
) -> ContainerWaker {
    Waker::new(sender, (sets, containers), Guest::container, selects)
}

fn selects(set: &ProxmoxIPSet, guest: &Guest) -> bool {
    set.spec.for_provider.selector.as_ref().is_some_and(|s| {
        s.match_labels
            .iter()
            .all(|(k, v)| guest.labels.get(k) == Some(v))
    })
}
