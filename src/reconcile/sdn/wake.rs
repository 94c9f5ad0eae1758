//! Wakes a ProxmoxVNet being deleted when a guest of its namespace with a
//! NIC on it leaves it (the NIC moved, the guest is being deleted or went),
//! so the deletion goes on at once rather than at its next look (see
//! [`crate::reconcile::managed::selector`]). VNets not being deleted are
//! not woken: their pass reads Proxmox, and a NIC change asks nothing of
//! them.
//!
//! Wakes the VNets of a zone when the zone stops being on its way to
//! Proxmox ([`ZoneWaker`]): a VNet applied with its zone waits for it,
//! and its create must be written while the zone's change is pending, so
//! both join one apply (the applier waits for them only so long).

use futures::channel::mpsc::UnboundedSender;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::zone::coming;
use crate::api::{ProxmoxContainer, ProxmoxSDNZone, ProxmoxVM, ProxmoxVNet};
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

/// Wakes the VNets naming a zone that was on its way to Proxmox and no
/// longer is (seen on the zone watch, before the zone cache takes the
/// event in). Other zone changes wake none: a VNet's pass reads Proxmox.
pub struct ZoneWaker {
    pub sender: UnboundedSender<ObjectRef<ProxmoxVNet>>,
    pub zones: Store<ProxmoxSDNZone>,
    pub vnets: Store<ProxmoxVNet>,
}

impl ZoneWaker {
    /// Sees one event of the zone watch.
    pub fn see(&self, event: &Result<watcher::Event<ProxmoxSDNZone>, watcher::Error>) {
        // A zone gone asks nothing of its VNets' passes; every VNet is
        // looked at when its controller starts.
        let Ok(watcher::Event::Apply(zone)) = event else {
            return;
        };
        let before = self.zones.get(&ObjectRef::from_obj(zone));
        if !arrived(before.as_deref(), zone) {
            return;
        }
        for vnet in self.vnets.state() {
            if names(&vnet, zone) {
                // Closed only when the controller stopped.
                let _ = self
                    .sender
                    .unbounded_send(ObjectRef::from_obj(vnet.as_ref()));
            }
        }
    }
}

/// The zone was on its way to Proxmox (or not cached) and `now` is not.
fn arrived(before: Option<&ProxmoxSDNZone>, now: &ProxmoxSDNZone) -> bool {
    !coming(now) && before.is_none_or(coming)
}

/// A VNet in `zone` (of its namespace).
pub(super) fn names(vnet: &ProxmoxVNet, zone: &ProxmoxSDNZone) -> bool {
    vnet.namespace() == zone.namespace() && vnet.spec.for_provider.zone_ref.name == zone.name_any()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

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

    fn zone(status: Value) -> ProxmoxSDNZone {
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxSDNZone",
            "metadata": {"name": "lan", "namespace": "team-a"},
            "spec": {"forProvider": {"type": "vlan", "bridge": "vmbr0"}},
            "status": status,
        }))
        .unwrap()
    }

    fn ready(reason: &str) -> Value {
        json!({"conditions": [{"type": "Ready", "status": "False", "reason": reason,
            "lastTransitionTime": "2026-12-05T00:00:00Z"}]})
    }

    #[test]
    fn the_vnets_are_woken_once_when_their_zone_is_written() {
        let none = zone(json!(null));
        let creating = zone(ready("Creating"));
        let pending = zone(json!({"atProvider": {"state": "Pending"}}));
        let applied = zone(json!({"atProvider": {"state": "Applied"}}));
        let cases = [
            ("not cached, no status yet", None, &none, false),
            ("no status, then creating", Some(&none), &creating, false),
            ("creating, then pending", Some(&creating), &pending, true),
            ("no status, then pending", Some(&none), &pending, true),
            ("not cached, already written", None, &pending, true),
            ("pending, then applied", Some(&pending), &applied, false),
            ("applied, a status write", Some(&applied), &applied, false),
        ];
        for (name, before, now, want) in cases {
            assert_eq!(arrived(before, now), want, "{name}");
        }
    }

    #[test]
    fn a_vnet_names_its_zone_within_its_namespace() {
        let named = |namespace: &str, name: &str| {
            let mut z = zone(json!(null));
            z.metadata.namespace = Some(namespace.into());
            z.metadata.name = Some(name.into());
            names(&vnet(false), &z)
        };
        assert!(named("team-a", "z"));
        assert!(!named("team-b", "z"), "another namespace");
        assert!(!named("team-a", "lan"), "another zone");
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
