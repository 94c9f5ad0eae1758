//! Per-node limits on concurrent imports and clones: how many other
//! ProxmoxVMs have one in flight on a node.
//!
//! The count comes from the controller's cache of ProxmoxVM statuses (what
//! every replica and restart agrees on) joined with what this process
//! dispatched but may not see in that cache yet. Passes that may start such
//! work on a node hold the node's lock from counting to recording, so two
//! concurrent passes cannot both take the last slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use tokio::sync::OwnedMutexGuard;

use super::plan::NodeLoad;
use super::providers::ConfigKey;
use crate::api::{ProxmoxVM, ProxmoxVMStatus, vm::TaskAction};

/// A node of a provider config (two configs may name different clusters
/// with the same node names).
type NodeKey = (ConfigKey, String);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Heavy {
    Import,
    Clone,
}

/// The in-flight heavy work of a VM, from its spec and status.
fn heavy(vm: &ProxmoxVM, status: &ProxmoxVMStatus) -> Option<(String, Heavy)> {
    let at = &status.at_provider;
    let task = at.task.as_ref()?;
    let node = at.node.clone()?;
    let imports = vm
        .spec
        .for_provider
        .disks
        .iter()
        .any(|d| d.image.is_some() || d.import_from.is_some());
    match task.action {
        TaskAction::Create if imports => Some((node, Heavy::Import)),
        TaskAction::Clone => Some((node, Heavy::Clone)),
        _ => None,
    }
}

/// Node locks and what this process dispatched.
#[derive(Debug, Default)]
pub struct Capacity {
    locks: Mutex<HashMap<NodeKey, Arc<tokio::sync::Mutex<()>>>>,
    /// UID → its heavy work, as of its last pass in this process.
    dispatched: Mutex<HashMap<String, (NodeKey, Heavy)>>,
}

impl Capacity {
    /// Serializes passes that may start heavy work on a node.
    pub async fn lock(&self, key: &ConfigKey, node: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().expect("capacity locks poisoned");
            Arc::clone(locks.entry((key.clone(), node.to_owned())).or_default())
        };
        lock.lock_owned().await
    }

    /// Imports and clones in flight on the node, not counting `vm`'s own.
    pub fn load(
        &self,
        store: &Store<DeserializeGuard<ProxmoxVM>>,
        key: &ConfigKey,
        node: &str,
        vm: &ProxmoxVM,
    ) -> NodeLoad {
        let me = vm.uid().unwrap_or_default();
        let mut seen: HashMap<String, Heavy> = HashMap::new();
        for guard in store.state() {
            let Ok(other) = &guard.0 else { continue };
            let Some(status) = &other.status else {
                continue;
            };
            let uid = other.uid().unwrap_or_default();
            if uid == me || ConfigKey::of(other) != *key {
                continue;
            }
            if let Some((n, h)) = heavy(other, status)
                && n == node
            {
                seen.insert(uid, h);
            }
        }
        let dispatched = self.dispatched.lock().expect("capacity map poisoned");
        for (uid, ((k, n), h)) in dispatched.iter() {
            if *uid != me && k == key && n == node {
                seen.insert(uid.clone(), *h);
            }
        }
        let count =
            |h| u32::try_from(seen.values().filter(|v| **v == h).count()).unwrap_or(u32::MAX);
        NodeLoad {
            imports: count(Heavy::Import),
            clones: count(Heavy::Clone),
        }
    }

    /// Records `vm`'s heavy work as of the status this pass wrote.
    pub fn record(&self, key: &ConfigKey, vm: &ProxmoxVM, status: &ProxmoxVMStatus) {
        let uid = vm.uid().unwrap_or_default();
        let mut dispatched = self.dispatched.lock().expect("capacity map poisoned");
        match heavy(vm, status) {
            Some((node, h)) => {
                dispatched.insert(uid, ((key.clone(), node), h));
            }
            None => {
                dispatched.remove(&uid);
            }
        }
    }
}
