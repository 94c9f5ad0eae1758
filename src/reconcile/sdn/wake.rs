//! Wakes a ProxmoxVNet being deleted when a guest of its namespace with a
//! NIC on it leaves it (the NIC moved, the guest is being deleted or went),
//! so the deletion goes on at once rather than at its next look (see
//! [`crate::reconcile::managed::selector`]). VNets not being deleted are
//! not woken: their pass reads Proxmox, and a NIC change asks nothing of
//! them.

use futures::channel::mpsc::UnboundedSender;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::{ProxmoxContainer, ProxmoxVM, ProxmoxVNet};
use crate::reconcile::managed::selector::Waker;

/// What a VNet reads of a guest: the bridges its NICs name, while it is
/// not being deleted (a guest being deleted counts as gone: its NICs go
/// with it).
pub type Bridges = Vec<String>;

/// The waker on the VM watch.
pub type VmWaker = Waker<ProxmoxVNet, ProxmoxVM, Bridges>;
/// The waker on the container watch.
pub type ContainerWaker = Waker<ProxmoxVNet, ProxmoxContainer, Bridges>;

/// Wakes through `sender` the VNets of `vnets` that VMs of `vms` leave.
pub fn vm_waker(
    sender: UnboundedSender<ObjectRef<ProxmoxVNet>>,
    vnets: Store<ProxmoxVNet>,
    vms: Store<DeserializeGuard<ProxmoxVM>>,
) -> VmWaker {
    Waker::new(sender, (vnets, vms), vm, carries)
}

/// Wakes through `sender` the VNets of `vnets` that containers of
/// `containers` leave.
pub fn container_waker(
    sender: UnboundedSender<ObjectRef<ProxmoxVNet>>,
    vnets: Store<ProxmoxVNet>,
    containers: Store<DeserializeGuard<ProxmoxContainer>>,
) -> ContainerWaker {
    Waker::new(sender, (vnets, containers), container, carries)
}

fn vm(vm: &ProxmoxVM) -> Option<Bridges> {
    vm.metadata.deletion_timestamp.is_none().then(|| {
        let nics = vm.spec.for_provider.networks.iter();
        nics.map(|n| n.bridge.clone()).collect()
    })
}

fn container(ct: &ProxmoxContainer) -> Option<Bridges> {
    ct.metadata.deletion_timestamp.is_none().then(|| {
        let nics = ct.spec.for_provider.networks.iter();
        nics.map(|n| n.bridge.clone()).collect()
    })
}

/// A VNet being deleted that the guest's NICs name (before or after the
/// event: the waker asks both).
fn carries(vnet: &ProxmoxVNet, bridges: &Bridges) -> bool {
    vnet.metadata.deletion_timestamp.is_some() && bridges.contains(&super::vnet::id_of(vnet))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vnet(deleting: bool) -> ProxmoxVNet {
        let mut v: ProxmoxVNet = serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVNet",
            "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {"forProvider": {"zoneRef": {"name": "z"}}},
        }))
        .unwrap();
        if deleting {
            v.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        v
    }

    #[test]
    fn only_a_vnet_being_deleted_is_woken_by_the_guests_on_it() {
        let id = super::super::vnet::id_of(&vnet(false));
        let on = vec!["vmbr0".to_owned(), id];
        let off = vec!["vmbr0".to_owned()];
        let cases = [
            ("deleting, the guest on it", true, &on, true),
            ("deleting, the guest elsewhere", true, &off, false),
            ("not deleting", false, &on, false),
        ];
        for (name, deleting, bridges, want) in cases {
            assert_eq!(carries(&vnet(deleting), bridges), want, "{name}");
        }
    }
}
