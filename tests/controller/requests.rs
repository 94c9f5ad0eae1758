//! What a pass costs the API server: with the ProxmoxVMs, provider configs
//! and their Secrets in the controller's watch caches, an idle VM's passes
//! read nothing from the API server and write nothing (its status is
//! unchanged); a resource naming a config it may not use costs a few
//! requests a minute, not a hot loop. Counted on the controller's own
//! client.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Request;
use kube::client::{Body, ClientBuilder};
use serde_json::json;

use crate::reconcile::containers::{container, ct_condition, debian};
use crate::reconcile::{Controller, Env, Options, manifests};
use crate::support;

/// (verb, path without query) → requests made.
type Counts = Arc<Mutex<BTreeMap<(String, String), u32>>>;

/// An admin client that counts every request it sends.
fn counting_client(counts: Counts) -> kube::Client {
    let layer = tower::util::MapRequestLayer::new(move |req: Request<Body>| {
        let key = (req.method().to_string(), req.uri().path().to_owned());
        *counts.lock().unwrap().entry(key).or_default() += 1;
        req
    });
    ClientBuilder::try_from(support::cluster().config.clone())
        .expect("a client from the admin config")
        .with_layer(&layer)
        .build()
}

/// The passes counted in the metrics so far.
fn passes(controller: &Controller) -> u64 {
    let text = controller.metrics.encode();
    text.lines()
        .filter(|l| l.starts_with("proxmox_provider_reconcile_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_passes_read_nothing_from_the_api_server_and_write_nothing() {
    let mut env = Env::without_controller("requests", Options::default()).await;
    let counts: Counts = Arc::default();
    let controller = Controller::start(counting_client(counts.clone()), env.settings()).await;
    // Check each VM every 5 s (the shortest resync) to get many passes.
    let names = ["a", "b", "c"];
    for name in names {
        let mut vm = manifests::vm(name, manifests::imported(json!({})));
        vm["metadata"]["annotations"] = json!({"crossplane.io/poll-interval": "5s"});
        env.apply(&vm).await;
    }
    for name in names {
        env.wait_ready(name).await;
    }
    // Let the creation's last writes and events settle, then measure.
    tokio::time::sleep(Duration::from_secs(8)).await;
    counts.lock().unwrap().clear();
    let before = passes(&controller);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let idle_passes = passes(&controller) - before;
    let seen = counts.lock().unwrap().clone();
    let metrics = controller.metrics.encode();
    controller.stop().await;
    env.controller = None;

    assert!(
        idle_passes >= 9,
        "three VMs resynced every 5 s for 20 s: {idle_passes} passes"
    );
    let on = |verb: &str, resource: &str| -> u32 {
        seen.iter()
            .filter(|((v, path), _)| v == verb && path.contains(resource))
            .map(|(_, n)| n)
            .sum()
    };
    let report = format!("{idle_passes} idle passes made {seen:#?}");
    assert_eq!(
        on("GET", "/proxmoxvms/"),
        0,
        "ProxmoxVMs come from the cache: {report}"
    );
    assert_eq!(
        on("GET", "/providerconfigs/"),
        0,
        "configs come from the cache: {report}"
    );
    // The provider config's own pass reads its credentials Secret once per
    // resync interval (5 s in these tests): at most 5 in 20 s, whatever
    // the number of VMs and passes.
    assert!(
        on("GET", "/secrets/") <= 5,
        "Secrets are not read per VM pass: {report}"
    );
    assert_eq!(
        on("PATCH", "/proxmoxvms/"),
        0,
        "an unchanged status is not written: {report}"
    );
    assert_eq!(
        on("POST", "/events"),
        0,
        "nothing happened worth an event: {report}"
    );
    // Crossplane's managed resource metrics: the states counted from the
    // caches (the three Ready VMs, kinds with nothing yet at 0), and the
    // lifecycle from the watch.
    for line in [
        "crossplane_managed_resource_exists{gvk=\"proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxVM\"} 3",
        "crossplane_managed_resource_ready{gvk=\"proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxVM\"} 3",
        "crossplane_managed_resource_synced{gvk=\"proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxVM\"} 3",
        "crossplane_managed_resource_exists{gvk=\"proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxContainer\"} 0",
        "crossplane_managed_resource_exists{gvk=\"proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxIPSet\"} 0",
        // Each VM seen new and Ready once, timed from its creation.
        "crossplane_managed_resource_first_time_to_reconcile_seconds_count{gvk=\"proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxVM\"} 3",
        "crossplane_managed_resource_first_time_to_readiness_seconds_count{gvk=\"proxmox.m.crossplane.io/v1alpha1, Kind=ProxmoxVM\"} 3",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in\n{metrics}");
    }
}

/// A tenant's ProxmoxContainer naming another namespace's ProviderConfig
/// (not one of its own namespace) or a ClusterProviderConfig (not served
/// to a namespaced provider): each is told `ProviderConfigNotFound`, and
/// then costs the API server at most a pass per retry (30 s), like a VM.
/// Before, the container plan asked for its finalizer first, the pass
/// could not write it without a config and called it done: a pass again
/// at once, hundreds of requests a second, and no condition at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_naming_a_config_it_may_not_use_costs_a_few_requests_a_minute() {
    let mut env = Env::without_controller("requests-foreign", Options::default()).await;
    // Another team's namespace, with a ProviderConfig of its own.
    let other = support::namespace("requests-other").await;
    let mut theirs = manifests::provider_config(&env.sim, &json!({}));
    theirs["metadata"]["name"] = json!("theirs");
    let theirs = serde_json::from_value(theirs).expect("a Kubernetes object");
    support::apply_objects(&[theirs], Some(other.name())).await;
    let counts: Counts = Arc::default();
    let controller = Controller::start(counting_client(counts.clone()), env.settings()).await;
    let mut foreign = container("foreign", debian(json!({})));
    foreign["spec"]["providerConfigRef"] = json!({"kind": "ProviderConfig", "name": "theirs"});
    env.apply(&foreign).await;
    let mut cluster = container("cluster", debian(json!({})));
    cluster["spec"]["providerConfigRef"] =
        json!({"kind": "ClusterProviderConfig", "name": "nowhere"});
    env.apply(&cluster).await;
    for name in ["foreign", "cluster"] {
        env.wait_container(
            name,
            "Synced=False ProviderConfigNotFound",
            |ct| match ct_condition(ct, "Synced") {
                Some(c) if c.reason == "ProviderConfigNotFound" => Ok(()),
                other => Err(format!("Synced is {other:?}")),
            },
        )
        .await;
    }
    // Let the first status writes settle, then measure.
    tokio::time::sleep(Duration::from_secs(3)).await;
    counts.lock().unwrap().clear();
    tokio::time::sleep(Duration::from_secs(20)).await;
    let seen = counts.lock().unwrap().clone();
    controller.stop().await;
    env.controller = None;
    let report = format!("{seen:#?}");
    let on = |resource: &str| -> u32 {
        seen.iter()
            .filter(|((_, path), _)| path.contains(resource))
            .map(|(_, n)| n)
            .sum()
    };
    // One retry each in 20 s at most, and an unchanged status is not
    // written: a handful, where the hot loop sent thousands.
    assert!(
        on("/proxmoxcontainers") <= 4,
        "the two containers' requests in 20 s: {report}"
    );
    assert!(
        on("providerconfigs") <= 4,
        "the configs they name are not read again and again: {report}"
    );
    let total: u32 = seen.values().sum();
    assert!(
        total <= 60,
        "everything the controller sent in 20 s ({total}): {report}"
    );
    // Nothing was added that would hold the deletion.
    let ct = env.container("foreign").await;
    assert!(
        ct.metadata.finalizers.unwrap_or_default().is_empty(),
        "no finalizer without a usable config"
    );
}

/// What deleting a running VM costs the API server, counted on the
/// controller's client: its status written when each of its two tasks (the
/// shutdown, the destroy) is recorded, the finalizer removed, one event per
/// task's end. Not read again (the cache holds the deletion, a later version
/// than our last write), and no status written after the finalizer went (it
/// found the resource gone: one request per VM for nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_vm_costs_two_status_writes_and_one_patch() {
    let mut env = Env::without_controller("requests-delete", Options::default()).await;
    let counts: Counts = Arc::default();
    let controller = Controller::start(counting_client(counts.clone()), env.settings()).await;
    env.apply(&manifests::vm("gone", manifests::imported(json!({}))))
        .await;
    env.wait_ready("gone").await;
    // Let the creation's last writes (the guest agent's address) settle.
    env.wait_vm("gone", "its guest agent's address", |vm| {
        match vm
            .status
            .as_ref()
            .and_then(|s| s.at_provider.ip_address.as_ref())
        {
            Some(_) => Ok(()),
            None => Err("no address yet".into()),
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    counts.lock().unwrap().clear();
    env.vms()
        .delete("gone", &Default::default())
        .await
        .expect("the delete is accepted");
    env.wait_gone("gone").await;
    // Anything sent after the resource went would be counted here too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = counts.lock().unwrap().clone();
    controller.stop().await;
    env.controller = None;
    let report = format!("{seen:#?}");
    let on = |verb: &str, ends: &str| -> u32 {
        seen.iter()
            .filter(|((v, path), _)| {
                v == verb && path.contains("/proxmoxvms/gone") && path.ends_with(ends)
            })
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(on("GET", "gone"), 0, "read from the cache: {report}");
    assert_eq!(
        on("PATCH", "/status"),
        2,
        "the shutdown and the destroy recorded: {report}"
    );
    assert_eq!(on("PATCH", "gone"), 1, "the finalizer removed: {report}");
    let events: u32 = seen
        .iter()
        .filter(|((v, path), _)| v == "POST" && path.ends_with("/events"))
        .map(|(_, n)| n)
        .sum();
    assert!(events <= 2, "an event per task's end at most: {report}");
}
