//! The test harness against the real kube-apiserver: CRDs are served with
//! their schema, CEL rules and status subresource enforced by the server,
//! RBAC holds both ways for a ServiceAccount, and each test gets its own
//! namespace. Uses a small fixture CRD (tests/fixtures/control_plane).

use std::path::PathBuf;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::support;
use crate::support::Grant;

fn fixtures() -> PathBuf {
    support::repo_root().join("tests/fixtures/control_plane")
}

fn widgets(namespace: &str, client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(
        "fixtures.crossplane-provider-proxmox.test",
        "v1alpha1",
        "Widget",
    );
    Api::namespaced_with(
        client,
        namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    )
}

fn widget(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "fixtures.crossplane-provider-proxmox.test/v1alpha1",
        "kind": "Widget",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .unwrap()
}

async fn install_fixture_crds() {
    let crds = support::install_crds(fixtures().join("crds")).await;
    assert_eq!(crds.len(), 1);
    assert_eq!(
        crds[0].name_any(),
        "widgets.fixtures.crossplane-provider-proxmox.test"
    );
}

#[tokio::test]
async fn crd_is_served_with_defaults_and_a_separate_status_subresource() {
    install_fixture_crds().await;
    let ns = support::namespace("served").await;
    let api = widgets(ns.name(), support::client());

    let created = api
        .create(&PostParams::default(), &widget("w1", json!({ "size": 3 })))
        .await
        .unwrap();
    // The server applied the schema's default.
    assert_eq!(created.data["spec"]["color"], "red");

    let status = json!({ "status": { "phase": "Ready", "observedSize": 3 } });
    api.patch_status("w1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();

    // Through the main resource, status changes are ignored...
    let sneaky = json!({ "spec": { "size": 4 }, "status": { "phase": "Hacked" } });
    api.patch("w1", &PatchParams::default(), &Patch::Merge(&sneaky))
        .await
        .unwrap();
    // ...and through the status subresource, spec changes are.
    let sneaky = json!({ "spec": { "size": 9 }, "status": { "observedSize": 4 } });
    api.patch_status("w1", &PatchParams::default(), &Patch::Merge(&sneaky))
        .await
        .unwrap();

    let stored = api.get("w1").await.unwrap();
    assert_eq!(stored.data["status"]["phase"], "Ready");
    assert_eq!(stored.data["status"]["observedSize"], 4);
    assert_eq!(stored.data["spec"]["size"], 4);
}

/// The server's message for a Widget that must be rejected (server-side
/// dry run through kubectl; the JSON is valid YAML).
async fn rejection(namespace: &str, name: &str, spec: serde_json::Value) -> String {
    let manifest = serde_json::to_string(&widget(name, spec)).unwrap();
    support::apply_expect_rejected(manifest.as_str(), Some(namespace)).await
}

#[tokio::test]
async fn schema_violations_are_rejected_with_the_servers_message() {
    install_fixture_crds().await;
    let ns = support::namespace("schema").await;

    let message = rejection(ns.name(), "wrong-type", json!({ "size": "three" })).await;
    assert!(message.contains("spec.size"), "{message}");
    assert!(message.contains("must be of type integer"), "{message}");

    let spec = json!({ "size": 11, "color": "purple" });
    let message = rejection(ns.name(), "too-big", spec).await;
    assert!(
        message.contains("should be less than or equal to 10"),
        "{message}"
    );
    assert!(
        message.contains(r#"Unsupported value: "purple""#),
        "{message}"
    );
}

#[tokio::test]
async fn cel_rules_are_enforced_with_their_messages() {
    install_fixture_crds().await;
    let ns = support::namespace("cel").await;

    let spec = json!({ "size": 1, "minReplicas": 5, "maxReplicas": 2 });
    let message = rejection(ns.name(), "inverted", spec).await;
    assert!(
        message.contains("minReplicas must not exceed maxReplicas"),
        "{message}"
    );

    // A transition rule only bites on update.
    let api = widgets(ns.name(), support::client());
    let painted = widget("painted", json!({ "size": 1, "color": "green" }));
    api.create(&PostParams::default(), &painted).await.unwrap();
    let message = rejection(ns.name(), "painted", json!({ "size": 1, "color": "blue" })).await;
    assert!(message.contains("color is immutable"), "{message}");
}

#[tokio::test]
async fn a_valid_manifest_passes_server_dry_run_and_is_not_stored() {
    install_fixture_crds().await;
    let ns = support::namespace("dry-run").await;
    let file = fixtures().join("widget.yaml");
    let out = support::apply_dry_run_server(file.as_path(), Some(ns.name())).await;
    assert!(
        out.contains("widget.fixtures.crossplane-provider-proxmox.test/valid"),
        "{out}"
    );
    let err = widgets(ns.name(), support::client())
        .get("valid")
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
}

#[tokio::test]
async fn install_crds_and_apply_are_idempotent_under_concurrency() {
    let dir = fixtures().join("crds");
    let (a, b, c) = tokio::join!(
        support::install_crds(&dir),
        support::apply_path(&dir, None),
        support::apply_path(&dir, None),
    );
    assert_eq!(a.len(), 1);
    assert_eq!(
        b[0].metadata.uid, c[0].metadata.uid,
        "the same CRD, applied twice"
    );
}

#[tokio::test]
async fn a_service_account_gets_exactly_what_its_cluster_role_grants() {
    install_fixture_crds().await;
    support::apply_path(fixtures().join("rbac"), None).await;
    let home = support::namespace("rbac-home").await;
    let elsewhere = support::namespace("rbac-elsewhere").await;
    let admin = support::client();
    for ns in [&home, &elsewhere] {
        widgets(ns.name(), admin.clone())
            .create(
                &PostParams::default(),
                &widget("seen", json!({ "size": 2 })),
            )
            .await
            .unwrap();
    }

    let reader = support::service_account_kubeconfig(
        home.name(),
        "reader",
        Grant::ClusterRoleInNamespace("fixtures-widget-reader"),
    )
    .await;
    assert_eq!(
        reader.username,
        format!("system:serviceaccount:{home}:reader")
    );
    let client = reader.client();

    // Granted: reading widgets in its own namespace.
    let listed = widgets(home.name(), client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        listed
            .items
            .iter()
            .map(ResourceExt::name_any)
            .collect::<Vec<_>>(),
        ["seen"]
    );
    widgets(home.name(), client.clone())
        .get("seen")
        .await
        .unwrap();

    // Not granted: writing, other namespaces, other resources.
    let forbidden = |result: Result<_, kube::Error>| match result {
        Err(kube::Error::Api(status)) => status.code == 403,
        _ => false,
    };
    let create = widgets(home.name(), client.clone())
        .create(
            &PostParams::default(),
            &widget("mine", json!({ "size": 1 })),
        )
        .await;
    assert!(
        forbidden(create.map(drop)),
        "creating a widget was not refused"
    );
    let other_ns = widgets(elsewhere.name(), client.clone())
        .list(&ListParams::default())
        .await;
    assert!(
        forbidden(other_ns.map(drop)),
        "listing widgets elsewhere was not refused"
    );
    let secrets = Api::<Secret>::namespaced(client.clone(), home.name())
        .list(&ListParams::default())
        .await;
    assert!(
        forbidden(secrets.map(drop)),
        "listing secrets was not refused"
    );

    // The kubeconfig file works for other programs, with the same answers.
    let can = |verb: &'static str| {
        let kubeconfig = reader.kubeconfig.clone();
        let ns = home.name().to_owned();
        async move {
            support::kubectl_as(
                &kubeconfig,
                &[
                    "auth",
                    "can-i",
                    verb,
                    "widgets.fixtures.crossplane-provider-proxmox.test",
                    "-n",
                    &ns,
                ],
            )
            .await
            .stdout
            .trim()
            .to_owned()
        }
    };
    assert_eq!(can("list").await, "yes");
    assert_eq!(can("delete").await, "no");
}

#[tokio::test]
async fn each_test_gets_its_own_namespace() {
    let first = support::namespace("same-prefix").await;
    let second = support::namespace("same-prefix").await;
    assert_ne!(first.name(), second.name());
    let namespaces = Api::<Namespace>::all(support::client());
    for ns in [&first, &second] {
        let stored = namespaces.get(ns.name()).await.unwrap();
        assert_eq!(
            stored
                .labels()
                .get(support::NAMESPACE_LABEL)
                .map(String::as_str),
            Some("true")
        );
    }
}

#[tokio::test]
async fn the_admin_is_who_the_kubeconfig_says() {
    let review = Api::<SelfSubjectReview>::all(support::client())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review
        .status
        .and_then(|s| s.user_info)
        .expect("the review names the user");
    if support::cluster().is_testenv() {
        // testenv's client certificate: CN=default, O=system:masters.
        assert_eq!(user.username.as_deref(), Some(testenv::ADMIN_USER));
        assert!(
            user.groups
                .unwrap_or_default()
                .iter()
                .any(|g| g == testenv::ADMIN_GROUP)
        );
    } else {
        assert!(user.username.is_some_and(|u| !u.is_empty()));
    }
}

#[tokio::test]
async fn kubectl_is_within_one_minor_version_of_the_server() {
    let out = support::kubectl_ok(&["version", "-o", "json"]).await;
    let versions: serde_json::Value = serde_json::from_str(&out).unwrap();
    let minor = |side: &str| -> i64 {
        let text = versions[side]["minor"]
            .as_str()
            .unwrap_or_else(|| panic!("no {side}.minor in {out}"));
        text.trim_end_matches('+').parse().unwrap()
    };
    let skew = (minor("clientVersion") - minor("serverVersion")).abs();
    if support::cluster().is_testenv() {
        assert_eq!(
            skew, 0,
            "testenv's kubectl is built from the apiserver's module: {out}"
        );
    } else {
        assert!(
            skew <= 1,
            "kubectl is outside the supported version skew: {out}"
        );
    }
}
