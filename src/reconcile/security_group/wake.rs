//! Wakes the security groups whose rules name an IP set when that set
//! becomes usable (Ready with a Proxmox name, or another Proxmox name): a
//! group that waited for it (missing, or `ReferenceNotReady`) goes on at
//! once. Seen on the IP set watch before its cache takes the event in, so
//! the cache still holds the version before.

use futures::channel::mpsc::UnboundedSender;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::pass::set_name;
use super::plan;
use crate::api::{ProxmoxIPSet, ProxmoxSecurityGroup};

/// See the module documentation.
pub struct SetWaker {
    pub sets: Store<ProxmoxIPSet>,
    pub groups: Store<ProxmoxSecurityGroup>,
    pub wake: UnboundedSender<ObjectRef<ProxmoxSecurityGroup>>,
}

impl SetWaker {
    /// Sees one event of the IP set watch.
    pub fn see(&self, event: &Result<watcher::Event<ProxmoxIPSet>, watcher::Error>) {
        let Ok(watcher::Event::Apply(set)) = event else {
            return;
        };
        let before = self
            .sets
            .get(&ObjectRef::from_obj(set))
            .and_then(|old| set_name(&old));
        let after = set_name(set);
        if after.is_none() || before == after {
            return;
        }
        let (namespace, name) = (set.namespace(), set.name_any());
        for group in self.groups.state() {
            let names_it = plan::ip_sets(&group.spec.for_provider.rules).contains(&name.as_str());
            if group.namespace() == namespace && names_it {
                // The controller is gone only at shutdown.
                let _ = self
                    .wake
                    .unbounded_send(ObjectRef::from_obj(group.as_ref()));
            }
        }
    }
}
