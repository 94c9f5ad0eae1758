//! ProxmoxBackups on the real control plane and pve-sim: a backup on
//! demand of a Ready VM taken as a tracked task (recorded in the status
//! while it runs, the VM's own pass waiting on the `backup` lock), Ready
//! with its archive's volume, its disks recorded as pve-sim holds them,
//! its protection changed in place, the archive deleted with the resource
//! (its protection lifted first); a notes template Proxmox would refuse
//! is refused at apply.

use kube::Api;
use kube::api::PostParams;
use provider_proxmox::api::ProxmoxBackup;
use pve_client::{Restore, parse_backup_name};
use serde_json::{Value, json};

use crate::firewall::{delete, wait, wait_gone, wait_ready, wait_synced};
use crate::reconcile::{Env, Options, manifests};
use crate::support;

fn backup(name: &str, guest: (&str, &str), extra: Value) -> Value {
    let mut for_provider = json!({
        "guestRef": {"kind": guest.0, "name": guest.1},
        "storage": "local",
    });
    for (k, v) in extra.as_object().unwrap() {
        for_provider[k] = v.clone();
    }
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxBackup",
        "metadata": {"name": name},
        "spec": {
            "forProvider": for_provider,
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

/// What pve-sim records a volume to hold.
async fn contents(env: &Env, volid: &str) -> Option<String> {
    let state = env.sim.state().await;
    state["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["volid"] == volid)
        .map(|v| v["contents"].as_str().unwrap_or(volid).to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_on_demand_is_taken_as_a_tracked_task_and_deleted_with_its_resource() {
    // A resync far beyond the test: every step follows a task's end (the
    // task watcher) or a watch event, not a resync.
    let options = Options {
        provider: json!({"resyncInterval": "10m"}),
        ..Options::default()
    };
    let env = Env::start_with("backups", options).await;
    let ns = env.ns.name().to_owned();

    // A backslash Proxmox would refuse in the notes: refused at apply.
    let api: Api<ProxmoxBackup> = Api::namespaced(support::client(), &ns);
    let bad = serde_json::from_value(backup(
        "bad-notes",
        ("ProxmoxVM", "web"),
        json!({"notesTemplate": "C:\\temp"}),
    ))
    .unwrap();
    let refused = api.create(&PostParams::default(), &bad).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("notesTemplate may use a backslash only as"),
        "{refused}"
    );

    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;

    // Taken, held at its first step: recorded in the status, never waited
    // for, and the VM's own pass waits on its lock.
    env.sim
        .fault(json!({"fault": "task-held", "hold": "dump", "at": "sleep", "task_type": "vzdump", "count": 1}))
        .await;
    env.apply(&backup(
        "web-now",
        ("ProxmoxVM", "web"),
        json!({"compress": "zstd", "protected": true, "notesTemplate": "{{guestname}} before the upgrade"}),
    ))
    .await;
    let upid = wait(&ns, "web-now", "vzdump recorded", |b: &ProxmoxBackup| {
        b.status
            .as_ref()
            .and_then(|s| s.at_provider.tasks.task.as_ref())
            .filter(|t| t.type_ == "vzdump")
            .map(|t| t.upid.clone())
            .ok_or_else(|| format!("{:?}", b.status))
    })
    .await;
    wait_synced::<ProxmoxBackup>(&ns, "web-now", "WaitingForTask").await;
    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"tags": ["backed-up"]}}}),
    )
    .await;
    let locked = env.wait_synced_reason("web", "VmLocked").await;
    assert!(
        locked
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("backup"),
        "{locked:?}"
    );
    env.sim.release("dump").await;
    let taken: ProxmoxBackup = wait_ready(&ns, "web-now").await;
    let at = taken.status.unwrap().at_provider;
    let volume = at.volume.clone().expect("the archive's volume");
    assert_eq!(
        parse_backup_name(&volume),
        Some((pve_client::GuestType::Qemu, vmid))
    );
    assert!(
        volume.starts_with("local:backup/") && volume.ends_with(".vma.zst"),
        "{volume}"
    );
    assert_eq!((at.vmid, at.node.as_deref()), (Some(vmid), Some("pve")));
    assert_eq!(at.protected, Some(true));
    assert!(at.size.unwrap_or(0) > 0 && at.ctime.is_some(), "{at:?}");
    let last = at.tasks.last_task.expect("the task that ended");
    assert_eq!((last.upid.as_str(), last.succeeded), (upid.as_str(), true));
    env.wait_ready("web").await;
    assert_eq!(env.sim.count("POST", "/nodes/{node}/vzdump").await, 1);
    let archives = env
        .sim
        .client()
        .backups("pve", "local", Some(vmid))
        .await
        .unwrap();
    assert_eq!(archives.len(), 1, "{archives:?}");
    assert!(
        archives[0]
            .notes
            .as_deref()
            .unwrap_or_default()
            .contains("ProxmoxBackup"),
        "the owner marker is the listed line: {archives:?}"
    );

    // Restored by hand into a new VMID: its disk holds what the VM's held.
    let restore = Restore {
        vmid: 4242,
        archive: volume.clone(),
        unique: true,
        ..Restore::default()
    };
    let upid = env.sim.client().restore_vm("pve", &restore).await.unwrap();
    env.sim.client().wait_task(&upid).await.unwrap();
    let original = contents(&env, &format!("local-lvm:vm-{vmid}-disk-0")).await;
    assert!(original.is_some());
    assert_eq!(contents(&env, "local-lvm:vm-4242-disk-0").await, original);

    // Protection lifted in place.
    env.apply(&backup(
        "web-now",
        ("ProxmoxVM", "web"),
        json!({"compress": "zstd", "protected": false, "notesTemplate": "{{guestname}} before the upgrade"}),
    ))
    .await;
    wait(&ns, "web-now", "unprotected", |b: &ProxmoxBackup| {
        b.status
            .as_ref()
            .filter(|s| s.at_provider.protected == Some(false))
            .map(|_| ())
            .ok_or_else(|| format!("{:?}", b.status))
    })
    .await;

    // Protected again, then deleted with its resource: the provider lifts
    // the protection and the archive goes.
    env.apply(&backup(
        "web-now",
        ("ProxmoxVM", "web"),
        json!({"compress": "zstd", "protected": true, "notesTemplate": "{{guestname}} before the upgrade"}),
    ))
    .await;
    wait(&ns, "web-now", "protected", |b: &ProxmoxBackup| {
        b.status
            .as_ref()
            .filter(|s| s.at_provider.protected == Some(true))
            .map(|_| ())
            .ok_or_else(|| format!("{:?}", b.status))
    })
    .await;
    delete::<ProxmoxBackup>(&ns, "web-now").await;
    wait_gone::<ProxmoxBackup>(&ns, "web-now").await;
    let left = env
        .sim
        .client()
        .backups("pve", "local", Some(vmid))
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(env.sim.count("POST", "/nodes/{node}/vzdump").await, 1);
}

