//! Moving a VM: a changed `node` migrates it (live, local disks along) as a
//! tracked task, a VM the load balancer moves is followed and not moved
//! back, a changed disk `storage` moves the disk and frees the old volume.

use crate::reconcile::{DEADLINE, Env, Options, Sim, condition, is_true, manifests};
use crate::support;
use pve_sim::SimConfig;
use serde_json::{Value, json};

/// Two nodes, each with `local` (the seeded image on `pve`), `local-lvm`
/// and a second thin pool `tank`.
fn two_nodes() -> Value {
    json!({
        "nodes": [{"name": "pve"}, {"name": "pve2"}],
        "storages": [
            {"id": "local", "type": "dir", "content": ["iso", "vztmpl", "import", "snippets"], "size": "100G"},
            {"id": "local-lvm", "type": "lvmthin", "content": ["images", "rootdir"], "size": "400G"},
            {"id": "tank", "type": "lvmthin", "vg": "tank", "content": ["images"], "size": "400G"},
        ],
        "volumes": [{
            "volid": "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2",
            "node": "pve", "size": "600M", "virtual_size": "3584M", "format": "qcow2",
        }],
    })
}

/// An environment whose pve-sim is described by `state`.
async fn env_with(prefix: &str, state: Value) -> Env {
    let mut env = Env::without_controller(prefix, Options::default()).await;
    env.sim = Sim::start_with(SimConfig {
        time_scale: 0.01,
        state: Some(serde_json::from_value(state).expect("a state file")),
        ..SimConfig::default()
    })
    .await;
    env.apply(&manifests::provider_config(&env.sim, &json!({})))
        .await;
    env.start_controller().await;
    env
}

/// `running` or `stopped`, asked on `node`.
async fn power_on(sim: &Sim, vmid: u32, node: &str) -> String {
    sim.client().vm_status(node, vmid).await.unwrap().status
}

/// Volume IDs on a node's storage.
async fn volumes(sim: &Sim, node: &str, storage: &str) -> Vec<String> {
    let client = sim.client();
    let content = client.storage_content(node, storage, None).await.unwrap();
    content.into_iter().map(|c| c.volid).collect()
}

