//! Wakes the selector IP sets a guest watch event concerns (a ProxmoxVM or
//! a ProxmoxContainer): a guest that appears, goes, is being deleted,
//! changes labels or addresses. Its other changes (a status write every
//! few seconds while a task runs) wake none: an IP set pass reads Proxmox.

use futures::channel::mpsc::UnboundedSender;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::members::Guest;
use crate::api::ProxmoxIPSet;

/// See the module documentation.
#[derive(Clone)]
pub struct SelectorWaker<K: kube::Resource + Clone + 'static>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    sender: UnboundedSender<ObjectRef<ProxmoxIPSet>>,
    sets: Store<ProxmoxIPSet>,
    /// The guests' cache, still holding the version before the event (the
    /// waker sees events before the cache takes them in).
    guests: Store<DeserializeGuard<K>>,
    /// What a set sees of a guest.
    guest: fn(&K) -> Option<Guest>,
}

impl<K> SelectorWaker<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    /// Wakes through `sender` the sets of `sets` that select guests of
    /// `guests` (the VMs or the containers), as `guest` (`Guest::vm`,
    /// `Guest::container`) sees them.
    pub fn new(
        sender: UnboundedSender<ObjectRef<ProxmoxIPSet>>,
        sets: Store<ProxmoxIPSet>,
        guests: Store<DeserializeGuard<K>>,
        guest: fn(&K) -> Option<Guest>,
    ) -> Self {
        Self {
            sender,
            sets,
            guests,
            guest,
        }
    }

    /// Sees one event of the guests' watch.
    pub fn see(&self, event: &Result<watcher::Event<DeserializeGuard<K>>, watcher::Error>) {
        let (obj, gone) = match event {
            Ok(watcher::Event::Apply(obj)) => (obj, false),
            Ok(watcher::Event::Delete(obj)) => (obj, true),
            // Every set is looked at when its controller starts.
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init | watcher::Event::InitDone)
            | Err(_) => return,
        };
        let Ok(guest) = &obj.0 else { return };
        let cached = self.guests.get(&ObjectRef::from_obj(obj));
        let before = cached
            .as_ref()
            .and_then(|old| old.0.as_ref().ok())
            .and_then(self.guest);
        let after = if gone { None } else { (self.guest)(guest) };
        if before == after {
            return;
        }
        let namespace = guest.namespace();
        for set in self.sets.state() {
            if set.namespace() != namespace {
                continue;
            }
            let Some(selector) = &set.spec.for_provider.selector else {
                continue;
            };
            let selects = |g: &Option<Guest>| {
                g.as_ref().is_some_and(|g| {
                    selector
                        .match_labels
                        .iter()
                        .all(|(k, v)| g.labels.get(k) == Some(v))
                })
            };
            if selects(&before) || selects(&after) {
                // Closed only when the controller stopped.
                let _ = self
                    .sender
                    .unbounded_send(ObjectRef::from_obj(set.as_ref()));
            }
        }
    }
}
