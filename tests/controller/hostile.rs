//! Issue 31's hostile ProxmoxContainers that the API server cannot judge
//! (what the node has, what a Secret holds, what the provider config
//! allows, what the Proxmox version has): each is a condition naming the
//! field, and nothing is sent to create it.

use pve_sim::SimConfig;
use serde_json::json;

use crate::reconcile::containers::{container, ct_condition, debian};
use crate::reconcile::{Env, Options, Sim, manifests};

/// Containers that do not fit the simulator's node `pve` (16 CPUs, 64 GiB,
/// bridge vmbr0) and a password Proxmox would answer 413: each says which
/// field and why, and no create reaches Proxmox. Before issue 31 each was
/// sent (and the password answered 413 with a message naming no field).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_that_do_not_fit_the_node_are_refused_naming_the_field() {
    let env = Env::start("ct-hostile").await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "huge"},
        "stringData": {"password": "p".repeat(700 * 1024)},
    }))
    .await;
    let rows = [
        (
            "memory-1ti",
            json!({"memory": "1Ti"}),
            "ExceedsNodeLimits",
            "spec.forProvider.memory 1 TiB is more than node pve's 64 GiB of memory",
        ),
        (
            "cores-64",
            json!({"cpu": {"cores": 64}}),
            "ExceedsNodeLimits",
            "spec.forProvider.cpu.cores 64 is more than node pve's 16 CPUs",
        ),
        (
            "bridge-missing",
            json!({"networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr9", "ip": "dhcp"}]}),
            "BridgeNotFound",
            "spec.forProvider.networks[0].bridge \"vmbr9\" is neither a bridge nor a VNet of node pve",
        ),
        (
            "password-700k",
            json!({"passwordSecretRef": {"name": "huge", "key": "password"}}),
            "InvalidSpec",
            "spec.forProvider.passwordSecretRef: the password in Secret huge key password has 716800 bytes",
        ),
    ];
    for (name, change, _, _) in &rows {
        env.apply(&container(name, debian(change.clone()))).await;
    }
    for (name, _, reason, message) in &rows {
        env.wait_container(name, reason, |ct| match ct_condition(ct, "Synced") {
            Some(c)
                if c.reason == *reason
                    && c.message.as_deref().is_some_and(|m| m.contains(message)) =>
            {
                Ok(())
            }
            other => Err(format!("Synced {other:?}")),
        })
        .await;
    }
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert!(creates.is_empty(), "nothing is created: {creates:?}");
}

/// Privileged containers and the features pve-container reserves to
/// root@pam (`keyctl`, `fuse`) were created for anyone before issue 31 (the
/// provider's token may be root@pam's). Now each is Synced=False
/// `NotAllowed` naming the field and nothing is created, until the provider
/// config's `containerPolicy` allows it; then it is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privileged_containers_and_root_only_features_need_the_configs_policy() {
    let env = Env::start("ct-policy").await;
    let rows = [
        (
            "privileged",
            json!({"unprivileged": false}),
            "spec.forProvider.unprivileged is false",
        ),
        (
            "privileged-nesting",
            json!({"unprivileged": false, "features": {"nesting": true}}),
            "containerPolicy.allowPrivileged is not true",
        ),
        (
            "keyctl",
            json!({"features": {"keyctl": true}}),
            "spec.forProvider.features.keyctl",
        ),
        (
            "fuse",
            json!({"features": {"fuse": true}}),
            "spec.forProvider.features.fuse",
        ),
    ];
    for (name, change, _) in &rows {
        env.apply(&container(name, debian(change.clone()))).await;
    }
    for (name, _, message) in &rows {
        env.wait_container(name, "NotAllowed", |ct| match ct_condition(ct, "Synced") {
            Some(c)
                if c.reason == "NotAllowed"
                    && c.message.as_deref().is_some_and(|m| m.contains(message)) =>
            {
                Ok(())
            }
            other => Err(format!("Synced {other:?}")),
        })
        .await;
    }
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert!(creates.is_empty(), "nothing is created: {creates:?}");

    // The platform team allows keyctl only: that container is created, the
    // others still are not.
    env.apply(&manifests::provider_config(
        &env.sim,
        &json!({"containerPolicy": {"allowFeatures": ["keyctl"]}}),
    ))
    .await;
    env.wait_container_ready("keyctl").await;
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert!(
        creates[0]["params"]["features"]
            .as_str()
            .is_some_and(|f| f.contains("keyctl=1")),
        "{creates:?}"
    );
    let fuse = env.container("fuse").await;
    let synced = ct_condition(&fuse, "Synced").map(|c| c.reason.clone());
    assert_eq!(synced.as_deref(), Some("NotAllowed"));
}

