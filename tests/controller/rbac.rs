//! The provider's RBAC is what its code does, no more and no less, proven
//! on the real API server: the provider runs a representative workload
//! under a ServiceAccount bound to exactly deploy/'s ClusterRole and Role,
//! and the apiserver's audit log (`support::Cluster::audit_log`: every
//! request of every ServiceAccount) lists each call it made. Every call is
//! granted by the rules of deploy/ (as `kubectl kustomize` renders them)
//! and of the Helm chart (as `helm template` does), and every grant of
//! those rules was used by some call.
//!
//! A permission the provider lacks is not only refused: it is reported on
//! the resource (Synced=False, reason `Forbidden`), see
//! `bad_input::reported`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Api;
use provider_proxmox::api::ClusterProviderConfig;
use provider_proxmox::reconcile::LeaderElection;
use provider_proxmox::reconcile::events::Events;
use provider_proxmox::reconcile::plan;
use provider_proxmox::reconcile::runtime::metrics::Metrics;
use serde_json::{Value, json};

use crate::reconcile::configs::{has_reason, wait_deleted, wait_protected};
use crate::reconcile::{Controller, DEADLINE, Env, Options, events_in, manifests};
use crate::support;

/// The ClusterRole and the leader-election Role (its rules) of rendered
/// manifests.
struct Rules {
    origin: &'static str,
    cluster_role: Value,
    role: Vec<PolicyRule>,
}

impl Rules {
    fn cluster(&self) -> Vec<PolicyRule> {
        serde_json::from_value(self.cluster_role["rules"].clone()).unwrap()
    }

    fn from_yaml(origin: &'static str, yaml: &str) -> Self {
        let docs: Vec<Value> = support::parse_manifests(yaml, origin)
            .into_iter()
            .map(|d| serde_json::to_value(d).unwrap())
            .collect();
        let find = |kind: &str, name: &str| {
            docs.iter()
                .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("no {kind} {name} in {origin}"))
                .clone()
        };
        let cluster_role = find("ClusterRole", "crossplane-provider-proxmox");
        let role = find("Role", "crossplane-provider-proxmox-leader-election");
        Self {
            origin,
            cluster_role,
            role: serde_json::from_value(role["rules"].clone()).unwrap(),
        }
    }
}

/// deploy/ as `kubectl apply -k deploy/` installs it.
async fn kustomize_rules() -> Rules {
    let rendered = support::kubectl_ok(&["kustomize", "deploy"]).await;
    Rules::from_yaml("kubectl kustomize deploy", &rendered)
}

/// The chart as `helm install` renders it with its defaults, for this
/// cluster's Kubernetes version.
async fn helm_rules() -> Rules {
    let version = support::client()
        .apiserver_version()
        .await
        .unwrap()
        .git_version;
    let repo = support::repo_root();
    let ensure = Command::new("bash")
        .arg(repo.join("hack/tools/ensure.sh"))
        .arg("helm")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let helm = String::from_utf8_lossy(&ensure.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert!(
        ensure.status.success() && Path::new(&helm).is_file(),
        "`bash hack/tools/ensure.sh helm` failed:\n{}",
        String::from_utf8_lossy(&ensure.stderr)
    );
    let out = Command::new(&helm)
        .args([
            "template",
            "crossplane-provider-proxmox",
            "deploy/helm/crossplane-provider-proxmox",
            "--namespace",
            "crossplane-system",
            "--kube-version",
            &version,
        ])
        .current_dir(repo)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Rules::from_yaml("helm template", &String::from_utf8(out.stdout).unwrap())
}

/// One request, as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Call {
    verb: String,
    group: String,
    /// `plural` or `plural/subresource`; for a non-resource request its
    /// path.
    resource: String,
    namespace: String,
    name: String,
}

impl Call {
    fn of(event: &Value) -> Self {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let object = &event["objectRef"];
        if object.is_null() {
            let uri = text(&event["requestURI"]);
            let path = uri.split('?').next().unwrap_or_default().to_owned();
            return Self {
                verb: text(&event["verb"]),
                group: "(non-resource)".into(),
                resource: path,
                namespace: String::new(),
                name: String::new(),
            };
        }
        let mut resource = text(&object["resource"]);
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        Self {
            verb: text(&event["verb"]),
            group: text(&object["apiGroup"]),
            resource,
            namespace: text(&object["namespace"]),
            name: text(&object["name"]),
        }
    }

    /// Whether `rule` allows it (no wildcards: the rules have none).
    fn allowed_by(&self, rule: &PolicyRule) -> bool {
        let has = |list: Option<&Vec<String>>, item: &str| {
            list.is_some_and(|l| l.iter().any(|x| x == item))
        };
        let names = rule.resource_names.as_deref().unwrap_or_default();
        has(rule.api_groups.as_ref(), &self.group)
            && has(rule.resources.as_ref(), &self.resource)
            && rule.verbs.contains(&self.verb)
            && (names.is_empty() || names.contains(&self.name))
    }
}

