//! Wakes the backups a ProxmoxVM or ProxmoxContainer watch event
//! concerns: their guest appears, goes, is being deleted, or gets its
//! VMID and node (a backup waiting for its guest is taken then, not at the
//! resync). See [`crate::reconcile::managed::selector`].
//!
//! And the other way ([`Restorers`], on the backup's own watch): a VM or
//! container waiting to restore a backup (`BackupNotReady`) is woken when
//! what it reads of that backup changes (it becomes Ready, is deleted),
//! not only at its 10 s recheck.

use futures::channel::mpsc::UnboundedSender;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use kube::ResourceExt;
use kube::runtime::watcher;

use crate::api::condition::Condition;
use crate::api::condition::{ConditionType, Reason, find};
use crate::api::vm::BackupReference;
use crate::api::{ProxmoxBackup, ProxmoxContainer, ProxmoxVM};
use crate::reconcile::managed::backups;
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

/// Wakes the VMs and containers waiting to restore a backup whose state,
/// as a restore reads it ([`backups::of`]), an event changes: one pass of
/// each that names it in `restore.backupRef` and says `BackupNotReady`.
/// Other guests, and the backup's status writes that change nothing a
/// restore reads (its task's progress), wake none.
#[derive(Clone)]
pub struct Restorers {
    backups: Store<ProxmoxBackup>,
    vms: Guests<ProxmoxVM>,
    containers: Guests<ProxmoxContainer>,
}

/// A guest kind's cache and how to wake one.
pub type Guests<G> = (Store<DeserializeGuard<G>>, GuestWaker<DeserializeGuard<G>>);
type GuestWaker<K> = crate::reconcile::runtime::wake::Waker<K>;

impl Restorers {
    /// Wakes from the VMs of `vms` and containers of `containers` those
    /// waiting on a backup of `backups`.
    pub fn new(
        backups: Store<ProxmoxBackup>,
        vms: Guests<ProxmoxVM>,
        containers: Guests<ProxmoxContainer>,
    ) -> Self {
        Self {
            backups,
            vms,
            containers,
        }
    }

    /// Sees one event of the backup watch (before the cache takes it in).
    pub fn see(&self, event: &Result<watcher::Event<ProxmoxBackup>, watcher::Error>) {
        let (backup, gone) = match event {
            Ok(watcher::Event::Apply(b)) => (b, false),
            Ok(watcher::Event::Delete(b)) => (b, true),
            // A waiting guest looks itself at its start and recheck.
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init | watcher::Event::InitDone)
            | Err(_) => return,
        };
        let before = self
            .backups
            .get(&ObjectRef::from_obj(backup))
            .map(|b| backups::of(&b));
        let after = (!gone).then(|| backups::of(backup));
        if before == after {
            return;
        }
        let (namespace, name) = (backup.namespace(), backup.name_any());
        let waits = |ns: Option<String>,
                     restore: Option<&BackupReference>,
                     status: Option<&[Condition]>| {
            ns == namespace && restore.is_some_and(|r| r.name == name) && waiting(status)
        };
        wake(&self.vms, |vm: &ProxmoxVM| {
            let restore = vm.spec.for_provider.restore.as_ref();
            let status = vm.status.as_ref().map(|s| s.conditions.as_slice());
            waits(
                vm.namespace(),
                restore.and_then(|r| r.backup_ref.as_ref()),
                status,
            )
        });
        wake(&self.containers, |ct: &ProxmoxContainer| {
            let restore = ct.spec.for_provider.restore.as_ref();
            let status = ct.status.as_ref().map(|s| s.conditions.as_slice());
            waits(
                ct.namespace(),
                restore.and_then(|r| r.backup_ref.as_ref()),
                status,
            )
        });
    }
}

/// Wakes the guests of `cache` that `waits` picks.
fn wake<G>((store, waker): &Guests<G>, waits: impl Fn(&G) -> bool)
where
    G: kube::Resource<DynamicType = ()> + Clone + 'static,
    DeserializeGuard<G>: kube::runtime::reflector::Lookup<DynamicType = ()>,
{
    for guest in store.state() {
        if guest.0.as_ref().is_ok_and(&waits) {
            waker.wake(ObjectRef::from_obj(guest.as_ref()));
        }
    }
}

/// Whether a guest's conditions say it waits for its backup.
fn waiting(conditions: Option<&[Condition]>) -> bool {
    conditions
        .and_then(|c| find(c, ConditionType::Synced))
        .is_some_and(|c| c.reason == Reason::BackupNotReady.as_str())
}

