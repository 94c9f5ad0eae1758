//! The provider's RBAC in `deploy/` is least privilege and fits inside what
//! Crossplane grants a provider package, checked with the API server's own
//! authorizer: a ServiceAccount bound to copies of the ClusterRole and Role
//! may do exactly what the controller's contract lists and nothing nearby;
//! a ServiceAccount bound to the ClusterRole Crossplane's RBAC manager
//! renders for this package may do all of it too.
//!
//! (That these permissions are also *sufficient* is proven by running the
//! provider end to end under them, in the controller's tests.)

use std::collections::BTreeSet;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::support;
use crate::tools::{find, kustomize, repo, yaml_docs};

const GROUP: &str = "proxmox.m.crossplane.io";

/// One request: API group, resource (`plural` or `plural/subresource`),
/// verb, whether it is in the provider's own namespace, and a name.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Request {
    group: &'static str,
    resource: &'static str,
    verb: &'static str,
    own_namespace: bool,
    name: Option<&'static str>,
}

const fn req(group: &'static str, resource: &'static str, verb: &'static str) -> Request {
    Request {
        group,
        resource,
        verb,
        own_namespace: false,
        name: None,
    }
}

const fn lease(verb: &'static str, name: Option<&'static str>) -> Request {
    Request {
        group: "coordination.k8s.io",
        resource: "leases",
        verb,
        own_namespace: true,
        name,
    }
}