async fn node_of(env: &Env, vmid: u32) -> String {
    env.sim
        .placement()
        .await
        .remove(&vmid)
        .expect("the VM exists")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_node_migrates_and_a_balancer_move_is_followed() {
    let env = env_with("migrate", two_nodes()).await;
    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;
    assert_eq!(node_of(&env, vmid).await, "pve");

    env.patch_vm("web", json!({"spec": {"forProvider": {"node": "pve2"}}}))
        .await;
    env.wait_vm("web", "on pve2, Ready and Synced", |vm| {
        let at = &vm.status.as_ref().ok_or("no status")?.at_provider;
        let ready = condition(vm, "Ready").is_some_and(is_true);
        let synced = condition(vm, "Synced").is_some_and(is_true);
        (at.node.as_deref() == Some("pve2") && at.task.is_none() && ready && synced)
            .then_some(())
            .ok_or_else(|| format!("node {:?}", at.node))
    })
    .await;
    assert_eq!(node_of(&env, vmid).await, "pve2");
    let migrations = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/migrate")
        .await;
    assert_eq!(migrations.len(), 1, "one migration: {migrations:?}");
    let sent = &migrations[0]["params"];
    assert_eq!(sent["target"], "pve2");
    assert_eq!(sent["online"], "1", "the VM runs: a live migration");
    assert_eq!(sent["with-local-disks"], "1", "its disks are on local-lvm");
    // The migration was tracked to its end.
    succeeded(&env, "qmigrate").await;
    let vm = env.vm("web").await;
    let at = &vm.status.as_ref().unwrap().at_provider;
    assert_eq!(at.target_node.as_deref(), Some("pve2"));
    assert_eq!(power_on(&env.sim, vmid, "pve2").await, "running");

    // The cluster's load balancer moves it back to pve behind our back: the
    // provider follows it there and does not migrate it again.
    env.sim.balance(vmid, "pve").await;
    let outside = env
        .wait_vm("web", "followed to pve", |vm| {
            let at = &vm.status.as_ref().ok_or("no status")?.at_provider;
            let synced = condition(vm, "Synced").ok_or("no Synced")?;
            (at.node.as_deref() == Some("pve") && synced.reason == "OutsidePlacement")
                .then(|| synced.clone())
                .ok_or_else(|| format!("node {:?}, Synced {}", at.node, synced.reason))
        })
        .await;
    assert!(is_true(&outside), "following is not a failure");
    assert!(condition(&env.vm("web").await, "Ready").is_some_and(is_true));
    assert_eq!(node_of(&env, vmid).await, "pve");
    assert_eq!(
        env.sim
            .count("POST", "/nodes/{node}/qemu/{vmid}/migrate")
            .await,
        1,
        "not moved back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_disk_storage_moves_the_disk_online_and_frees_the_old_volume() {
    let env = env_with("movedisk", two_nodes()).await;
    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;
    let before = env.sim.config(vmid).await.raw["scsi0"].clone();
    assert!(before.starts_with("local-lvm:"), "{before}");

    let mut spec = manifests::imported(json!({}));
    spec["disks"][0]["storage"] = json!("tank");
    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"disks": spec["disks"]}}}),
    )
    .await;
    support::poll("scsi0 to be on tank", DEADLINE, || async {
        let scsi0 = env.sim.config(vmid).await.raw["scsi0"].clone();
        scsi0.starts_with("tank:").then_some(()).ok_or(scsi0)
    })
    .await;
    env.wait_ready("web").await;
    let moves = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/move_disk")
        .await;
    assert_eq!(moves.len(), 1, "{moves:?}");
    let sent = &moves[0]["params"];
    assert_eq!(
        (&sent["disk"], &sent["storage"]),
        (&json!("scsi0"), &json!("tank"))
    );
    assert_eq!(sent["delete"], "1");
    assert!(sent["digest"].is_string(), "decided from a known config");
    let config = env.sim.config(vmid).await;
    assert!(
        !config.raw.keys().any(|k| k.starts_with("unused")),
        "the old volume was deleted, not kept as unused: {:?}",
        config.raw
    );
    let old = before.split(',').next().unwrap().to_owned();
    assert!(
        !volumes(&env.sim, "pve", "local-lvm").await.contains(&old),
        "{old} is gone from local-lvm"
    );
    assert_eq!(
        power_on(&env.sim, vmid, "pve").await,
        "running",
        "moved online"
    );
    succeeded(&env, "qmmove").await;
}

/// Waits for the TaskSucceeded event of a `task_type` task of `web`: it is
/// written once the provider sees the task end, which may be after the
/// change is visible on Proxmox.
async fn succeeded(env: &Env, task_type: &str) {
    env.wait_event("web", |(_, reason, note, _)| {
        reason == "TaskSucceeded" && note.contains(task_type)
    })
    .await;
}

/// A VM whose `customCloudInit` seed ISO is on node-local storage cannot
/// migrate (Proxmox refuses a local CD-ROM): a changed `node` is refused
/// with a reason that says so, and no migration is sent (issue 20, item 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seed_iso_on_local_storage_refuses_the_migration_and_says_why() {
    let env = env_with("mvseed", two_nodes()).await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "web-seed"},
        "stringData": {"user-data": "#cloud-config\nhostname: web\n"},
    }))
    .await;
    let mut spec = manifests::imported(json!({
        "node": "pve",
        "customCloudInit": {
            "userData": {"secretKeyRef": {"name": "web-seed", "key": "user-data"}},
        },
    }));
    spec.as_object_mut().unwrap().remove("cloudInit");
    let vmid = env.create_ready("web", spec).await;
    env.patch_vm("web", json!({"spec": {"forProvider": {"node": "pve2"}}}))
        .await;
    let refused = env.wait_synced_reason("web", "InvalidSpec").await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains("seed ISO is on storage local, which is not shared"),
        "{message}"
    );
    assert_eq!(
        env.sim
            .count("POST", "/nodes/{node}/qemu/{vmid}/migrate")
            .await,
        0,
        "no migration was sent"
    );
    assert_eq!(node_of(&env, vmid).await, "pve");
    assert!(is_true(condition(&env.vm("web").await, "Ready").unwrap()));
}
