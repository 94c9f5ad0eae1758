//! Bad input, on the real control plane: every row of the tables is an
//! invalid object. The API server refuses what it can check, with a message
//! a person can act on; what only the provider can know (Secrets, CA
//! bundles, Proxmox) or what was written around the schema is reported as a
//! condition on the object. Meanwhile a valid VM in the same namespace
//! converges, and the controller neither panics nor stalls.

mod cases;
mod crd;
mod refused;
mod refused_kinds;
mod reported;

use serde_json::{Value, json};

use crate::reconcile::{Env, Options, condition, is_true, manifests, schema};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_invalid_objects_with_actionable_messages() {
    // Before installing: the CRDs may be swapped for loose copies meanwhile.
    let _strict = schema::strict().await;
    support::install_crds(support::repo_root().join("crds")).await;
    let ns = support::namespace("refused").await;
    let mut rows = refused::rows();
    rows.extend(refused_kinds::rows());
    let mut wrong = vec![];
    for row in &rows {
        match refused::dry_run(&row.object, ns.name()).await {
            Ok(()) => wrong.push(format!("{}: accepted", row.what)),
            Err(message) if !message.contains(row.message) => wrong.push(format!(
                "{}: want {:?} in the message, got: {message}",
                row.what, row.message
            )),
            Err(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows:\n{}",
        wrong.len(),
        rows.len(),
        wrong.join("\n")
    );
    assert!(rows.len() >= 130, "{} rows", rows.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_objects_are_reported_while_a_valid_vm_converges() {
    let mut env = Env::without_controller("badinput", Options::default()).await;
    let (around, mut expects) = cases::around_the_schema(&env.sim);
    crd::write_around_the_schema(&mut env, &around).await;
    env.start_controller().await;

    cases::import_sources(&env.sim).await;
    let (objects, more) = cases::provider_knows(&env.sim);
    for object in &objects {
        env.apply(object).await;
    }
    expects.extend(more);
    // An annotation no schema checks, which once panicked the controller.
    let mut odd_poll = manifests::vm("odd-poll-interval", manifests::imported(json!({})));
    odd_poll["metadata"]["annotations"] = json!({"crossplane.io/poll-interval": "1s-1s"});
    env.apply(&odd_poll).await;
    // Applied last, behind every bad object in the queue.
    env.apply(&manifests::vm("good", manifests::imported(json!({}))))
        .await;

    env.wait_ready("good").await;
    env.wait_ready("odd-poll-interval").await;
    reported::wait_all(env.ns.name(), &expects).await;
    assert!(expects.len() >= 40, "{} rows", expects.len());
    let mut nothing: Vec<&str> = cases::limit_rows().iter().map(|r| r.0).collect();
    nothing.extend(cases::IMPORT_REFUSED);
    reported::nothing_created(env.ns.name(), &env.sim, &nothing).await;
    env.wait_ready(cases::IMPORTED_BY_POLICY).await;
    env.wait_ready("poll-banana").await;
    env.wait_ready("poll-zero").await;
    // Still running, never panicked, stops cleanly.
    env.stop_controller().await;
}

/// A rule of a Role.
fn rule(group: &str, resource: &str, verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": [resource], "verbs": verbs})
}

const GROUP: &str = "proxmox.m.crossplane.io";

/// deploy/'s rules for one namespace, without ConfigMaps, with Secrets
/// read-only, and with `patch` on ProxmoxVMs (their metadata) when
/// `metadata`.
fn rules(metadata: bool) -> Vec<Value> {
    let vms: &[&str] = if metadata {
        &["get", "list", "watch", "patch"]
    } else {
        &["get", "list", "watch"]
    };
    vec![
        rule(GROUP, "proxmoxvms", vms),
        rule(GROUP, "proxmoxvms/status", &["patch"]),
        rule(
            GROUP,
            "proxmoxcontainers",
            &["get", "list", "watch", "patch"],
        ),
        rule(GROUP, "proxmoxcontainers/status", &["patch"]),
        rule(GROUP, "providerconfigs", &["get", "list", "watch", "patch"]),
        rule(GROUP, "providerconfigs/status", &["patch"]),
        rule("", "secrets", &["get", "list", "watch"]),
        rule("", "events", &["create", "patch"]),
    ]
}

/// The Role `provider` of the test's namespace, with `rules`.
async fn role(env: &Env, rules: &[Value]) {
    env.apply(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "provider"}, "rules": rules,
    }))
    .await;
}

/// The provider in the namespaced mode (nothing cluster-scoped, so a Role
/// is all it needs) as a ServiceAccount bound to the Role `provider` with
/// `rules`.
async fn provider_under(env: &Env, rules: &[Value]) -> crate::reconcile::Controller {
    role(env, rules).await;
    let account = support::service_account_kubeconfig(
        env.ns.name(),
        "provider",
        support::Grant::Role("provider"),
    )
    .await;
    let mut settings = env.settings();
    settings.cluster_configs = false;
    crate::reconcile::Controller::start(account.client(), settings).await
}

/// The provider under an RBAC that lacks what two resources need: ConfigMaps
/// (one reads `customCloudInit` from one) and creating Secrets (the other
/// has a connection Secret). Each says so on its Synced condition, with the
/// verb and the resource, and nothing is created for the first; once the
/// permissions are granted both converge without any change to them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_rbac_does_not_allow_is_reported_forbidden_on_the_resource() {
    let env = Env::without_controller("forbidden", Options::default()).await;
    let ns = env.ns.name();
    let rules = rules(true);
    let controller = provider_under(&env, &rules).await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-net"},
        "data": {"network-config": "version: 2\n"},
    }))
    .await;
    let mut seeded = manifests::imported(json!({
        "customCloudInit": {
            "networkConfig": {"configMapKeyRef": {"name": "web-net", "key": "network-config"}},
        },
    }));
    seeded.as_object_mut().unwrap().remove("cloudInit");
    env.apply(&manifests::vm("seeded", seeded)).await;
    let mut conn = manifests::vm("conn", manifests::imported(json!({})));
    conn["spec"]["writeConnectionSecretToRef"] = json!({"name": "conn-secret"});
    env.apply(&conn).await;

    let refused = env.wait_synced_reason("seeded", "Forbidden").await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains(r#"cannot get resource "configmaps""#)
            && message.contains("web-net")
            && message.contains("grant it in the provider's RBAC"),
        "names the verb, the resource and what to do: {message}"
    );
    reported::nothing_created(ns, &env.sim, &["seeded"]).await;
    // The VM itself is created and Ready; Synced says what is missing.
    let message = env
        .wait_vm("conn", "Ready, Synced=False Forbidden", |vm| {
            let ready = condition(vm, "Ready").is_some_and(is_true);
            match condition(vm, "Synced") {
                Some(c) if ready && c.reason == "Forbidden" => {
                    Ok(c.message.clone().unwrap_or_default())
                }
                Some(_) | None => Err("not yet".to_owned()),
            }
        })
        .await;
    assert!(
        message.contains(r#"cannot create resource "secrets""#) && message.contains("conn-secret"),
        "{message}"
    );
    assert!(env.secret("conn-secret").await.is_none());

    // Granted: both converge by themselves (retried with backoff).
    let mut granted = rules.clone();
    granted.push(rule("", "configmaps", &["get", "list", "watch"]));
    granted.push(rule("", "secrets", &["create", "patch"]));
    role(&env, &granted).await;
    env.wait_ready("seeded").await;
    env.wait_ready("conn").await;
    assert!(env.secret("conn-secret").await.is_some());
    controller.stop().await;
}