/// A ProxmoxContainer with `template.oci` on a PVE 8.4 cluster sent
/// `oci-registry-pull` (which PVE 8 does not have) and reported "not
/// implemented". Now it says `OciNeedsPve91`, as a ProxmoxImage does, and
/// nothing is pulled or created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_container_on_pve_8_says_it_needs_9_1_and_pulls_nothing() {
    let mut env = Env::without_controller("ct-oci8", Options::default()).await;
    env.sim = Sim::start_with(SimConfig {
        time_scale: 0.01,
        pve_version: 8,
        ..SimConfig::default()
    })
    .await;
    env.apply(&manifests::provider_config(&env.sim, &json!({})))
        .await;
    env.start_controller().await;
    let oci = json!({"template": {"oci": {"reference": "docker.io/library/alpine:3.21", "storage": "local"}}});
    env.apply(&container("alpine", debian(oci))).await;
    let message = env
        .wait_container("alpine", "OciNeedsPve91", |ct| {
            match ct_condition(ct, "Synced") {
                Some(c) if c.reason == "OciNeedsPve91" => Ok(c.message.clone().unwrap_or_default()),
                other => Err(format!("Synced {other:?}")),
            }
        })
        .await;
    assert!(
        message.contains("8.4") && message.contains("spec.forProvider.template.oci"),
        "{message}"
    );
    let pulls = env
        .sim
        .count("POST", "/nodes/{node}/storage/{storage}/oci-registry-pull")
        .await;
    assert_eq!(pulls, 0, "no oci-registry-pull is sent");
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert!(creates.is_empty(), "{creates:?}");
}

/// Issue 31's poisoning case: team-b's container of
/// `docker.io/library/alpine:3.21` was created from team-a's pull of
/// `evil.example/team-a/alpine:3.21` (the same file name, `alpine_3.21.tar`).
/// Now each reference pulls its own file and each container is created
/// from its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_name_and_tag_from_another_registry_is_pulled_into_its_own_file() {
    let env = Env::start("ct-poison").await;
    let oci = |reference: &str| json!({"template": {"oci": {"reference": reference, "storage": "local"}}});
    env.apply(&container(
        "team-a",
        debian(oci("evil.example/team-a/alpine:3.21")),
    ))
    .await;
    env.wait_container_ready("team-a").await;
    env.apply(&container(
        "team-b",
        debian(oci("docker.io/library/alpine:3.21")),
    ))
    .await;
    env.wait_container_ready("team-b").await;
    let pulls = env
        .sim
        .requests_to("POST", "/nodes/{node}/storage/{storage}/oci-registry-pull")
        .await;
    assert_eq!(pulls.len(), 2, "each reference is pulled: {pulls:?}");
    let volume = |name: &str| {
        let env = &env;
        let name = name.to_owned();
        async move {
            env.container(&name)
                .await
                .status
                .and_then(|s| s.at_provider.template_volume)
                .unwrap_or_default()
        }
    };
    let (a, b) = (volume("team-a").await, volume("team-b").await);
    assert_ne!(a, b, "team-b is not created from team-a's file");
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    let templates: Vec<&str> = creates
        .iter()
        .filter_map(|c| c["params"]["ostemplate"].as_str())
        .collect();
    assert!(
        templates.contains(&b.as_str()) && templates.contains(&a.as_str()),
        "{templates:?}"
    );
}
