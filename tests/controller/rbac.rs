//! The provider's RBAC is what its code does, no more and no less, proven
//! on the real API server: the provider runs a representative workload
//! under a ServiceAccount bound to exactly deploy/'s ClusterRole and Role,
//! and the apiserver's audit log (`support::Cluster::audit_log`: every
//! request of every ServiceAccount) lists each call it made. Every call is
//! granted by the rules of deploy/ (as `kubectl kustomize` renders them)
//! and of the Helm chart (as `helm template` does), and every grant of
//! those rules was used by some call. The same holds for the namespaced
//! mode (`--watch-namespace`) under deploy/namespaced/'s and the chart's
//! `watchNamespace` Roles, which grant nothing outside the namespace.
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
use kube::api::{Patch, PatchParams};
use provider_proxmox::api::{ClusterProviderConfig, ProxmoxImage};
use provider_proxmox::reconcile::LeaderElection;
use provider_proxmox::reconcile::events::Events;
use provider_proxmox::reconcile::runtime::metrics::Metrics;
use provider_proxmox::reconcile::vm::plan;
use serde_json::{Value, json};

use crate::reconcile::configs::{has_reason, wait_deleted, wait_protected};
use crate::reconcile::{Controller, DEADLINE, Env, Options, containers, manifests, wait_event_in};
use crate::support;

/// One role of rendered manifests: a ClusterRole's rules hold anywhere, a
/// Role's in its namespace (in these tests, the test's).
struct Role {
    kind: String,
    name: String,
    rules: Vec<PolicyRule>,
}

impl Role {
    fn cluster_wide(&self) -> bool {
        self.kind == "ClusterRole"
    }
}

/// The roles of rendered manifests: every ClusterRole and Role.
struct Rules {
    origin: &'static str,
    roles: Vec<Role>,
}

impl Rules {
    fn from_yaml(origin: &'static str, yaml: &str) -> Self {
        let roles = support::parse_manifests(yaml, origin)
            .into_iter()
            .map(|d| serde_json::to_value(d).unwrap())
            .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
            .map(|d| Role {
                kind: d["kind"].as_str().unwrap().to_owned(),
                name: d["metadata"]["name"].as_str().unwrap().to_owned(),
                rules: serde_json::from_value(d["rules"].clone()).unwrap(),
            })
            .collect();
        Self { origin, roles }
    }

    /// Copies of the roles for the test's namespace `ns` (a ClusterRole
    /// under a name of the test, a Role in `ns`), bound to its
    /// ServiceAccount `provider`, as whom the provider then runs.
    async fn grant(&self, env: &Env) -> support::ServiceAccountAccess {
        let ns = env.ns.name();
        let mut account = None;
        for role in &self.roles {
            let name = if role.cluster_wide() {
                format!("{ns}-{}", role.name)
            } else {
                role.name.clone()
            };
            env.apply(&json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": role.kind,
                "metadata": {"name": name}, "rules": role.rules,
            }))
            .await;
            let grant = if role.cluster_wide() {
                support::Grant::ClusterRole(&name)
            } else {
                support::Grant::Role(&name)
            };
            match account {
                None => {
                    account =
                        Some(support::service_account_kubeconfig(ns, "provider", grant).await);
                }
                Some(_) => support::bind(ns, "provider", grant).await,
            }
        }
        account.expect("some role")
    }
}

/// `kubectl kustomize dir`, as `kubectl apply -k` installs it.
async fn kustomize_rules(dir: &'static str) -> Rules {
    let rendered = support::kubectl_ok(&["kustomize", dir]).await;
    Rules::from_yaml(dir, &rendered)
}

