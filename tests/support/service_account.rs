//! Acting as a ServiceAccount bound only to a given role, to prove that
//! some RBAC is both sufficient and minimal.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};

use super::cluster::{client, scratch_dir};
use super::manifests::FIELD_MANAGER;
use super::wait::poll;

/// What the ServiceAccount is bound to.
#[derive(Debug, Clone, Copy)]
pub enum Grant<'a> {
    /// A ClusterRole, cluster-wide (ClusterRoleBinding).
    ClusterRole(&'a str),
    /// A ClusterRole, only in the ServiceAccount's namespace (RoleBinding).
    ClusterRoleInNamespace(&'a str),
    /// A Role of the ServiceAccount's namespace (RoleBinding).
    Role(&'a str),
}

/// A ServiceAccount's credentials: a kubeconfig file (for running a binary
/// such as the provider under it) and the same as a kube-rs configuration.
pub struct ServiceAccountAccess {
    /// `system:serviceaccount:<ns>:<name>`
    pub username: String,
    pub kubeconfig: PathBuf,
    pub config: kube::Config,
}

impl ServiceAccountAccess {
    /// A fresh client for the current test's runtime.
    pub fn client(&self) -> Client {
        Client::try_from(self.config.clone()).expect("configuration loaded from our own kubeconfig")
    }
}

/// Creates ServiceAccount `name` in `namespace`, binds it as `grant` says
/// (see [`bind`]; more grants may follow), obtains a one-hour token through
/// the TokenRequest API and writes a kubeconfig for it. Returns once the
/// apiserver's authorizer has seen the binding.
pub async fn service_account_kubeconfig(
    namespace: &str,
    name: &str,
    grant: Grant<'_>,
) -> ServiceAccountAccess {
    let admin = client();
    let ssa = PatchParams::apply(FIELD_MANAGER).force();
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), namespace);
    accounts
        .patch(name, &ssa, &Patch::Apply(&account))
        .await
        .unwrap_or_else(|e| panic!("creating ServiceAccount {namespace}/{name}: {e}"));

    bind(namespace, name, grant).await;

    let username = username(namespace, name);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let issued: TokenRequest = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("requesting a token for {username}: {e}"));
    let token = issued.status.map(|s| s.token).unwrap_or_default();
    assert!(
        !token.is_empty(),
        "the TokenRequest for {username} returned no token"
    );

    let kubeconfig = scratch_dir().join(format!("{namespace}-{name}.kubeconfig"));
    let contents = derived_kubeconfig(
        AuthInfo {
            token: Some(token.into()),
            ..AuthInfo::default()
        },
        &username,
    );
    testenv::kubeconfig::write(&kubeconfig, &contents)
        .unwrap_or_else(|e| panic!("writing the kubeconfig of {username}: {e}"));
    let config = kube::Config::from_custom_kubeconfig(contents, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("loading the kubeconfig of {username}: {e}"));
    ServiceAccountAccess {
        username,
        kubeconfig,
        config,
    }
}

/// `system:serviceaccount:<ns>:<name>`
fn username(namespace: &str, account: &str) -> String {
    format!("system:serviceaccount:{namespace}:{account}")
}

/// Binds ServiceAccount `account` of `namespace` as `grant` says (binding
/// named `<namespace>-<account>-<role>`, so an account may hold several
/// grants) and returns once the apiserver's authorizer has seen it.
pub async fn bind(namespace: &str, account: &str, grant: Grant<'_>) {
    let admin = client();
    let ssa = PatchParams::apply(FIELD_MANAGER).force();
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: account.into(),
        namespace: Some(namespace.into()),
        ..Subject::default()
    };
    let (Grant::ClusterRole(role) | Grant::ClusterRoleInNamespace(role) | Grant::Role(role)) =
        grant;
    let binding_name = format!("{namespace}-{account}-{role}");
    let rules = match grant {
        Grant::ClusterRole(_) => {
            let binding = ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(binding_name.clone()),
                    ..ObjectMeta::default()
                },
                role_ref: role_ref("ClusterRole", role),
                subjects: Some(vec![subject]),
            };
            Api::<ClusterRoleBinding>::all(admin.clone())
                .patch(&binding_name, &ssa, &Patch::Apply(&binding))
                .await
                .unwrap_or_else(|e| panic!("binding ClusterRole {role}: {e}"));
            cluster_role_rules(&admin, role).await
        }
        Grant::ClusterRoleInNamespace(_) | Grant::Role(_) => {
            let (kind, rules) = match grant {
                Grant::Role(_) => ("Role", role_rules(&admin, namespace, role).await),
                _ => ("ClusterRole", cluster_role_rules(&admin, role).await),
            };
            let binding = RoleBinding {
                metadata: ObjectMeta {
                    name: Some(binding_name.clone()),
                    namespace: Some(namespace.into()),
                    ..ObjectMeta::default()
                },
                role_ref: role_ref(kind, role),
                subjects: Some(vec![subject]),
            };
            Api::<RoleBinding>::namespaced(admin.clone(), namespace)
                .patch(&binding_name, &ssa, &Patch::Apply(&binding))
                .await
                .unwrap_or_else(|e| panic!("binding {kind} {role} in {namespace}: {e}"));
            rules
        }
    };
    wait_for_authorizer(&admin, &username(namespace, account), namespace, &rules).await;
}