/// Discovery and version requests every authenticated user may make
/// (`system:discovery`, `system:public-info-viewer`): not the provider's
/// RBAC's to grant.
fn public(call: &Call) -> bool {
    call.group == "(non-resource)"
        && ["/api", "/apis", "/version", "/openapi"]
            .iter()
            .any(|p| call.resource == *p || call.resource.starts_with(&format!("{p}/")))
}

/// What `rules` (the ClusterRole's cluster-wide, the Role's in
/// `namespace`) do not allow of `calls`, and which of their grants no call
/// used.
fn compare(rules: &Rules, namespace: &str, calls: &BTreeSet<Call>) -> Vec<String> {
    let cluster = rules.cluster();
    let mut wrong = vec![];
    for call in calls.iter().filter(|c| !public(c)) {
        let by_cluster = cluster.iter().any(|r| call.allowed_by(r));
        let by_role = call.namespace == namespace && rules.role.iter().any(|r| call.allowed_by(r));
        if !by_cluster && !by_role {
            wrong.push(format!("{}: not granted: {call:?}", rules.origin));
        }
    }
    for (rules_of, which) in [(&cluster, "ClusterRole"), (&rules.role, "Role")] {
        for (group, resource, verb, name) in support::granted(rules_of) {
            let used = calls.iter().any(|c| {
                c.group == group
                    && c.resource == resource
                    && c.verb == verb
                    && (name.is_empty() || c.name == name)
                    && (which == "ClusterRole" || c.namespace == namespace)
            });
            if !used {
                wrong.push(format!(
                    "{}: the {which} grants {verb} on {group:?} {resource} {name} but the provider never asked for it",
                    rules.origin
                ));
            }
        }
    }
    wrong
}

/// The requests of `username` in the audit log.
fn calls_of(log: &Path, username: &str) -> BTreeSet<Call> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["user"]["username"] == username)
        .map(|event| Call::of(&event))
        .collect()
}