/// For the RBAC tests: a backup of their container `box`, Ready.
pub async fn workload(env: &Env) {
    env.apply(&backup("rbac", ("ProxmoxContainer", "box"), json!({})))
        .await;
    let _: ProxmoxBackup = wait_ready(env.ns.name(), "rbac").await;
}

/// Deletes [`workload`]'s backup and waits until it is gone.
pub async fn remove(env: &Env) {
    delete::<ProxmoxBackup>(env.ns.name(), "rbac").await;
    wait_gone::<ProxmoxBackup>(env.ns.name(), "rbac").await;
}

/// A ProxmoxVM restored from a ProxmoxBackup of another VM: waits for the
/// backup to be Ready, restores it in one `qmrestore` task, writes its own
/// owner marker over the archive's, applies its spec; its disk holds what
/// the source's held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_restored_from_a_backup_carries_its_disks_and_its_own_marker() {
    use kube::ResourceExt;
    let env = Env::start("restores").await;
    let ns = env.ns.name().to_owned();
    let source = env
        .create_ready("web", manifests::imported(json!({})))
        .await;

    // The restore names the backup before it exists: it waits, Synced.
    env.apply(&manifests::vm(
        "web-copy",
        json!({
            "node": "pve",
            "name": "web-copy",
            "memory": "1Gi",
            "cpu": {"cores": 1},
            "restore": {"backupRef": {"name": "web-now"}, "storage": "local-lvm"},
        }),
    ))
    .await;
    let waiting = env.wait_synced_reason("web-copy", "BackupNotReady").await;
    assert!(
        waiting
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("web-now"),
        "{waiting:?}"
    );

    env.apply(&backup("web-now", ("ProxmoxVM", "web"), json!({})))
        .await;
    let _: ProxmoxBackup = wait_ready(&ns, "web-now").await;
    let copy = env.wait_ready("web-copy").await;
    let vmid = env.vmid("web-copy").await;
    assert_ne!(vmid, source);

    let original = contents(&env, &format!("local-lvm:vm-{source}-disk-0")).await;
    assert!(original.is_some());
    assert_eq!(
        contents(&env, &format!("local-lvm:vm-{vmid}-disk-0")).await,
        original
    );
    let config = env
        .sim
        .client()
        .vm_config_current("pve", vmid)
        .await
        .unwrap();
    let notes = config.description.unwrap_or_default();
    let uid = copy.uid().unwrap();
    let source_uid = env.vm("web").await.uid().unwrap();
    assert!(notes.contains(&uid), "{notes}");
    assert!(!notes.contains(&source_uid), "{notes}");
    assert_eq!(config.raw.get("name").map(String::as_str), Some("web-copy"));
    assert_eq!(config.raw.get("memory").map(String::as_str), Some("1024"));
    let restores = env
        .sim
        .tasks()
        .await
        .into_iter()
        .filter(|t| t["type"] == "qmrestore")
        .count();
    assert_eq!(restores, 1);
    // The source is untouched, still Ready and ours.
    env.wait_ready("web").await;
}