/// The controller's contract: everything it does to the API server (what
/// the apiserver's audit log shows it doing: tests/controller/rbac.rs).
const NEEDED: &[Request] = &[
    // Every managed kind: `get` reads one afresh while its watch lags the
    // provider's own last write of it (read-your-writes, managed::fresh).
    req(GROUP, "proxmoxvms", "get"),
    req(GROUP, "proxmoxvms", "list"),
    req(GROUP, "proxmoxvms", "watch"),
    req(GROUP, "proxmoxvms", "patch"),
    req(GROUP, "proxmoxvms/status", "patch"),
    // The template ProxmoxVMs of ProxmoxImages with `template` (fleets):
    // created once, deleted when no clone needs them.
    req(GROUP, "proxmoxvms", "create"),
    req(GROUP, "proxmoxvms", "delete"),
    // ProxmoxImages: watched, read afresh before an import, finalized, and
    // their status written by the image and fleet controllers.
    req(GROUP, "proxmoximages", "get"),
    req(GROUP, "proxmoximages", "list"),
    req(GROUP, "proxmoximages", "watch"),
    req(GROUP, "proxmoximages", "patch"),
    req(GROUP, "proxmoximages/status", "patch"),
    req(GROUP, "proxmoxcontainers", "get"),
    req(GROUP, "proxmoxcontainers", "list"),
    req(GROUP, "proxmoxcontainers", "watch"),
    req(GROUP, "proxmoxcontainers", "patch"),
    req(GROUP, "proxmoxcontainers/status", "patch"),
    // ProxmoxPools: watched, finalized, their status written.
    req(GROUP, "proxmoxpools", "get"),
    req(GROUP, "proxmoxpools", "list"),
    req(GROUP, "proxmoxpools", "watch"),
    req(GROUP, "proxmoxpools", "patch"),
    req(GROUP, "proxmoxpools/status", "patch"),
    req(GROUP, "proxmoxsecuritygroups", "get"),
    req(GROUP, "proxmoxsecuritygroups", "list"),
    req(GROUP, "proxmoxsecuritygroups", "watch"),
    req(GROUP, "proxmoxsecuritygroups", "patch"),
    req(GROUP, "proxmoxsecuritygroups/status", "patch"),
    req(GROUP, "proxmoxipsets", "get"),
    req(GROUP, "proxmoxipsets", "list"),
    req(GROUP, "proxmoxipsets", "watch"),
    req(GROUP, "proxmoxipsets", "patch"),
    req(GROUP, "proxmoxipsets/status", "patch"),
    req(GROUP, "proxmoxsdnzones", "get"),
    req(GROUP, "proxmoxsdnzones", "list"),
    req(GROUP, "proxmoxsdnzones", "watch"),
    req(GROUP, "proxmoxsdnzones", "patch"),
    req(GROUP, "proxmoxsdnzones/status", "patch"),
    req(GROUP, "proxmoxvnets", "get"),
    req(GROUP, "proxmoxvnets", "list"),
    req(GROUP, "proxmoxvnets", "watch"),
    req(GROUP, "proxmoxvnets", "patch"),
    req(GROUP, "proxmoxvnets/status", "patch"),
    req(GROUP, "proxmoxbackupjobs", "get"),
    req(GROUP, "proxmoxbackupjobs", "list"),
    req(GROUP, "proxmoxbackupjobs", "watch"),
    req(GROUP, "proxmoxbackupjobs", "patch"),
    req(GROUP, "proxmoxbackupjobs/status", "patch"),
    req(GROUP, "proxmoxsnapshots", "get"),
    req(GROUP, "proxmoxsnapshots", "list"),
    req(GROUP, "proxmoxsnapshots", "watch"),
    req(GROUP, "proxmoxsnapshots", "patch"),
    req(GROUP, "proxmoxsnapshots/status", "patch"),
    req(GROUP, "proxmoxbackups", "get"),
    req(GROUP, "proxmoxbackups", "list"),
    req(GROUP, "proxmoxbackups", "watch"),
    req(GROUP, "proxmoxbackups", "patch"),
    req(GROUP, "proxmoxbackups/status", "patch"),
    req(GROUP, "providerconfigs", "get"),
    req(GROUP, "providerconfigs", "list"),
    req(GROUP, "providerconfigs", "watch"),
    req(GROUP, "clusterproviderconfigs", "get"),
    req(GROUP, "clusterproviderconfigs", "list"),
    req(GROUP, "clusterproviderconfigs", "watch"),
    // The in-use finalizer.
    req(GROUP, "providerconfigs", "patch"),
    req(GROUP, "clusterproviderconfigs", "patch"),
    req(GROUP, "providerconfigs/status", "patch"),
    req(GROUP, "clusterproviderconfigs/status", "patch"),
    req("", "secrets", "get"),
    req("", "secrets", "list"),
    req("", "secrets", "watch"),
    req("", "secrets", "create"),
    req("", "secrets", "patch"),
    // customCloudInit data, and the watch that wakes its readers.
    req("", "configmaps", "get"),
    req("", "configmaps", "list"),
    req("", "configmaps", "watch"),
    req("", "events", "create"),
    req("", "events", "patch"),
    // One Lease per provider config and one per replica, in the
    // provider's namespace, named after what they hold: no fixed names
    // (runtime/shards). Written by conditional update, never patched.
    lease("create", None),
    lease("get", None),
    lease("list", None),
    lease("update", None),
    lease("delete", None),
];