/// The chart as `helm install` renders it with its defaults and `set`, for
/// this cluster's Kubernetes version.
async fn helm_rules(set: &[&str]) -> Rules {
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
        .args(set.iter().flat_map(|s| ["--set", s]))
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

/// What `rules` (a ClusterRole's cluster-wide, a Role's in `namespace`) do
/// not allow of `calls`, and which of their grants no call used.
fn compare(rules: &Rules, namespace: &str, calls: &BTreeSet<Call>) -> Vec<String> {
    let mut wrong = vec![];
    let applies = |role: &Role, call: &Call| role.cluster_wide() || call.namespace == namespace;
    for call in calls.iter().filter(|c| !public(c)) {
        let granted = rules
            .roles
            .iter()
            .any(|role| applies(role, call) && role.rules.iter().any(|r| call.allowed_by(r)));
        if !granted {
            wrong.push(format!("{}: not granted: {call:?}", rules.origin));
        }
    }
    for role in &rules.roles {
        for (group, resource, verb, name) in support::granted(&role.rules) {
            let used = calls.iter().any(|c| {
                c.group == group
                    && c.resource == resource
                    && c.verb == verb
                    && (name.is_empty() || c.name == name)
                    && applies(role, c)
            });
            if !used && !read_your_writes(&group, &resource, &verb) {
                wrong.push(format!(
                    "{}: the {} {} grants {verb} on {group:?} {resource} {name} but the provider never asked for it",
                    rules.origin, role.kind, role.name
                ));
            }
        }
    }
    wrong
}

/// A grant the provider uses only when a watch lags its own last write of
/// a managed resource (read-your-writes, `managed::fresh`): then it reads
/// the resource afresh. Whether a run meets that lag is the watch's timing,
/// so such a grant must allow every such read but need not be used in
/// each run.
fn read_your_writes(group: &str, resource: &str, verb: &str) -> bool {
    group == "proxmox.m.crossplane.io" && verb == "get" && !resource.contains('/')
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

/// The control plane's audit log, which these tests read; `None` (the test
/// skips, saying so) on an existing cluster.
fn audit_log() -> Option<std::path::PathBuf> {
    let log = support::cluster().audit_log.clone();
    if log.is_none() {
        eprintln!("no audit log (an existing cluster): skipped");
    }
    log
}

/// The Secrets and the ConfigMap the workload's VMs read.
async fn inputs(env: &Env) {
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
}

/// The VMs of the workload, each through create, Ready and delete: `web`
/// (`customCloudInit` from a Secret and a ConfigMap, a connection Secret)
/// using the config `web_config`, `db` (a cloud-init password Secret, a
/// connection Secret, a change) using the test's ProviderConfig, and
/// `lost`, whose ProviderConfig does not exist (read directly, not from
/// the watch cache).
async fn vms(env: &Env, web_config: Value) {
    let mut fp = manifests::imported(json!({
        "customCloudInit": {
            "userData": {"secretKeyRef": {"name": "web-seed", "key": "user-data"}},
            "networkConfig": {"configMapKeyRef": {"name": "web-net", "key": "network-config"}},
        },
    }));
    fp.as_object_mut().unwrap().remove("cloudInit");
    let mut web = manifests::vm("web", fp);
    web["spec"]["providerConfigRef"] = web_config;
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
    let mut lost = manifests::vm("lost", json!({"node": "pve", "memory": "1Gi"}));
    lost["spec"]["providerConfigRef"] = json!({"kind": "ProviderConfig", "name": "missing"});
    env.apply(&lost).await;
    // A ProxmoxImage: watched, finalized, its status patched.
    env.apply(&json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": "noble"},
        "spec": {
            "forProvider": {"source": {"importFrom": manifests::UBUNTU}, "content": "import"},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    }))
    .await;
    // A ProxmoxPool: watched, finalized, its status patched.
    env.apply(&crate::pools::pool("team", json!({"poolId": "team"})))
        .await;
    // A container, from the template the sim seeds: the container
    // controller's watch, metadata and status writes.
    env.apply(&containers::container("box", containers::debian(json!({}))))
        .await;
    // A VM naming it (the image is read afresh before the import).
    let img = manifests::imported(json!({
        "disks": [{"slot": "scsi0", "storage": "local-lvm", "image": {"name": "noble"}}],
    }));
    env.apply(&manifests::vm("img", img)).await;
}

/// A ProxmoxImage with a template through its fleet: its template
/// ProxmoxVM applied and Ready, its templates status written, then the
/// template taken out of its spec and the ProxmoxVM deleted. The image
/// controller's part (the volume and a Ready location) is written by the
/// test.
async fn fleet(env: &Env) {
    let images: Api<ProxmoxImage> = Api::namespaced(support::client(), env.ns.name());
    env.apply(&json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": "golden"},
        "spec": {
            "forProvider": {
                "source": {"importFrom": manifests::UBUNTU},
                "content": "import",
                "template": {"storage": "local-lvm"},
            },
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    }))
    .await;
    let status = json!({"status": {"atProvider": {
        "volume": manifests::UBUNTU,
        "locations": [{"node": "pve", "storage": "local", "phase": "Ready"}],
    }}});
    images
        .patch_status("golden", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    support::poll("the image's template ready", DEADLINE, || async {
        let image = images.get("golden").await.map_err(|e| e.to_string())?;
        let at = image.status.unwrap_or_default().at_provider;
        (at.template_summary.as_deref() == Some("1/1 ready"))
            .then_some(())
            .ok_or_else(|| format!("{:?}", at.templates))
    })
    .await;
    let no_template = json!({"spec": {"forProvider": {"template": null}}});
    images
        .patch(
            "golden",
            &PatchParams::default(),
            &Patch::Merge(&no_template),
        )
        .await
        .unwrap();
    env.wait_gone("golden-tpl-pve").await;
    images.delete("golden", &Default::default()).await.unwrap();
}

/// Until the VMs of [`vms`] converge: web, db and the container Ready,
/// lost told its config is missing, a change of db applied, the test's
/// ProviderConfig Ready with `users` (the container and the VM naming the
/// image among them); and a repeated event, which patches the count of the
/// first, through the provider's own publisher as `account` (a short
/// workload repeats none by itself).
async fn converge(env: &Env, account: &support::ServiceAccountAccess, users: i64) {
    env.wait_ready("web").await;
    env.wait_ready("db").await;
    env.wait_container_ready("box").await;
    env.wait_ready("img").await;
    env.wait_synced_reason("lost", "ProviderConfigNotFound")
        .await;
    crate::pools::wait_ready(env.ns.name(), "team").await;
    let images: kube::Api<provider_proxmox::api::ProxmoxImage> =
        kube::Api::namespaced(support::client(), env.ns.name());
    support::poll("the image Ready", DEADLINE, || async {
        let image = images.get("noble").await.map_err(|e| e.to_string())?;
        let ready = image.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == "Available")
        });
        if ready {
            Ok(())
        } else {
            Err(format!("{:?}", image.status))
        }
    })
    .await;
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
    env.wait_config("pve", &format!("Ready with {users} users"), |s| {
        has_reason(s, "Available") && s.users == Some(users)
    })
    .await;
}