/// A ProxmoxContainer restored from a ProxmoxBackup of another container:
/// waits for the backup to be Ready (Synced, naming it), restores it in
/// one `vzrestore` task with its own hostname and owner marker, applies
/// its spec; its root filesystem holds what the source's held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_restored_from_a_backup_carries_its_rootfs_and_its_own_marker() {
    use crate::reconcile::containers::{container, ct_condition, debian};
    use kube::ResourceExt;
    let env = Env::start("ct-restores").await;
    let ns = env.ns.name().to_owned();
    env.apply(&container("app", debian(json!({"memory": "256Mi"}))))
        .await;
    let source = env.wait_container_ready("app").await;

    env.apply(&container(
        "app-copy",
        json!({
            "node": "pve",
            "restore": {"backupRef": {"name": "app-now"}},
            "rootfs": {"storage": "local-lvm", "size": "1Gi"},
            "memory": "1Gi",
            "networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "dhcp"}],
        }),
    ))
    .await;
    let waiting = env
        .wait_container("app-copy", "BackupNotReady", |ct| {
            match ct_condition(ct, "Synced") {
                Some(c) if c.reason == "BackupNotReady" => Ok(c.clone()),
                other => Err(format!("Synced {other:?}")),
            }
        })
        .await;
    assert!(
        waiting
            .message
            .as_deref()
            .is_some_and(|m| m.contains("app-now") && m.contains("restore.backupRef")),
        "{waiting:?}"
    );

    env.apply(&backup("app-now", ("ProxmoxContainer", "app"), json!({})))
        .await;
    let _: ProxmoxBackup = wait_ready(&ns, "app-now").await;
    let vmid = env.wait_container_ready("app-copy").await;
    assert_ne!(vmid, source);

    let original = contents(&env, &format!("local-lvm:vm-{source}-disk-0")).await;
    assert!(original.is_some());
    assert_eq!(
        contents(&env, &format!("local-lvm:vm-{vmid}-disk-0")).await,
        original,
        "the restored rootfs holds the source's"
    );
    let config = env
        .sim
        .client()
        .container_config("pve", vmid)
        .await
        .unwrap();
    let notes = config.get("description").unwrap_or_default();
    let uid = env.container("app-copy").await.uid().unwrap();
    let source_uid = env.container("app").await.uid().unwrap();
    assert!(notes.contains(&uid), "{notes}");
    assert!(!notes.contains(&source_uid), "{notes}");
    assert_eq!(config.get("hostname"), Some("app-copy"));
    assert_eq!(config.get("memory"), Some("1024"), "the spec applied after");
    let restores = env
        .sim
        .tasks()
        .await
        .into_iter()
        .filter(|t| t["type"] == "vzrestore")
        .count();
    assert_eq!(restores, 1);
    let copy = env.container("app-copy").await;
    let at = copy.status.unwrap_or_default().at_provider;
    assert_eq!(at.restored_vmid, None, "the proof served once marked");
    // The source is untouched, still Ready.
    env.wait_container_ready("app").await;
}