/// The admin kubeconfig's current cluster with a different user.
fn derived_kubeconfig(auth_info: AuthInfo, user: &str) -> Kubeconfig {
    let admin_path = &super::cluster::cluster().kubeconfig;
    let admin = Kubeconfig::read_from(admin_path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", admin_path.display()));
    let context_name = admin
        .current_context
        .clone()
        .expect("the admin kubeconfig has a current context");
    let cluster_name = admin
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .expect("the current context exists");
    let cluster = admin
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .expect("the current context's cluster exists");
    testenv::kubeconfig::single(cluster, user, auth_info)
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    }
}

async fn cluster_role_rules(admin: &Client, name: &str) -> Vec<PolicyRule> {
    let role = Api::<ClusterRole>::all(admin.clone())
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("ClusterRole {name} must exist before binding it: {e}"));
    role.rules.unwrap_or_default()
}

async fn role_rules(admin: &Client, namespace: &str, name: &str) -> Vec<PolicyRule> {
    let role = Api::<Role>::namespaced(admin.clone(), namespace)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("Role {namespace}/{name} must exist before binding it: {e}"));
    role.rules.unwrap_or_default()
}

/// RBAC decisions come from an informer cache, so a fresh binding takes a
/// moment to count. Asks (as admin) whether the account may do what the
/// first rule allows, until the answer is yes.
async fn wait_for_authorizer(
    admin: &Client,
    username: &str,
    namespace: &str,
    rules: &[PolicyRule],
) {
    let Some(rule) = rules.first() else { return };
    let first = |items: &Option<Vec<String>>| items.as_ref().and_then(|v| v.first().cloned());
    let verb = rule.verbs.first().cloned().unwrap_or_else(|| "get".into());
    // Rules name subresources as `widgets/status`; reviews split them.
    let (resource, subresource) = match first(&rule.resources) {
        Some(r) => match r.split_once('/') {
            Some((resource, sub)) => (Some(resource.to_owned()), Some(sub.to_owned())),
            None => (Some(r), None),
        },
        None => (None, None),
    };
    let spec = match first(&rule.non_resource_urls) {
        Some(path) => SubjectAccessReviewSpec {
            user: Some(username.into()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path),
                verb: Some(verb),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        None => SubjectAccessReviewSpec {
            user: Some(username.into()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                group: first(&rule.api_groups),
                resource: resource.clone(),
                subresource: subresource.clone(),
                name: first(&rule.resource_names),
                verb: Some(verb),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
    };
    let reviews = Api::<SubjectAccessReview>::all(admin.clone());
    let review = SubjectAccessReview {
        spec,
        ..SubjectAccessReview::default()
    };
    poll(
        &format!("RBAC to authorize {username}"),
        Duration::from_secs(30),
        || async {
            let answer = reviews
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| format!("SubjectAccessReview: {e}"))?;
            match answer.status {
                Some(status) if status.allowed => Ok(()),
                other => Err(format!("not yet allowed: {other:?}")),
            }
        },
    )
    .await;
}

/// (API group, resource, verb, resourceName or `""`) of every rule,
/// flattened: what RBAC rules grant, item by item.
pub fn granted(
    rules: &[PolicyRule],
) -> std::collections::BTreeSet<(String, String, String, String)> {
    let mut out = std::collections::BTreeSet::new();
    for rule in rules {
        let names = rule
            .resource_names
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| vec![String::new()]);
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    for name in &names {
                        out.insert((group.clone(), resource.clone(), verb.clone(), name.clone()));
                    }
                }
            }
        }
    }
    out
}