/// Deletes the VMs `names` and the container of [`vms`], and waits until
/// they are gone.
async fn delete(env: &Env, names: &[&str]) {
    for name in names {
        env.vms().delete(name, &Default::default()).await.unwrap();
    }
    env.containers()
        .delete("box", &Default::default())
        .await
        .unwrap();
    for name in names {
        env.wait_gone(name).await;
    }
    env.wait_container_gone("box").await;
}

/// Stops the controller; every call `account` made is granted by each of
/// `rules` (a ClusterRole's anywhere, a Role's in the test's namespace),
/// every grant of theirs was used, and none was refused.
async fn check(
    env: &Env,
    controller: Controller,
    (log, account): (&Path, &support::ServiceAccountAccess),
    rules: &[Rules],
) {
    let metrics = controller.metrics.encode();
    controller.stop().await;
    let calls = calls_of(log, &account.username);
    let listed: Vec<String> = calls
        .iter()
        .map(|c| {
            format!(
                "{} {:?} {} {} {}",
                c.verb, c.group, c.resource, c.namespace, c.name
            )
        })
        .collect();
    let wrong: Vec<String> = rules
        .iter()
        .flat_map(|r| compare(r, env.ns.name(), &calls))
        .collect();
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

/// Every grant of deploy/'s and the chart's RBAC is used and every call is
/// granted, on a workload that touches each kind of object the provider
/// works with: a ClusterProviderConfig (its credentials in another
/// namespace's Secret) and a ProviderConfig, their status and in-use
/// finalizer, a VM with a connection Secret, a cloud-init password Secret
/// and `customCloudInit` from a Secret and a ConfigMap, a change, events,
/// a deletion refused while in use, leader election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_rbac_is_exactly_what_the_provider_uses() {
    let Some(log) = audit_log() else { return };
    let env = Env::without_controller("rbac", Options::default()).await;
    let ns = env.ns.name();
    let deploy = kustomize_rules("deploy").await;
    let helm = helm_rules(&[]).await;
    let account = deploy.grant(&env).await;
    // A ClusterProviderConfig, reading its Secret from the test namespace.
    let cpc = format!("cluster-{ns}");
    let mut config = manifests::provider_config(&env.sim, &json!({}));
    config["kind"] = json!("ClusterProviderConfig");
    config["metadata"]["name"] = json!(cpc);
    config["spec"]["credentials"]["secretRef"]["namespace"] = json!(ns);
    env.apply(&config).await;
    inputs(&env).await;

    let mut settings = env.settings();
    settings.leader_election = Some(LeaderElection::in_namespace(ns));
    let controller = Controller::start(account.client(), settings).await;
    vms(&env, json!({"kind": "ClusterProviderConfig", "name": cpc})).await;
    fleet(&env).await;
    crate::firewall::workload(&env).await;
    crate::backup_jobs::workload(&env).await;
    crate::snapshots::workload(&env).await;
    crate::backups::workload(&env).await;
    crate::sdn::workload(&env).await;
    // Configs not in the watch cache (they do not exist) are read directly.
    let mut lost_cluster = manifests::vm("lost-cluster", json!({"node": "pve", "memory": "1Gi"}));
    lost_cluster["spec"]["providerConfigRef"] =
        json!({"kind": "ClusterProviderConfig", "name": format!("missing-{ns}")});
    env.apply(&lost_cluster).await;
    // The ProxmoxImage noble, the ProxmoxPool team, the ProxmoxIPSet, the
    // ProxmoxSecurityGroup, the ProxmoxBackupJob, the ProxmoxSnapshot, the
    // ProxmoxBackup, the ProxmoxSDNZone and the ProxmoxVNet count as users
    // of pve too.
    converge(&env, &account, 12).await;
    env.wait_synced_reason("lost-cluster", "ProviderConfigNotFound")
        .await;
    env.wait_cluster_config(&cpc, "Ready with 1 user", |s| {
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
    wait_event_in("default", &cpc, |(t, reason, _, _)| {
        t == "Warning" && reason == "InUse"
    })
    .await;
    delete(&env, &["web", "db", "img", "lost", "lost-cluster"]).await;
    crate::firewall::remove(&env).await;
    crate::backup_jobs::remove(&env).await;
    crate::snapshots::remove(&env).await;
    crate::backups::remove(&env).await;
    crate::sdn::remove(&env).await;
    wait_deleted(&cpcs, &cpc).await;
    check(&env, controller, (&log, &account), &[deploy, helm]).await;
}

/// The namespaced mode (`--watch-namespace`) under its own RBAC,
/// deploy/namespaced/'s and the chart's `watchNamespace`: Roles of the
/// namespace only, no ClusterRole. Every grant is used and every call is
/// granted there, so the provider made none outside the namespace and
/// none cluster-scoped (discovery aside), on the same workload less
/// ClusterProviderConfigs: a ProxmoxVM naming one is told that only
/// ProviderConfigs of its namespace are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namespaced_rbac_is_exactly_what_the_namespaced_provider_uses() {
    let Some(log) = audit_log() else { return };
    let env = Env::without_controller("rbac-ns", Options::default()).await;
    let ns = env.ns.name();
    let deploy = kustomize_rules("deploy/namespaced").await;
    let helm = helm_rules(&["watchNamespace=team-a"]).await;
    for rules in [&deploy, &helm] {
        let kinds: Vec<(&str, &str)> = rules
            .roles
            .iter()
            .map(|r| (r.kind.as_str(), r.name.as_str()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("Role", "crossplane-provider-proxmox"),
                ("Role", "crossplane-provider-proxmox-leader-election"),
            ],
            "{}: Roles only",
            rules.origin
        );
    }
    let account = deploy.grant(&env).await;
    inputs(&env).await;
    let mut settings = env.settings();
    settings.cluster_configs = false;
    settings.leader_election = Some(LeaderElection::in_namespace(ns));
    let controller = Controller::start(account.client(), settings).await;
    vms(&env, json!({"kind": "ProviderConfig", "name": "pve"})).await;
    fleet(&env).await;
    crate::firewall::workload(&env).await;
    crate::backup_jobs::workload(&env).await;
    crate::snapshots::workload(&env).await;
    crate::backups::workload(&env).await;
    crate::sdn::workload(&env).await;
    let mut cluster = manifests::vm("cluster", json!({"node": "pve", "memory": "1Gi"}));
    cluster["spec"]["providerConfigRef"] =
        json!({"kind": "ClusterProviderConfig", "name": "default"});
    env.apply(&cluster).await;
    // The ProxmoxImage noble, the ProxmoxPool team, the ProxmoxIPSet, the
    // ProxmoxSecurityGroup, the ProxmoxBackupJob, the ProxmoxSnapshot, the
    // ProxmoxBackup, the ProxmoxSDNZone and the ProxmoxVNet count as users
    // of pve too.
    converge(&env, &account, 13).await;
    let refused = env
        .wait_synced_reason("cluster", "ProviderConfigNotFound")
        .await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains("ClusterProviderConfig default is not served")
            && message.contains(&format!("serves only namespace {ns}")),
        "{message}"
    );
    delete(&env, &["web", "db", "img", "lost", "cluster"]).await;
    crate::firewall::remove(&env).await;
    crate::backup_jobs::remove(&env).await;
    crate::snapshots::remove(&env).await;
    crate::backups::remove(&env).await;
    crate::sdn::remove(&env).await;
    check(&env, controller, (&log, &account), &[deploy, helm]).await;
}

