//! `customCloudInit` on the real control plane: the data from a Secret and
//! a ConfigMap goes to the VM on a NoCloud seed ISO uploaded before its
//! first start; changed data is a new ISO swapped in (pending until the VM
//! starts again) and the old one deleted; the ISO goes with the VM; the
//! data never shows in the status, events or logs.

use provider_proxmox::api::ProxmoxVM;
use serde_json::json;

use crate::reconcile::configs::has_reason;
use crate::reconcile::{DEADLINE, Env, Options, Sim, condition, manifests};
use crate::support;

/// A value only the Secret holds.
const MARK: &str = "s33d-passw0rd-in-user-data";

fn user_data(version: u32) -> String {
    format!(
        "#cloud-config\nchpasswd:\n  users:\n    - {{name: ubuntu, password: {MARK}-{version}}}\n"
    )
}

async fn secret(env: &Env, version: u32) {
    secret_named(env, "web-seed", version).await;
}

async fn secret_named(env: &Env, name: &str, version: u32) {
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {"user-data": user_data(version)},
    }))
    .await;
}

/// The VM's seed ISOs on `local` of node `pve`.
async fn seed_isos(sim: &Sim, vmid: u32) -> Vec<String> {
    let prefix = format!("local:iso/crossplane-ci-{vmid}-");
    sim.client()
        .storage_content("pve", "local", Some("iso"))
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.volid)
        .filter(|v| v.starts_with(&prefix))
        .collect()
}

/// What the VM's `ide2` holds now (not pending).
async fn ide2(sim: &Sim, vmid: u32) -> String {
    let current = sim.client().vm_config_current("pve", vmid).await.unwrap();
    current.raw.get("ide2").cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_cloud_init_is_a_seed_iso_replaced_on_change_and_deleted_with_the_vm() {
    let env = Env::start("seed").await;
    secret(&env, 1).await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web-net"},
        "data": {"network-config": "version: 2\nethernets:\n  eth0: {dhcp4: true}\n"},
    }))
    .await;
    let mut spec = manifests::imported(json!({
        "customCloudInit": {
            "userData": {"secretKeyRef": {"name": "web-seed", "key": "user-data"}},
            "networkConfig": {"configMapKeyRef": {"name": "web-net", "key": "network-config"}},
        },
    }));
    spec.as_object_mut().unwrap().remove("cloudInit");
    let vmid = env.create_ready("web", spec).await;

    let first = seed_isos(&env.sim, vmid).await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(
        ide2(&env.sim, vmid)
            .await
            .starts_with(&format!("{},media=cdrom", first[0])),
        "the seed is attached"
    );
    // Uploaded as an ISO with its checksum, before the VM first started.
    let requests = env.sim.requests().await;
    let at = |method: &str, route: &str| {
        requests
            .iter()
            .position(|r| r["method"] == method && r["route"] == route)
            .unwrap_or_else(|| panic!("{method} {route} was sent"))
    };
    let upload = &requests[at("POST", "/nodes/{node}/storage/{storage}/upload")];
    assert_eq!(upload["params"]["content"], "iso", "{upload}");
    assert_eq!(upload["params"]["checksum-algorithm"], "sha256", "{upload}");
    assert!(
        at("POST", "/nodes/{node}/storage/{storage}/upload")
            < at("POST", "/nodes/{node}/qemu/{vmid}/status/start"),
        "uploaded before the first start"
    );

    // New data: a new ISO is swapped in while the VM runs, pending until
    // it starts again; the old ISO is deleted.
    secret(&env, 2).await;
    env.patch_vm(
        "web",
        json!({"metadata": {"annotations": {"test/poke": "1"}}}),
    )
    .await;
    let vm = env
        .wait_vm("web", "the new seed swapped in, pending", |vm| {
            let at = &vm.status.as_ref().ok_or("no status")?.at_provider;
            at.pending_changes
                .iter()
                .any(|c| c == "customCloudInit")
                .then(|| vm.clone())
                .ok_or_else(|| format!("pending {:?}", at.pending_changes))
        })
        .await;
    let pid = vm.status.unwrap().at_provider.seed_changed_under_pid;
    assert!(pid.is_some());
    support::poll("the old seed deleted", DEADLINE, || async {
        let isos = seed_isos(&env.sim, vmid).await;
        (isos.len() == 1 && isos != first)
            .then_some(())
            .ok_or(format!("{isos:?}"))
    })
    .await;
    let second = seed_isos(&env.sim, vmid).await;
    assert!(ide2(&env.sim, vmid).await.starts_with(&second[0]));

    // Started again: the guest has read it.
    let client = env.sim.client();
    client
        .wait_task(&client.stop_vm("pve", vmid).await.unwrap())
        .await
        .unwrap();
    env.wait_vm("web", "started again, nothing pending", |vm| {
        let at = &vm.status.as_ref().ok_or("no status")?.at_provider;
        (at.pending_changes.is_empty()
            && at.state == Some(provider_proxmox::api::vm::ObservedState::Running))
        .then_some(())
        .ok_or_else(|| format!("pending {:?}, state {:?}", at.pending_changes, at.state))
    })
    .await;

    // The data is nowhere but in its Secret and on the ISO.
    let status = serde_json::to_string(&env.vm("web").await.status).unwrap();
    assert!(!status.contains(MARK), "status: {status}");
    let events = format!("{:?}", env.events("web").await);
    assert!(!events.contains(MARK), "events: {events}");
    let logs = crate::reconcile::logs::text();
    assert!(logs.contains("UploadSeed"), "the logs were captured");
    assert!(!logs.contains(MARK), "the user-data is in the logs");

    env.vms().delete("web", &Default::default()).await.unwrap();
    env.wait_gone("web").await;
    assert!(!env.sim.vmids().await.contains(&vmid));
    assert_eq!(seed_isos(&env.sim, vmid).await, Vec::<String>::new());
}

