//! ProxmoxSnapshots on the real control plane and pve-sim: a snapshot
//! taken as a tracked task (recorded in the status while it runs, the VM's
//! own pass waiting on the lock it holds), a rollback on request tracked
//! as a task (the VM, stopped by it, brought back to its declared power
//! state), deletion removing it, a snapshot of that name made by hand
//! never touched, and a container snapshot with RAM refused at apply.

use kube::Api;
use kube::api::PostParams;
use provider_proxmox::api::ProxmoxSnapshot;
use pve_client::{Guest, GuestType, SnapshotEntry, TakeSnapshot};
use serde_json::{Value, json};

use crate::firewall::{delete, wait, wait_gone, wait_ready, wait_synced};
use crate::reconcile::{Env, Options, manifests};
use crate::support;

fn snapshot(name: &str, guest: (&str, &str), extra: Value) -> Value {
    let mut for_provider = json!({
        "guestRef": {"kind": guest.0, "name": guest.1},
        "name": name,
    });
    for (k, v) in extra.as_object().unwrap() {
        for_provider[k] = v.clone();
    }
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxSnapshot",
        "metadata": {"name": name},
        "spec": {
            "forProvider": for_provider,
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

/// The snapshots pve-sim has of VM `vmid`.
async fn on_sim(env: &Env, vmid: u32) -> Vec<SnapshotEntry> {
    let guest = Guest {
        kind: GuestType::Qemu,
        node: "pve".into(),
        vmid,
    };
    env.sim.client().snapshots(&guest).await.unwrap()
}

/// Waits until the snapshot's status records a task of `task_type`.
async fn wait_task(ns: &str, name: &str, task_type: &str) -> String {
    wait(
        ns,
        name,
        &format!("{task_type} recorded"),
        |s: &ProxmoxSnapshot| {
            s.status
                .as_ref()
                .and_then(|s| s.at_provider.tasks.task.as_ref())
                .filter(|t| t.type_ == task_type)
                .map(|t| t.upid.clone())
                .ok_or_else(|| format!("{:?}", s.status))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_is_taken_rolled_back_and_deleted_as_tracked_tasks() {
    // A resync far beyond the test: every step follows a task's end (the
    // task watcher) or a watch event, not a resync.
    let options = Options {
        provider: json!({"resyncInterval": "10m"}),
        ..Options::default()
    };
    let env = Env::start_with("snapshots", options).await;
    let ns = env.ns.name().to_owned();

    // RAM for a container: refused at apply, naming the field.
    let api: Api<ProxmoxSnapshot> = Api::namespaced(support::client(), &ns);
    let ct = serde_json::from_value(snapshot(
        "ct-ram",
        ("ProxmoxContainer", "db"),
        json!({"vmstate": true}),
    ))
    .unwrap();
    let refused = api.create(&PostParams::default(), &ct).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("vmstate (saving the RAM) exists for VMs only"),
        "{refused}"
    );

    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;

    // Taken, held at its first step: recorded in the status, never waited
    // for, and the VM's own pass waits on its lock.
    env.sim
        .fault(json!({"fault": "task-held", "hold": "snap", "at": "sleep", "task_type": "qmsnapshot", "count": 1}))
        .await;
    env.apply(&snapshot(
        "before",
        ("ProxmoxVM", "web"),
        json!({"description": "first"}),
    ))
    .await;
    let upid = wait_task(&ns, "before", "qmsnapshot").await;
    wait_synced::<ProxmoxSnapshot>(&ns, "before", "WaitingForTask").await;
    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"tags": ["snapshotted"]}}}),
    )
    .await;
    let locked = env.wait_synced_reason("web", "VmLocked").await;
    assert!(
        locked
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("snapshot"),
        "{locked:?}"
    );
    env.sim.release("snap").await;
    let taken: ProxmoxSnapshot = wait_ready(&ns, "before").await;
    let at = taken.status.unwrap().at_provider;
    assert_eq!(at.vmid, Some(vmid));
    assert!(at.snaptime.is_some());
    assert_eq!(at.description.as_deref(), Some("first"));
    let last = at.tasks.last_task.expect("the task that ended");
    assert_eq!((last.upid.as_str(), last.succeeded), (upid.as_str(), true));
    let seen = on_sim(&env, vmid).await;
    let snap = seen
        .iter()
        .find(|s| s.name == "before")
        .expect("on pve-sim");
    assert!(
        snap.description
            .as_deref()
            .unwrap_or_default()
            .contains("ProxmoxSnapshot"),
        "{snap:?}"
    );
    // The VM's pass goes on once the lock is gone.
    env.wait_ready("web").await;
    assert_eq!(
        env.sim
            .count("POST", "/nodes/{node}/qemu/{vmid}/snapshot")
            .await,
        1
    );

    // A rollback on request: one tracked task; the VM, stopped by it (no
    // RAM in the snapshot), is started again as its spec declares.
    env.sim
        .fault(json!({"fault": "task-held", "hold": "rollback", "at": "sleep", "task_type": "qmrollback", "count": 1}))
        .await;
    let mut asked = snapshot(
        "before",
        ("ProxmoxVM", "web"),
        json!({"description": "first"}),
    );
    asked["spec"]["forProvider"]["rollbackRequest"] = json!("r1");
    env.apply(&asked).await;
    wait_task(&ns, "before", "qmrollback").await;
    env.sim.release("rollback").await;
    let rolled: ProxmoxSnapshot = wait(
        &ns,
        "before",
        "the rollback handled",
        |s: &ProxmoxSnapshot| {
            s.status
                .as_ref()
                .and_then(|s| s.at_provider.last_rollback.clone())
                .filter(|r| r.request == "r1" && r.succeeded)
                .map(|_| s.clone())
                .ok_or_else(|| "not yet".into())
        },
    )
    .await;
    assert!(rolled.status.unwrap().at_provider.tasks.task.is_none());
    env.wait_ready("web").await;
    env.sim.wait_power(vmid, "running").await;
    let rollbacks = "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback";
    assert_eq!(
        env.sim.count("POST", rollbacks).await,
        1,
        "one rollback per request"
    );

    // A snapshot of a name made by hand: never touched.
    let guest = Guest {
        kind: GuestType::Qemu,
        node: "pve".into(),
        vmid,
    };
    let take = TakeSnapshot {
        name: "by-hand".into(),
        description: "a person's".into(),
        vmstate: false,
    };
    let upid = env.sim.client().take_snapshot(&guest, &take).await.unwrap();
    env.sim.client().wait_task(&upid).await.unwrap();
    env.apply(&snapshot("by-hand", ("ProxmoxVM", "web"), json!({})))
        .await;
    wait_synced::<ProxmoxSnapshot>(&ns, "by-hand", "NotOwned").await;
    delete::<ProxmoxSnapshot>(&ns, "by-hand").await;
    wait_gone::<ProxmoxSnapshot>(&ns, "by-hand").await;

    // Deleted with its resource; the one made by hand stays.
    delete::<ProxmoxSnapshot>(&ns, "before").await;
    wait_gone::<ProxmoxSnapshot>(&ns, "before").await;
    let names: Vec<String> = on_sim(&env, vmid)
        .await
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert!(!names.contains(&"before".to_owned()), "{names:?}");
    assert!(names.contains(&"by-hand".to_owned()), "{names:?}");
}

/// For the RBAC tests: a snapshot of their container `box`, Ready.
pub async fn workload(env: &Env) {
    env.apply(&snapshot("rbac", ("ProxmoxContainer", "box"), json!({})))
        .await;
    let _: ProxmoxSnapshot = wait_ready(env.ns.name(), "rbac").await;
}

/// Deletes [`workload`]'s snapshot and waits until it is gone.
pub async fn remove(env: &Env) {
    delete::<ProxmoxSnapshot>(env.ns.name(), "rbac").await;
    wait_gone::<ProxmoxSnapshot>(env.ns.name(), "rbac").await;
}