/// The namespaced mode with every permission (the admin's), so only its
/// code keeps it in its namespace: a ProxmoxVM of another namespace, with
/// a ProviderConfig of its own, gets no status, finalizer or annotation,
/// and its Proxmox no request; a ClusterProviderConfig pointing there,
/// named by a ProxmoxVM of the namespace served, is neither read (no
/// status, no finalizer) nor used (nothing is created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_namespaced_mode_touches_nothing_outside_its_namespace() {
    let env = Env::without_controller("served", Options::default()).await;
    let other = Env::without_controller("unserved", Options::default()).await;
    let cpc = format!("cluster-{}", env.ns.name());
    let mut config = manifests::provider_config(&other.sim, &json!({}));
    config["kind"] = json!("ClusterProviderConfig");
    config["metadata"]["name"] = json!(cpc);
    config["spec"]["credentials"]["secretRef"]["namespace"] = json!(other.ns.name());
    env.apply(&config).await;
    other
        .apply(&manifests::vm("theirs", manifests::imported(json!({}))))
        .await;
    let mut settings = env.settings();
    settings.cluster_configs = false;
    settings.leader_election = Some(LeaderElection::in_namespace(env.ns.name()));
    let controller = Controller::start(support::client(), settings).await;
    env.apply(&manifests::vm("ours", manifests::imported(json!({}))))
        .await;
    let mut via_cluster = manifests::vm("via-cluster", manifests::imported(json!({})));
    via_cluster["spec"]["providerConfigRef"] =
        json!({"kind": "ClusterProviderConfig", "name": cpc});
    env.apply(&via_cluster).await;
    env.wait_ready("ours").await;
    let refused = env
        .wait_synced_reason("via-cluster", "ProviderConfigNotFound")
        .await;
    assert!(
        refused
            .message
            .unwrap_or_default()
            .contains("is not served"),
    );
    // Its Leases say which namespace they serve.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(support::client(), env.ns.name());
    let labelled = leases
        .list(
            &kube::api::ListParams::default()
                .labels(&format!("proxmox.crossplane.io/serves={}", env.ns.name())),
        )
        .await
        .unwrap();
    assert!(!labelled.items.is_empty(), "member and config Leases");
    controller.stop().await;

    let theirs = other.vm("theirs").await;
    assert!(theirs.status.is_none(), "no status: {:?}", theirs.status);
    assert!(
        theirs.metadata.finalizers.is_none(),
        "{:?}",
        theirs.metadata
    );
    assert!(
        theirs
            .metadata
            .annotations
            .unwrap_or_default()
            .keys()
            .all(|k| !k.starts_with("crossplane.io/")),
        "no external name"
    );
    let cpcs: Api<ClusterProviderConfig> = Api::all(support::client());
    let untouched = cpcs.get(&cpc).await.unwrap();
    assert!(untouched.status.is_none(), "{:?}", untouched.status);
    assert!(untouched.metadata.finalizers.is_none());
    assert!(
        other.sim.requests().await.is_empty(),
        "nothing asked of the other namespace's Proxmox"
    );
    cpcs.delete(&cpc, &Default::default()).await.unwrap();
}