/// Nearby permissions the provider must not have.
const NOT_NEEDED: &[Request] = &[
    req(GROUP, "proxmoxvms", "update"),
    req(GROUP, "proxmoxvms/status", "update"),
    req(GROUP, "proxmoxvms/finalizers", "update"),
    req(GROUP, "proxmoxvms", "deletecollection"),
    req(GROUP, "proxmoxcontainers", "create"),
    req(GROUP, "proxmoxcontainers", "update"),
    req(GROUP, "proxmoxcontainers", "delete"),
    req(GROUP, "proxmoxcontainers/status", "update"),
    req(GROUP, "proxmoxpools", "create"),
    req(GROUP, "proxmoxpools", "update"),
    req(GROUP, "proxmoxpools", "delete"),
    req(GROUP, "proxmoxpools/status", "update"),
    req(GROUP, "proxmoxsecuritygroups", "create"),
    req(GROUP, "proxmoxsecuritygroups", "delete"),
    req(GROUP, "proxmoxipsets", "create"),
    req(GROUP, "proxmoxipsets", "delete"),
    req(GROUP, "proxmoxsdnzones", "create"),
    req(GROUP, "proxmoxsdnzones", "delete"),
    req(GROUP, "proxmoxvnets", "create"),
    req(GROUP, "proxmoxvnets", "delete"),
    req(GROUP, "proxmoxbackupjobs", "create"),
    req(GROUP, "proxmoxbackupjobs", "delete"),
    req(GROUP, "proxmoxsnapshots", "create"),
    req(GROUP, "proxmoxsnapshots", "delete"),
    req(GROUP, "proxmoxbackups", "create"),
    req(GROUP, "proxmoxbackups", "delete"),
    req(GROUP, "proxmoximages", "create"),
    req(GROUP, "proxmoximages", "update"),
    req(GROUP, "proxmoximages", "delete"),
    req(GROUP, "proxmoximages/status", "update"),
    req(GROUP, "providerconfigs", "update"),
    req(GROUP, "providerconfigs", "create"),
    req(GROUP, "clusterproviderconfigs", "update"),
    req(GROUP, "clusterproviderconfigs", "delete"),
    req(GROUP, "providerconfigs/finalizers", "update"),
    req("", "secrets", "update"),
    req("", "secrets", "delete"),
    req("", "configmaps", "create"),
    req("", "configmaps", "update"),
    req("", "configmaps", "patch"),
    req("", "configmaps", "delete"),
    req("", "pods", "list"),
    req("", "events", "delete"),
    req("events.k8s.io", "events", "create"),
    // Leases in other namespaces.
    req("coordination.k8s.io", "leases", "get"),
    req("coordination.k8s.io", "leases", "update"),
    lease("patch", None),
    lease("deletecollection", None),
    req("rbac.authorization.k8s.io", "clusterroles", "escalate"),
    req(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "update",
    ),
];