/// Whether `backup` names the guest seen.
fn names(backup: &ProxmoxBackup, (kind, name, ..): &Watched) -> bool {
    let r = &backup.spec.for_provider.guest_ref;
    r.kind == *kind && r.name == *name
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc;
    use kube::runtime::reflector;
    use serde_json::{Value, json};

    fn synced(reason: &str) -> Value {
        json!({"conditions": [{"type": "Synced", "status": "True", "reason": reason,
            "lastTransitionTime": "2026-12-05T00:00:00Z"}]})
    }

    fn backup(ready: bool) -> ProxmoxBackup {
        let status = if ready {
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                "lastTransitionTime": "2026-12-05T00:00:00Z"}],
                "atProvider": {"volume": "local:backup/vzdump-lxc-100-2026_12_05-01_00_00.tar.zst"}})
        } else {
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Creating",
                "lastTransitionTime": "2026-12-05T00:00:00Z", "message": "vzdump 40%"}]})
        };
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxBackup",
            "metadata": {"name": "nightly", "namespace": "team-a"},
            "spec": {"forProvider": {"guestRef": {"kind": "ProxmoxContainer", "name": "app"}, "storage": "local"}},
            "status": status,
        }))
        .unwrap()
    }

    fn container(name: &str, ns: &str, backup_ref: &str, reason: &str) -> ProxmoxContainer {
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxContainer",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"forProvider": {
                "restore": {"backupRef": {"name": backup_ref}},
                "rootfs": {"storage": "local-lvm", "size": "4Gi"},
            }},
            "status": synced(reason),
        }))
        .unwrap()
    }

    fn vm(name: &str, reason: &str) -> ProxmoxVM {
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"forProvider": {"node": "pve", "restore": {"backupRef": {"name": "nightly"}}}},
            "status": synced(reason),
        }))
        .unwrap()
    }

    /// The names woken so far.
    fn names<K>(woken: &mut mpsc::UnboundedReceiver<ObjectRef<K>>) -> Vec<String>
    where
        K: kube::runtime::reflector::Lookup<DynamicType = ()>,
    {
        let mut names = Vec::new();
        while let Ok(r) = woken.try_recv() {
            names.push(r.name);
        }
        names
    }

    #[test]
    fn a_backup_becoming_ready_wakes_only_the_guests_waiting_on_it() {
        let (backups, mut backup_cache) = reflector::store::<ProxmoxBackup>();
        let (vms, mut vm_cache) = reflector::store::<DeserializeGuard<ProxmoxVM>>();
        let (cts, mut ct_cache) = reflector::store::<DeserializeGuard<ProxmoxContainer>>();
        let (wake_vm, mut vm_woken) = mpsc::unbounded();
        let (wake_ct, mut ct_woken) = mpsc::unbounded();
        for v in [
            vm("web-copy", "BackupNotReady"),
            vm("web", "ReconcileSuccess"),
        ] {
            vm_cache.apply_watcher_event(&watcher::Event::Apply(DeserializeGuard(Ok(v))));
        }
        for c in [
            container("app-copy", "team-a", "nightly", "BackupNotReady"),
            container("other-ns", "team-b", "nightly", "BackupNotReady"),
            container("other-backup", "team-a", "weekly", "BackupNotReady"),
            container("restored", "team-a", "nightly", "ReconcileSuccess"),
        ] {
            ct_cache.apply_watcher_event(&watcher::Event::Apply(DeserializeGuard(Ok(c))));
        }
        let restorers = Restorers::new(
            backups,
            (vms, GuestWaker::new(wake_vm)),
            (cts, GuestWaker::new(wake_ct)),
        );

        // Created, not Ready: the waiting guests read it anew.
        let running = backup(false);
        restorers.see(&Ok(watcher::Event::Apply(running.clone())));
        assert_eq!(names(&mut ct_woken), ["app-copy"]);
        assert_eq!(names(&mut vm_woken), ["web-copy"]);
        backup_cache.apply_watcher_event(&watcher::Event::Apply(running.clone()));

        // Its task's progress written: nothing a restore reads changed.
        let mut progress = running;
        progress.status.as_mut().unwrap().conditions[0].message = Some("vzdump 60%".into());
        restorers.see(&Ok(watcher::Event::Apply(progress)));
        assert!(names(&mut ct_woken).is_empty() && names(&mut vm_woken).is_empty());

        // Ready: woken again, at once.
        restorers.see(&Ok(watcher::Event::Apply(backup(true))));
        assert_eq!(names(&mut ct_woken), ["app-copy"]);
        assert_eq!(names(&mut vm_woken), ["web-copy"]);
    }
}
