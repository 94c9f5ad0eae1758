//! Provider config status: Ready after an authenticated `GET /version`, the
//! Proxmox version, the number of users; credentials Secret changes picked
//! up at once; a config in use cannot be deleted.

use kube::Api;
use kube::api::DeleteParams;
use provider_proxmox::api::{ConditionStatus, ProviderConfig};
use serde_json::json;

use crate::reconcile::configs::{has_reason, ready, wait_deleted, wait_protected};
use crate::reconcile::{Env, Options, logs, manifests};
use crate::support;

/// A VM that uses the config `pve` but does nothing (paused).
fn paused_vm(name: &str) -> serde_json::Value {
    let mut vm = manifests::vm(name, manifests::imported(json!({})));
    vm["metadata"]["annotations"] = json!({"crossplane.io/paused": "true"});
    vm
}

/// The config's resync interval, long enough that only a trigger can
/// explain a prompt change.
fn long_resync() -> Options {
    Options {
        provider: json!({"resyncInterval": "10m"}),
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_is_ready_with_the_version_and_counts_its_users() {
    let env = Env::start_with("pcready", long_resync()).await;
    let status = env
        .wait_config("pve", "Ready with 0 users", |s| {
            has_reason(s, "Available") && s.users == Some(0)
        })
        .await;
    let condition = ready(&status).unwrap();
    assert_eq!(condition.status, ConditionStatus::True);
    assert_eq!(
        status.version.as_deref(),
        Some("9.1.1"),
        "the sim's version"
    );
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(condition.observed_generation, Some(1));

    env.apply(&paused_vm("a")).await;
    env.apply(&paused_vm("b")).await;
    env.wait_config("pve", "2 users", |s| s.users == Some(2))
        .await;
    env.vms()
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    let status = env
        .wait_config("pve", "1 user", |s| s.users == Some(1))
        .await;
    assert_eq!(
        ready(&status).unwrap().last_transition_time,
        condition.last_transition_time,
        "an unchanged Ready keeps its transition time"
    );
    assert_eq!(
        env.sim.count("GET", "/version").await,
        1,
        "users coming and going ask Proxmox nothing: one check per resync interval"
    );

    let table = support::kubectl_ok(&["get", "providerconfig", "pve", "-n", env.ns.name()]).await;
    let (header, row) = table.trim().split_once('\n').unwrap();
    let header: Vec<&str> = header.split_whitespace().collect();
    let row: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        header[..5],
        ["NAME", "READY", "USERS", "VERSION", "ENDPOINT"],
        "{table}"
    );
    assert_eq!(row[..4], ["pve", "True", "1", "9.1.1"], "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_unauthorized_until_the_secret_is_fixed() {
    const WRONG: &str = "0f1e2d3c-wrong-token-value";
    let mut env = Env::without_controller("pcauth", long_resync()).await;
    let mut wrong = manifests::credentials();
    wrong["stringData"]["secret"] = json!(WRONG);
    env.apply(&wrong).await;
    env.start_controller().await;
    env.apply(&manifests::vm("web", manifests::imported(json!({}))))
        .await;

    let status = env
        .wait_config("pve", "Unauthorized", |s| has_reason(s, "Unauthorized"))
        .await;
    let condition = ready(&status).unwrap();
    let message = condition.message.clone().unwrap_or_default();
    assert_eq!(condition.status, ConditionStatus::False);
    assert!(message.contains("refused the credentials"), "{message}");
    assert!(
        !message.contains(WRONG),
        "no secret in the status: {message}"
    );
    assert_eq!(status.version, None);
    let waiting = env.wait_synced_reason("web", "ReconcileError").await;
    assert!(
        waiting.message.unwrap_or_default().contains("unauthorized"),
        "the VM waits on the config"
    );

    // Fixing the Secret: the config's next check is 10 minutes away and the
    // VM's retry 30 s, so only the Secret watch explains what follows.
    env.apply(&manifests::credentials()).await;
    env.wait_config("pve", "Ready again", |s| has_reason(s, "Available"))
        .await;
    env.wait_ready("web").await;
    let logs = logs::text();
    let key = format!("ProviderConfig {}/pve", env.ns.name());
    assert!(
        logs.lines().any(
            |l| l.contains("requeueing the ProxmoxVMs of the provider config") && l.contains(&key)
        ),
        "the config's pass woke its VM"
    );
    assert!(!logs.contains(WRONG), "no secret in the logs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_and_a_wrong_pin_say_what_is_wrong() {
    let env = Env::start_with("pcbroken", long_resync()).await;
    let mut missing = manifests::provider_config(&env.sim, &json!({}));
    missing["metadata"]["name"] = json!("nosecret");
    missing["spec"]["credentials"]["secretRef"]["name"] = json!("later");
    env.apply(&missing).await;
    let wrong_pin = ["AA"; 32].join(":");
    let mut pinned = manifests::provider_config(&env.sim, &json!({}));
    pinned["metadata"]["name"] = json!("badpin");
    pinned["spec"]["tls"]["fingerprint"] = json!(wrong_pin);
    env.apply(&pinned).await;

    let status = env
        .wait_config("nosecret", "SecretNotFound", |s| {
            has_reason(s, "SecretNotFound")
        })
        .await;
    let message = ready(&status).unwrap().message.clone().unwrap_or_default();
    assert!(
        message.contains(&format!("{}/later", env.ns.name())),
        "names the Secret: {message}"
    );
    let status = env
        .wait_config("badpin", "TlsError", |s| has_reason(s, "TlsError"))
        .await;
    let message = ready(&status).unwrap().message.clone().unwrap_or_default();
    assert!(
        message
            .to_uppercase()
            .contains(&env.sim.handle.fingerprint().to_uppercase()),
        "shows the presented fingerprint: {message}"
    );
    assert!(
        message.contains(&wrong_pin),
        "and the pinned one: {message}"
    );

    // The Secret appears: picked up by the Secret watch.
    let mut later = manifests::credentials();
    later["metadata"]["name"] = json!("later");
    env.apply(&later).await;
    env.wait_config("nosecret", "Ready", |s| has_reason(s, "Available"))
        .await;
    let wide =
        support::kubectl_ok(&["get", "providerconfig", "-o", "wide", "-n", env.ns.name()]).await;
    assert!(
        wide.lines()
            .any(|l| l.starts_with("badpin") && l.contains("TlsError")),
        "-o wide shows the reason: {wide}"
    );
}

fn configs(env: &Env) -> Api<ProviderConfig> {
    Api::namespaced(support::client(), env.ns.name())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_in_use_stays_until_its_vms_are_gone() {
    let env = Env::start_with("pcinuse", long_resync()).await;
    let ns = env.ns.name().to_owned();
    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;
    env.apply(&paused_vm("idle")).await;
    wait_protected(&configs(&env), "pve").await;
    env.wait_config("pve", "2 users", |s| s.users == Some(2))
        .await;

    configs(&env)
        .delete("pve", &DeleteParams::default())
        .await
        .unwrap();
    let why = format!("cannot be deleted: 2 ProxmoxVMs use it: {ns}/idle, {ns}/web");
    let status = env
        .wait_config("pve", "Deleting, naming its users", |s| {
            has_reason(s, "Deleting") && ready(s).unwrap().message.as_deref() == Some(&why)
        })
        .await;
    assert_eq!(ready(&status).unwrap().status, ConditionStatus::False);
    // A Warning event says why.
    env.wait_event("pve", |(t, reason, message, _)| {
        t == "Warning" && reason == "InUse" && *message == why
    })
    .await;

    // A VM created now would start to depend on a config that is going
    // away: it is refused, and nothing is sent for it.
    env.apply(&manifests::vm("late", manifests::imported(json!({}))))
        .await;
    let refused = env.wait_synced_reason("late", "ReconcileError").await;
    let message = refused.message.unwrap_or_default();
    assert!(message.contains("is being deleted"), "{message}");
    assert!(
        env.vm("late").await.external_name().is_none(),
        "no VMID allocated"
    );
    for name in ["late", "idle"] {
        env.vms()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        env.wait_gone(name).await;
    }
    env.wait_config("pve", "1 user left", |s| {
        s.users == Some(1) && has_reason(s, "Deleting")
    })
    .await;
    assert!(
        configs(&env).get_opt("pve").await.unwrap().is_some(),
        "the config stays while web uses it"
    );

    // The last user's own deletion still runs with its config, then the
    // config goes.
    env.vms()
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_gone("web").await;
    assert!(
        !env.sim.vmids().await.contains(&vmid),
        "web's VM was destroyed on Proxmox"
    );
    wait_deleted(&configs(&env), "pve").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_without_users_is_deleted_at_once() {
    let env = Env::start_with("pcunused", long_resync()).await;
    wait_protected(&configs(&env), "pve").await;
    env.wait_config("pve", "Ready with 0 users", |s| {
        has_reason(s, "Available") && s.users == Some(0)
    })
    .await;
    configs(&env)
        .delete("pve", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&configs(&env), "pve").await;
    assert!(env.events("pve").await.is_empty(), "nothing to warn about");
}

/// A ProxmoxImage deletes its files through its config: a config whose
/// only user is an image keeps its in-use finalizer while the image exists,
/// and the image's deletion still runs with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_used_only_by_an_image_stays_while_the_image_exists() {
    let mut env = Env::without_controller("pcimage", long_resync()).await;
    let ns = env.ns.name().to_owned();
    env.apply(&json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": "alpine"},
        "spec": {
            "forProvider": {"source": {"oci": "docker.io/library/alpine:3.20"}, "content": "vztmpl"},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    }))
    .await;
    env.start_controller().await;
    wait_protected(&configs(&env), "pve").await;
    env.wait_config("pve", "1 user", |s| s.users == Some(1))
        .await;
    let images: Api<provider_proxmox::api::ProxmoxImage> = Api::namespaced(support::client(), &ns);
    support::poll(
        "the image to pull its file",
        crate::reconcile::DEADLINE,
        || async {
            let image = images.get("alpine").await.map_err(|e| e.to_string())?;
            match image.status.and_then(|s| s.at_provider.summary) {
                Some(s) if s == "1/1 ready" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    configs(&env)
        .delete("pve", &DeleteParams::default())
        .await
        .unwrap();
    let status = env
        .wait_config("pve", "Deleting, naming the image", |s| {
            has_reason(s, "Deleting")
                && ready(s)
                    .unwrap()
                    .message
                    .as_deref()
                    .is_some_and(|m| m.contains(&format!("{ns}/alpine (ProxmoxImage)")))
        })
        .await;
    assert_eq!(ready(&status).unwrap().status, ConditionStatus::False);
    assert!(
        configs(&env).get_opt("pve").await.unwrap().is_some(),
        "the config stays while the image exists"
    );

    // The image still deletes its file through the config.
    images
        .delete("alpine", &DeleteParams::default())
        .await
        .unwrap();
    support::poll("the image to go", crate::reconcile::DEADLINE, || async {
        match images.get_opt("alpine").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
    assert_eq!(
        env.sim
            .count("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}")
            .await,
        1,
        "the pulled file deleted"
    );
}