/// Asks the API server whether the client's user may make `request`.
async fn allowed(client: &Client, namespace: &str, request: &Request) -> bool {
    let (resource, subresource) = match request.resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (request.resource, None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(request.group.into()),
                resource: Some(resource.into()),
                subresource,
                verb: Some(request.verb.into()),
                // Cluster-wide requests are checked in some other namespace:
                // the provider works on ProxmoxVMs in every namespace.
                namespace: Some(if request.own_namespace {
                    namespace.into()
                } else {
                    "tenant-a".into()
                }),
                name: request.name.map(Into::into),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

fn rendered_roles(docs: &[Value]) -> (ClusterRole, Role) {
    let cluster_role: ClusterRole =
        serde_json::from_value(find(docs, "ClusterRole", "crossplane-provider-proxmox").clone())
            .unwrap();
    let role: Role = serde_json::from_value(
        find(docs, "Role", "crossplane-provider-proxmox-leader-election").clone(),
    )
    .unwrap();
    (cluster_role, role)
}

#[tokio::test]
async fn rules_are_the_contract_exactly() {
    let rendered = kustomize("deploy").await;
    let (cluster_role, role) = rendered_roles(&yaml_docs(&rendered, "deploy/"));
    let mut granted = support::granted(&cluster_role.rules.unwrap());
    granted.extend(support::granted(&role.rules.unwrap()));
    let contract: BTreeSet<_> = NEEDED
        .iter()
        .map(|r| {
            (
                r.group.to_owned(),
                r.resource.to_owned(),
                r.verb.to_owned(),
                r.name.unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        granted, contract,
        "deploy/provider/rbac.yaml grants exactly the controller's contract (no wildcards, nothing extra)"
    );
}

/// Server-side applies `object` as the admin.
async fn apply<K>(api: &Api<K>, name: &str, object: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply("deploy-rbac-test").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {name}: {e}"));
}

#[tokio::test]
async fn authorizer_allows_what_is_needed_and_nothing_nearby() {
    support::install_crds(repo().join("crds")).await;
    let ns = support::namespace("rbac").await;
    let admin = support::client();
    let rendered = kustomize("deploy").await;
    let (mut cluster_role, mut role) = rendered_roles(&yaml_docs(&rendered, "deploy/"));

    // Copies under names of this test: the rules are what is checked.
    let cluster_role_name = format!("{}-provider", ns.name());
    cluster_role.metadata = ObjectMeta {
        name: Some(cluster_role_name.clone()),
        ..ObjectMeta::default()
    };
    apply(
        &Api::<ClusterRole>::all(admin.clone()),
        &cluster_role_name,
        &cluster_role,
    )
    .await;
    role.metadata = ObjectMeta {
        name: Some("leader-election".into()),
        namespace: Some(ns.name().into()),
        ..ObjectMeta::default()
    };
    apply(
        &Api::<Role>::namespaced(admin.clone(), ns.name()),
        "leader-election",
        &role,
    )
    .await;

    let provider = support::service_account_kubeconfig(
        ns.name(),
        "provider",
        support::Grant::ClusterRole(&cluster_role_name),
    )
    .await;
    support::bind(
        ns.name(),
        "provider",
        support::Grant::Role("leader-election"),
    )
    .await;

    let client = provider.client();
    let mut wrong = vec![];
    for request in NEEDED {
        if !allowed(&client, ns.name(), request).await {
            wrong.push(format!("denied but needed: {request:?}"));
        }
    }
    for request in NOT_NEEDED {
        if allowed(&client, ns.name(), request).await {
            wrong.push(format!("allowed but not needed: {request:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The system ClusterRole Crossplane's RBAC manager renders for a provider
/// package with this package's CRDs (crossplane `internal/controller/rbac/
/// provider/roles`): the CRDs and their status with get, list, watch,
/// update, patch, create; finalizers with update; and `*` on core secrets,
/// configmaps, events and coordination leases. Not events.k8s.io.
fn crossplane_system_rules() -> Vec<PolicyRule> {
    // The package's CRDs: every kind's.
    let crds: Vec<String> = provider_proxmox::api::kinds::all()
        .into_iter()
        .map(|k| k.plural)
        .collect();
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|s| (*s).to_owned()).collect()),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        ..PolicyRule::default()
    };
    vec![
        rule(
            &[GROUP],
            &crds
                .iter()
                .flat_map(|plural| [plural.clone(), format!("{plural}/status")])
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            &["get", "list", "watch", "update", "patch", "create"],
        ),
        rule(&[GROUP], &["*/finalizers"], &["update"]),
        rule(
            &["", "coordination.k8s.io"],
            &["secrets", "configmaps", "events", "leases"],
            &["*"],
        ),
    ]
}

#[tokio::test]
async fn everything_needed_is_within_what_crossplane_grants() {
    support::install_crds(repo().join("crds")).await;
    let ns = support::namespace("rbac-crossplane").await;
    let name = format!("{}-crossplane-system", ns.name());
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        rules: Some(crossplane_system_rules()),
        ..ClusterRole::default()
    };
    apply(&Api::<ClusterRole>::all(support::client()), &name, &role).await;
    let account = support::service_account_kubeconfig(
        ns.name(),
        "crossplane-provider",
        support::Grant::ClusterRole(&name),
    )
    .await;
    let client = account.client();
    let mut denied = vec![];
    for request in NEEDED {
        if !allowed(&client, ns.name(), request).await {
            denied.push(request);
        }
    }
    // Crossplane's system role has no `delete` on the package's own kinds:
    // fleets need it for their template ProxmoxVMs, granted on top by the
    // admin (docs/install.md, "Crossplane"); nothing else may be missing.
    assert_eq!(
        denied,
        [&req(GROUP, "proxmoxvms", "delete")],
        "under Crossplane's RBAC the provider could not do these"
    );
    // Why events go to the core API group: this one is not granted.
    assert!(
        !allowed(
            &client,
            ns.name(),
            &req("events.k8s.io", "events", "create")
        )
        .await
    );
}
