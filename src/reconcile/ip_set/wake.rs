//! Wakes the selector IP sets a ProxmoxVM watch event concerns: a VM that
//! appears, goes, is being deleted, changes labels or addresses. Its other
//! changes (a status write every few seconds while a task runs) wake none:
//! an IP set pass reads Proxmox.

use futures::channel::mpsc::UnboundedSender;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::members::Guest;
use crate::api::{ProxmoxIPSet, ProxmoxVM};

/// See the module documentation.
#[derive(Clone)]
pub struct SelectorWaker {
    sender: UnboundedSender<ObjectRef<ProxmoxIPSet>>,
    sets: Store<ProxmoxIPSet>,
    /// The VM cache, still holding the version before the event (the
    /// waker sees events before the cache takes them in).
    vms: Store<DeserializeGuard<ProxmoxVM>>,
}

impl SelectorWaker {
    /// Wakes through `sender` the sets of `sets` that select VMs of `vms`.
    pub fn new(
        sender: UnboundedSender<ObjectRef<ProxmoxIPSet>>,
        sets: Store<ProxmoxIPSet>,
        vms: Store<DeserializeGuard<ProxmoxVM>>,
    ) -> Self {
        Self { sender, sets, vms }
    }

    /// Sees one event of the VM watch.
    pub fn see(&self, event: &Result<watcher::Event<DeserializeGuard<ProxmoxVM>>, watcher::Error>) {
        let (obj, gone) = match event {
            Ok(watcher::Event::Apply(obj)) => (obj, false),
            Ok(watcher::Event::Delete(obj)) => (obj, true),
            // Every set is looked at when its controller starts.
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init | watcher::Event::InitDone)
            | Err(_) => return,
        };
        let Ok(vm) = &obj.0 else { return };
        let cached = self.vms.get(&ObjectRef::from_obj(obj));
        let before = cached
            .as_ref()
            .and_then(|old| old.0.as_ref().ok())
            .and_then(Guest::vm);
        let after = if gone { None } else { Guest::vm(vm) };
        if before == after {
            return;
        }
        let namespace = vm.namespace();
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