/// A refusal of the resource's own metadata write (here its VMID in
/// `crossplane.io/external-name`: no `patch` on ProxmoxVMs) is `Forbidden`
/// too, naming the write, the verb and the resource, not a
/// `ReconcileError`; nothing is created, and granting it is enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_metadata_write_is_reported_forbidden_on_the_resource() {
    let env = Env::without_controller("forbidden-meta", Options::default()).await;
    let before = env.sim.vmids().await;
    let controller = provider_under(&env, &rules(false)).await;
    env.apply(&manifests::vm("web", manifests::imported(json!({}))))
        .await;
    let refused = env.wait_synced_reason("web", "Forbidden").await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains(&format!(
            "patching ProxmoxVM {}/web to record the VMID",
            env.ns.name()
        )) && message.contains(r#"cannot patch resource "proxmoxvms""#)
            && message.contains("grant it in the provider's RBAC"),
        "names the write, the verb, the resource and what to do: {message}"
    );
    assert_eq!(env.sim.vmids().await, before, "nothing created");
    role(&env, &rules(true)).await;
    env.wait_ready("web").await;
    controller.stop().await;
}

/// Issue 31: a ProxmoxContainer whose pass met an RBAC refusal (here the
/// read of its provider config's credentials Secret: Secrets may be listed
/// and watched, not read one by one) said nothing and was retried as a
/// controller error. Now it says Synced=False `Forbidden` with the API
/// server's words, as a VM does, retried after the provider-config retry;
/// nothing is created, and granting the read is enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_the_rbac_refuses_a_read_is_reported_forbidden() {
    use crate::reconcile::containers::{container, ct_condition, debian};
    let env = Env::without_controller("forbidden-ct", Options::default()).await;
    let before = env.sim.vmids().await;
    let granted = rules(true);
    let mut refused = granted.clone();
    for rule in &mut refused {
        if rule["resources"][0] == "secrets" {
            rule["verbs"] = json!(["list", "watch"]);
        }
    }
    let controller = provider_under(&env, &refused).await;
    env.apply(&container("ct", debian(json!({})))).await;
    let message = env
        .wait_container("ct", "Synced=False Forbidden", |ct| {
            match ct_condition(ct, "Synced") {
                Some(c) if c.reason == "Forbidden" => Ok(c.message.clone().unwrap_or_default()),
                other => Err(format!("Synced {other:?}")),
            }
        })
        .await;
    assert!(
        message.contains(r#"cannot get resource "secrets""#)
            && message.contains("grant it in the provider's RBAC"),
        "names the verb, the resource and what to do: {message}"
    );
    assert_eq!(env.sim.vmids().await, before, "nothing created");
    role(&env, &granted).await;
    env.wait_container_ready("ct").await;
    controller.stop().await;
}