/// Every grant of deploy/'s and the chart's RBAC is used and every call is
/// granted, on a workload that touches each kind of object the provider
/// works with: a ClusterProviderConfig (its credentials in another
/// namespace's Secret) and a ProviderConfig, their status and in-use
/// finalizer, a VM with a connection Secret, a cloud-init password Secret
/// and `customCloudInit` from a Secret and a ConfigMap, a change, events,
/// a deletion refused while in use, leader election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_rbac_is_exactly_what_the_provider_uses() {
    let Some(log) = support::cluster().audit_log.clone() else {
        eprintln!("no audit log (an existing cluster): skipped");
        return;
    };
    let env = Env::without_controller("rbac", Options::default()).await;
    let ns = env.ns.name();
    let deploy = kustomize_rules().await;
    let helm = helm_rules().await;
    let cluster_role_name = format!("{ns}-provider");
    let mut cluster_role = deploy.cluster_role.clone();
    cluster_role["metadata"] = json!({"name": cluster_role_name});
    env.apply(&cluster_role).await;
    env.apply(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "leader-election"}, "rules": deploy.role,
    }))
    .await;
    let account = support::service_account_kubeconfig(
        ns,
        "provider",
        support::Grant::ClusterRole(&cluster_role_name),
    )
    .await;
    support::bind(ns, "provider", support::Grant::Role("leader-election")).await;
    // A ClusterProviderConfig, reading its Secret from the test namespace.
    let cpc = format!("cluster-{ns}");
    let mut config = manifests::provider_config(&env.sim, &json!({}));
    config["kind"] = json!("ClusterProviderConfig");
    config["metadata"]["name"] = json!(cpc);
    config["spec"]["credentials"]["secretRef"]["namespace"] = json!(ns);
    env.apply(&config).await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-password"},
        "stringData": {"password": "s3cret-pw"},
    }))
    .await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-seed"},
        "stringData": {"user-data": "#cloud-config\n"},
    }))
    .await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-net"},
        "data": {"network-config": "version: 2\n"},
    }))
    .await;

    let mut settings = env.settings();
    settings.leader_election = Some(LeaderElection::in_namespace(ns));
    let controller = Controller::start(account.client(), settings).await;
    let mut fp = manifests::imported(json!({
        "customCloudInit": {
            "userData": {"secretKeyRef": {"name": "web-seed", "key": "user-data"}},
            "networkConfig": {"configMapKeyRef": {"name": "web-net", "key": "network-config"}},
        },
    }));
    fp.as_object_mut().unwrap().remove("cloudInit");
    let mut web = manifests::vm("web", fp);
    web["spec"]["providerConfigRef"] = json!({"kind": "ClusterProviderConfig", "name": cpc});
    web["spec"]["writeConnectionSecretToRef"] = json!({"name": "web-conn"});
    env.apply(&web).await;
    let mut db = manifests::vm(
        "db",
        manifests::imported(json!({
            "cloudInit": {
                "user": "ubuntu",
                "passwordSecretRef": {"name": "db-password", "key": "password"},
                "ipConfigs": [{"interface": "net0", "ip": "dhcp"}],
            },
        })),
    );
    db["spec"]["writeConnectionSecretToRef"] = json!({"name": "db-conn"});
    env.apply(&db).await;
    // Configs not in the watch cache (they do not exist) are read directly.
    let mut lost = manifests::vm("lost", json!({"node": "pve", "memory": "1Gi"}));
    lost["spec"]["providerConfigRef"] = json!({"kind": "ProviderConfig", "name": "missing"});
    env.apply(&lost).await;
    let mut lost_cluster = manifests::vm("lost-cluster", json!({"node": "pve", "memory": "1Gi"}));
    lost_cluster["spec"]["providerConfigRef"] =
        json!({"kind": "ClusterProviderConfig", "name": format!("missing-{ns}")});
    env.apply(&lost_cluster).await;
    env.wait_ready("web").await;
    env.wait_ready("db").await;
    env.wait_synced_reason("lost", "ProviderConfigNotFound")
        .await;
    env.wait_synced_reason("lost-cluster", "ProviderConfigNotFound")
        .await;
    // A repeated event patches the count of the first, through the
    // provider's own publisher (a short workload repeats none by itself).
    let events = Events::new(
        account.client(),
        "rbac-test".into(),
        Arc::new(Metrics::default()),
    );
    let again = plan::Event {
        warning: false,
        reason: "Checked",
        note: "the same event twice".into(),
    };
    let lost_vm = env.vm("lost").await;
    events.publish(&lost_vm, &again).await;
    events.publish(&lost_vm, &again).await;
    env.patch_vm("db", json!({"spec": {"forProvider": {"memory": "3Gi"}}}))
        .await;
    let db_vmid = env.vmid("db").await;
    support::poll("the new memory applied", DEADLINE, || async {
        match env.sim.config(db_vmid).await.memory {
            Some(3072) => Ok(()),
            other => Err(format!("memory {other:?}")),
        }
    })
    .await;
    env.wait_cluster_config(&cpc, "Ready with 1 user", |s| {
        has_reason(s, "Available") && s.users == Some(1)
    })
    .await;
    env.wait_config("pve", "Ready with 1 user", |s| {
        has_reason(s, "Available") && s.users == Some(1)
    })
    .await;
    // The ClusterProviderConfig in use cannot be deleted: it keeps its
    // finalizer and warns (in `default`) until its VM is gone.
    let cpcs: Api<ClusterProviderConfig> = Api::all(support::client());
    wait_protected(&cpcs, &cpc).await;
    cpcs.delete(&cpc, &Default::default()).await.unwrap();
    env.wait_cluster_config(&cpc, "Deleting", |s| has_reason(s, "Deleting"))
        .await;
    support::poll("the InUse warning", DEADLINE, || async {
        let warnings = events_in("default", &cpc).await;
        warnings
            .iter()
            .any(|(t, reason, _, _)| t == "Warning" && reason == "InUse")
            .then_some(())
            .ok_or_else(|| format!("{warnings:?}"))
    })
    .await;
    for name in ["web", "db", "lost", "lost-cluster"] {
        env.vms().delete(name, &Default::default()).await.unwrap();
    }
    env.wait_gone("web").await;
    env.wait_gone("db").await;
    env.wait_gone("lost").await;
    env.wait_gone("lost-cluster").await;
    wait_deleted(&cpcs, &cpc).await;
    let metrics = controller.metrics.encode();
    controller.stop().await;

    let calls = calls_of(&log, &account.username);
    let listed: Vec<String> = calls
        .iter()
        .map(|c| {
            format!(
                "{} {:?} {} {} {}",
                c.verb, c.group, c.resource, c.namespace, c.name
            )
        })
        .collect();
    let mut wrong = compare(&deploy, ns, &calls);
    wrong.extend(compare(&helm, ns, &calls));
    assert!(
        wrong.is_empty(),
        "{}\n\nthe provider's calls:\n{}",
        wrong.join("\n"),
        listed.join("\n")
    );
    assert!(
        !metrics.contains("kind=\"kube_api\""),
        "no refused request: {metrics}"
    );
    assert!(metrics.contains("proxmox_provider_event_publish_failures_total 0"));
}
