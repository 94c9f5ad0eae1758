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

#[cfg(test)]
mod tests {
    use futures::channel::mpsc;
    use kube::runtime::reflector::store;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;

    fn job() -> ProxmoxBackupJob {
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxBackupJob",
            "metadata": {"name": "nightly", "namespace": "team-a"},
            "spec": {
                "forProvider": {
                    "schedule": "02:00",
                    "storage": "local",
                    "guestSelector": {"matchLabels": {"tier": "web"}},
                },
                "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
            },
        }))
        .unwrap()
    }

    fn vm(tier: &str) -> DeserializeGuard<ProxmoxVM> {
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": "db-1", "namespace": "team-a", "labels": {"tier": tier}},
            "spec": {"forProvider": {"node": "pve"}},
        }))
        .unwrap()
    }

    /// The chooser's pass reads the chosen kind's cache: it is woken only
    /// once the cache holds what woke it.
    #[test]
    fn a_job_is_woken_once_the_guest_cache_took_the_event_in() {
        let (jobs, mut job_writer) = store::<ProxmoxBackupJob>();
        job_writer.apply_watcher_event(&Event::Apply(job()));
        let (vms, mut vm_writer) = store::<DeserializeGuard<ProxmoxVM>>();
        vm_writer.apply_watcher_event(&Event::Apply(vm("db")));
        let (sender, mut woken) = mpsc::unbounded();
        let waker = waker(sender, jobs, vms);

        let relabelled = Event::Apply(vm("web"));
        waker.see(&Ok(relabelled.clone()));
        assert!(woken.try_recv().is_err(), "not before the cache has it");
        vm_writer.apply_watcher_event(&relabelled);
        waker.clone().flush();
        assert_eq!(woken.try_recv().unwrap().name, "nightly");
        assert!(woken.try_recv().is_err(), "woken once");

        // An event that changes nothing the job reads wakes nobody.
        waker.see(&Ok(relabelled.clone()));
        waker.flush();
        assert!(woken.try_recv().is_err());
    }
}
