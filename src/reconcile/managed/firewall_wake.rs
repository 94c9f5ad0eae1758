//! Wakes the guests whose own firewall names an object of a firewall kind
//! (a ProxmoxIPSet, a ProxmoxSecurityGroup) when that object becomes
//! usable: Ready with a Proxmox name, or another Proxmox name. A guest
//! waiting for it (`ReferenceNotReady`, Synced True) goes on at once
//! rather than at its next poll.
//!
//! Seen on the object's watch before its cache takes the event in, so
//! the cache still holds the version before. Other changes of the object
//! (status writes) wake nobody: a guest's pass reads Proxmox.

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use crate::api::condition::{Condition, ConditionStatus, ConditionType, find};
use crate::api::firewall::GuestFirewall;
use crate::api::snapshot::GuestKind;
use crate::api::{ProxmoxContainer, ProxmoxVM};
use crate::reconcile::managed::guests::Guests;
use crate::reconcile::managed::selector::of_namespace;

/// The Proxmox name of an object whose `conditions` say Ready, if it has
/// one: what a rule naming it resolves to.
pub fn usable(conditions: &[Condition], proxmox: Option<&String>) -> Option<String> {
    find(conditions, ConditionType::Ready)
        .filter(|c| c.status == ConditionStatus::True)
        .and(proxmox.cloned())
}

/// See the module documentation; `K`: the firewall kind.
pub struct RefWaker<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    cache: Store<K>,
    guests: Guests,
    /// The names of `K` a guest's firewall names.
    names: fn(&GuestFirewall) -> Vec<&str>,
    /// The object's Proxmox name once usable ([`usable`]).
    usable: fn(&K) -> Option<String>,
}

impl<K> RefWaker<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    pub fn new(
        cache: Store<K>,
        guests: Guests,
        names: fn(&GuestFirewall) -> Vec<&str>,
        usable: fn(&K) -> Option<String>,
    ) -> Self {
        Self {
            cache,
            guests,
            names,
            usable,
        }
    }

    /// Sees one event of the kind's watch.
    pub fn see(&self, event: &Result<watcher::Event<K>, watcher::Error>) {
        let Ok(watcher::Event::Apply(obj)) = event else {
            return;
        };
        let before = self
            .cache
            .get(&ObjectRef::from_obj(obj))
            .and_then(|old| (self.usable)(&old));
        let after = (self.usable)(obj);
        if after.is_none() || before == after {
            return;
        }
        let Some(namespace) = obj.namespace() else {
            return;
        };
        let name = obj.name_any();
        let vms = of_namespace(self.guests.vms(), Some(&namespace), |vm: &ProxmoxVM| {
            Some((vm.name_any(), vm.spec.for_provider.firewall.clone()?))
        });
        let containers = of_namespace(
            self.guests.containers(),
            Some(&namespace),
            |ct: &ProxmoxContainer| Some((ct.name_any(), ct.spec.for_provider.firewall.clone()?)),
        );
        let woken = (vms.into_iter().map(|g| (GuestKind::ProxmoxVM, g)))
            .chain(
                containers
                    .into_iter()
                    .map(|g| (GuestKind::ProxmoxContainer, g)),
            )
            .filter(|(_, (_, fw))| (self.names)(fw).contains(&name.as_str()));
        for (kind, (guest, _)) in woken {
            self.guests.wake(kind, &namespace, &guest);
        }
    }
}