/// Waits for a seed ISO of `vmid` that is not in `known`; returns them.
async fn new_seed(env: &Env, vmid: u32, known: &[String], what: &str) -> Vec<String> {
    support::poll(what, DEADLINE, || async {
        let new: Vec<String> = seed_isos(&env.sim, vmid)
            .await
            .into_iter()
            .filter(|iso| !known.contains(iso))
            .collect();
        (!new.is_empty())
            .then_some(new)
            .ok_or_else(|| format!("no new seed ISO yet (known: {known:?})"))
    })
    .await
}

/// Synced says `InvalidSpec` naming what is missing.
fn missing(vm: &ProxmoxVM, what: &str) -> Result<(), String> {
    let synced = condition(vm, "Synced").ok_or("no Synced condition")?;
    let message = synced.message.as_deref().unwrap_or_default();
    (synced.reason == "SecretNotFound"
        && message.contains(what)
        && message.contains("does not exist"))
    .then_some(())
    .ok_or_else(|| format!("not waiting for {what}"))
}

/// With a resync interval of half an hour (nothing here waits that long,
/// so only a trigger explains what happens), Secrets and ConfigMaps
/// created or changed after the ProxmoxVMs reading them take effect: the
/// metadata watches wake those VMs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_and_config_maps_created_or_changed_after_the_vm_wake_it() {
    let options = Options {
        provider: json!({"resyncInterval": "30m"}),
        ..Options::default()
    };
    let env = Env::start_with("seedwake", options).await;
    // Ready first, so that its becoming Ready wakes no VM later.
    env.wait_config("pve", "Ready", |s| has_reason(s, "Available"))
        .await;
    let ns = env.ns.name().to_owned();
    let mut spec = manifests::imported(json!({
        "customCloudInit": {
            "userData": {"secretKeyRef": {"name": "late-seed", "key": "user-data"}},
            "networkConfig": {"configMapKeyRef": {"name": "late-net", "key": "network-config"}},
        },
    }));
    let fields = spec.as_object_mut().unwrap();
    fields.remove("cloudInit");
    fields.remove("agent");
    env.apply(&manifests::vm("web", spec)).await;
    let config_map = format!("ConfigMap {ns}/late-net");
    env.wait_vm("web", "waiting for its ConfigMap", |vm| {
        missing(vm, &config_map)
    })
    .await;
    let vmid = env.vmid("web").await;

    // The ConfigMap created: the VM goes on to what is missing next.
    let network = |config: &str| {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "late-net"},
            "data": {"network-config": config},
        })
    };
    env.apply(&network("version: 2\n")).await;
    let secret = format!("Secret {ns}/late-seed");
    env.wait_vm("web", "waiting for its Secret", |vm| missing(vm, &secret))
        .await;
    // The Secret created: the seed is uploaded and the VM started.
    secret_named(&env, "late-seed", 1).await;
    env.wait_ready("web").await;
    let mut known = seed_isos(&env.sim, vmid).await;
    assert_eq!(known.len(), 1, "{known:?}");

    // Each changed: a new seed ISO each time.
    secret_named(&env, "late-seed", 2).await;
    known.extend(new_seed(&env, vmid, &known, "a new seed after the Secret changed").await);
    env.apply(&network("version: 2\nethernets: {}\n")).await;
    new_seed(&env, vmid, &known, "a new seed after the ConfigMap changed").await;

    // The cloud-init password's Secret, created after its VM.
    let mut pw = manifests::imported(json!({}));
    pw["cloudInit"]["passwordSecretRef"] = json!({"name": "late-pw", "key": "password"});
    pw.as_object_mut().unwrap().remove("agent");
    env.apply(&manifests::vm("pw", pw)).await;
    env.wait_synced_reason("pw", "SecretNotFound").await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "late-pw"},
        "stringData": {"password": "l4te-passw0rd"},
    }))
    .await;
    env.wait_ready("pw").await;
}
