//! ProxmoxSecurityGroups and ProxmoxIPSets on the real control plane and
//! pve-sim: created, drift made through pve-sim's API corrected, a
//! re-apply that writes nothing, two namespaces' namesakes kept apart, an
//! object of the same name made by hand never touched, a set in use not
//! deleted.

use kube::Api;
use kube::api::DeleteParams;
use provider_proxmox::api::{Condition, ProxmoxContainer, ProxmoxIPSet, ProxmoxSecurityGroup};
use provider_proxmox::reconcile::managed::names::derived;
use pve_client::firewall::RuleSpec;
use pve_client::ipset::Scope;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::reconcile::{Controller, DEADLINE, Env, Options, containers, manifests, wait_event_in};
use crate::support;

/// The firewall routes that write.
const WRITES: &[(&str, &str)] = &[
    ("POST", "/cluster/firewall/groups"),
    ("POST", "/cluster/firewall/groups/{group}"),
    ("PUT", "/cluster/firewall/groups/{group}/{pos}"),
    ("DELETE", "/cluster/firewall/groups/{group}/{pos}"),
    ("DELETE", "/cluster/firewall/groups/{group}"),
    ("POST", "/cluster/firewall/ipset"),
    ("POST", "/cluster/firewall/ipset/{name}"),
    ("PUT", "/cluster/firewall/ipset/{name}/{cidr}"),
    ("DELETE", "/cluster/firewall/ipset/{name}/{cidr}"),
    ("DELETE", "/cluster/firewall/ipset/{name}"),
];

pub fn ip_set(name: &str, cidrs: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxIPSet",
        "metadata": {"name": name},
        "spec": {
            "forProvider": {"comment": "test set", "cidrs": cidrs},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

pub fn group(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxSecurityGroup",
        "metadata": {"name": name},
        "spec": {
            "forProvider": {"rules": rules},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

/// Three rules, the first naming the IP set `web`.
fn web_rules() -> Value {
    json!([
        {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22", "source": {"ipSet": "web"}},
        {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "80,443", "comment": "http"},
        {"type": "in", "action": "DROP", "log": "info"},
    ])
}

fn conditions<K: serde::Serialize>(obj: &K) -> (Vec<Condition>, Option<i64>, Option<i64>) {
    let v = serde_json::to_value(obj).unwrap();
    let conditions = serde_json::from_value(v["status"]["conditions"].clone()).unwrap_or_default();
    (
        conditions,
        v["status"]["observedGeneration"].as_i64(),
        v["metadata"]["generation"].as_i64(),
    )
}

/// A namespaced kind the helpers read.
pub trait Obj:
    kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
{
}

impl<K> Obj for K where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
{
}

/// Polls the object until `check` accepts it.
pub async fn wait<K, T>(
    ns: &str,
    name: &str,
    what: &str,
    check: impl Fn(&K) -> Result<T, String>,
) -> T
where
    K: Obj,
{
    let api: Api<K> = Api::namespaced(support::client(), ns);
    support::poll(&format!("{name}: {what}"), DEADLINE, || {
        let (api, check) = (api.clone(), &check);
        async move {
            let obj = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
            check(&obj).map_err(|why| format!("{why}; {:?}", conditions(&obj).0))
        }
    })
    .await
}

/// Waits until Ready and Synced are True for the current generation.
pub async fn wait_ready<K>(ns: &str, name: &str) -> K
where
    K: Obj,
{
    wait(ns, name, "Ready and Synced", |obj: &K| {
        let (c, observed, generation) = conditions(obj);
        let is = |t: &str| {
            c.iter()
                .any(|c| c.type_ == t && c.status == provider_proxmox::api::ConditionStatus::True)
        };
        (is("Ready") && is("Synced") && observed == generation)
            .then(|| obj.clone())
            .ok_or_else(|| "not Ready and Synced".into())
    })
    .await
}

/// Waits until the Synced condition has `reason`.
pub async fn wait_synced<K>(ns: &str, name: &str, reason: &str) -> Condition
where
    K: Obj,
{
    wait(ns, name, &format!("Synced {reason}"), |obj: &K| {
        conditions(obj)
            .0
            .into_iter()
            .find(|c| c.type_ == "Synced" && c.reason == reason)
            .ok_or_else(|| "other reason".into())
    })
    .await
}

pub async fn wait_gone<K>(ns: &str, name: &str)
where
    K: Obj,
{
    let api: Api<K> = Api::namespaced(support::client(), ns);
    support::poll(&format!("{name} gone"), DEADLINE, || {
        let api = api.clone();
        async move {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err("still there".to_owned()),
                Err(e) => Err(format!("GET: {e}")),
            }
        }
    })
    .await
}

pub async fn delete<K>(ns: &str, name: &str)
where
    K: Obj,
{
    let api: Api<K> = Api::namespaced(support::client(), ns);
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

/// How often pve-sim was asked for a group's rules and a set's entries.
async fn looks(sim: &crate::reconcile::Sim) -> (usize, usize) {
    (
        sim.count("GET", "/cluster/firewall/groups/{group}").await,
        sim.count("GET", "/cluster/firewall/ipset/{name}").await,
    )
}

/// The firewall writes pve-sim has seen.
async fn writes(env: &Env) -> usize {
    let requests = env.sim.requests().await;
    requests
        .iter()
        .filter(|r| {
            WRITES
                .iter()
                .any(|(m, route)| r["method"] == *m && r["route"] == *route)
        })
        .count()
}

fn wanted_rules(set: &str) -> Vec<RuleSpec> {
    let rule = |dport: Option<&str>, action: &str| RuleSpec {
        kind: "in".into(),
        action: action.into(),
        enable: true,
        proto: dport.map(|_| "tcp".into()),
        dport: dport.map(str::to_owned),
        ..RuleSpec::default()
    };
    vec![
        RuleSpec {
            source: Some(format!("+{set}")),
            ..rule(Some("22"), "ACCEPT")
        },
        RuleSpec {
            comment: Some("http".into()),
            ..rule(Some("80,443"), "ACCEPT")
        },
        RuleSpec {
            log: Some("info".into()),
            ..rule(None, "DROP")
        },
    ]
}

/// The rules of `group` on pve-sim, as the provider compares them.
async fn rules_on_sim(env: &Env, group: &str) -> Vec<RuleSpec> {
    env.sim
        .client()
        .security_group_rules(group)
        .await
        .unwrap()
        .iter()
        .map(provider_proxmox::reconcile::security_group::plan::observed_rule)
        .collect()
}

async fn wait_rules(env: &Env, group: &str, want: &[RuleSpec], what: &str) {
    support::poll(what, DEADLINE, || async {
        let have = rules_on_sim(env, group).await;
        (have == want)
            .then_some(())
            .ok_or_else(|| format!("{have:#?}"))
    })
    .await;
}

/// Group and set names as the provider derives them.
fn group_name(ns: &str, name: &str) -> String {
    derived(ns, name, 18)
}

fn set_name(ns: &str, name: &str) -> String {
    derived(ns, name, 64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_created_its_drift_corrected_and_a_reapply_writes_nothing() {
    let env = Env::start("fw-group").await;
    let ns = env.ns.name().to_owned();
    let set = ip_set(
        "web",
        json!([{"cidr": "10.0.0.0/24"}, {"cidr": "10.0.1.5/32", "comment": "lb"}]),
    );
    let grp = group("web", web_rules());
    env.apply(&set).await;
    env.apply(&grp).await;
    let ready: ProxmoxSecurityGroup = wait_ready(&ns, "web").await;
    let ready_set: ProxmoxIPSet = wait_ready(&ns, "web").await;
    let (gname, sname) = (group_name(&ns, "web"), set_name(&ns, "web"));
    assert_eq!(
        ready.status.unwrap().at_provider.name.as_deref(),
        Some(gname.as_str())
    );
    assert_eq!(
        ready_set.status.unwrap().at_provider.name.as_deref(),
        Some(sname.as_str())
    );
    let want = wanted_rules(&sname);
    assert_eq!(rules_on_sim(&env, &gname).await, want, "created in order");
    let client = env.sim.client();
    let entries = client.ip_set_entries(Scope::Cluster, &sname).await.unwrap();
    let mut cidrs: Vec<&str> = entries.iter().map(|e| e.cidr.as_str()).collect();
    cidrs.sort_unstable();
    assert_eq!(
        cidrs,
        ["10.0.0.0/24", "10.0.1.5"],
        "stored as PVE stores them"
    );
    wait_event_in(&ns, "web", |(_, reason, _, _)| reason == "Created").await;

    // Drift behind the provider's back: a rule changed, another deleted,
    // an entry deleted.
    let listed = client.security_group_rules(&gname).await.unwrap();
    let digest = listed[0].digest.clone().unwrap();
    let mut changed = want[1].clone();
    changed.dport = Some("8080".into());
    client
        .set_security_group_rule(&gname, 1, &changed, &digest)
        .await
        .unwrap();
    let listed = client.security_group_rules(&gname).await.unwrap();
    client
        .delete_security_group_rule(&gname, 0, listed[0].digest.as_deref())
        .await
        .unwrap();
    let entries = client.ip_set_entries(Scope::Cluster, &sname).await.unwrap();
    client
        .delete_ip_set_entry(
            Scope::Cluster,
            &sname,
            "10.0.1.5",
            entries[0].digest.as_deref().unwrap(),
        )
        .await
        .unwrap();
    wait_rules(&env, &gname, &want, "the rules corrected").await;
    support::poll("the entry put back", DEADLINE, || async {
        let entries = client.ip_set_entries(Scope::Cluster, &sname).await.unwrap();
        entries
            .iter()
            .any(|e| e.cidr == "10.0.1.5" && e.comment.as_deref() == Some("lb"))
            .then_some(())
            .ok_or_else(|| format!("{entries:?}"))
    })
    .await;
    let _: ProxmoxSecurityGroup = wait_ready(&ns, "web").await;
    let _: ProxmoxIPSet = wait_ready(&ns, "web").await;

    // A re-apply of the same spec writes nothing: two more observations
    // of each (the resync) pass without a write.
    let before = writes(&env).await;
    env.apply(&set).await;
    env.apply(&grp).await;
    let (g0, s0) = looks(&env.sim).await;
    support::poll("two more observations of each", DEADLINE, || async {
        let (g, s) = looks(&env.sim).await;
        (g >= g0 + 2 && s >= s0 + 2)
            .then_some(())
            .ok_or_else(|| format!("{g}/{s} after {g0}/{s0}"))
    })
    .await;
    assert_eq!(writes(&env).await, before, "a re-apply writes nothing");

    // The set is named by the group: its deletion waits, naming it.
    delete::<ProxmoxIPSet>(&ns, "web").await;
    wait(
        &ns,
        "web",
        "Deleting, naming its user",
        |s: &ProxmoxIPSet| {
            let (c, _, _) = conditions(s);
            c.iter()
                .find(|c| c.type_ == "Ready" && c.reason == "Deleting")
                .and_then(|c| c.message.clone())
                .filter(|m| m.contains("ProxmoxSecurityGroup web"))
                .ok_or_else(|| "not waiting for its user".to_owned())
        },
    )
    .await;
    assert!(
        client
            .ip_sets(Scope::Cluster)
            .await
            .unwrap()
            .iter()
            .any(|s| s.name == sname),
        "the set in use stays on Proxmox"
    );
    delete::<ProxmoxSecurityGroup>(&ns, "web").await;
    wait_gone::<ProxmoxSecurityGroup>(&ns, "web").await;
    wait_gone::<ProxmoxIPSet>(&ns, "web").await;
    assert!(client.security_groups().await.unwrap().is_empty());
    assert!(client.ip_sets(Scope::Cluster).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namesakes_of_two_namespaces_never_touch_each_other_nor_what_was_made_by_hand() {
    let env = Env::start("fw-a").await;
    let ns_a = env.ns.name().to_owned();
    // Namespace B: its own ProviderConfig and controller, the same Proxmox.
    let b = support::namespace("fw-b").await;
    let ns_b = b.name().to_owned();
    for obj in [
        manifests::credentials(),
        manifests::provider_config(&env.sim, &json!({})),
    ] {
        support::apply_objects(&[serde_json::from_value(obj).unwrap()], Some(&ns_b)).await;
    }
    let mut settings_b = env.settings();
    settings_b.namespace = Some(ns_b.clone());
    settings_b.identity = format!("test-{ns_b}");
    let controller_b = Controller::start(support::client(), settings_b).await;
    let apply_b = |obj: Value| {
        let ns_b = ns_b.clone();
        async move {
            support::apply_objects(&[serde_json::from_value(obj).unwrap()], Some(&ns_b)).await;
        }
    };

    env.apply(&ip_set("office", json!([{"cidr": "10.1.0.0/16"}])))
        .await;
    apply_b(ip_set(
        "office",
        json!([{"cidr": "10.2.0.0/16", "nomatch": true}]),
    ))
    .await;
    let a: ProxmoxIPSet = wait_ready(&ns_a, "office").await;
    let b_set: ProxmoxIPSet = wait_ready(&ns_b, "office").await;
    let (name_a, name_b) = (
        a.status.unwrap().at_provider.name.unwrap(),
        b_set.status.unwrap().at_provider.name.unwrap(),
    );
    assert_ne!(name_a, name_b);
    let client = env.sim.client();
    let cidrs = |name: String| {
        let client = client.clone();
        async move {
            client
                .ip_set_entries(Scope::Cluster, &name)
                .await
                .unwrap()
                .into_iter()
                .map(|e| (e.cidr, e.nomatch))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        cidrs(name_a.clone()).await,
        [("10.1.0.0/16".to_owned(), false)]
    );
    assert_eq!(
        cidrs(name_b.clone()).await,
        [("10.2.0.0/16".to_owned(), true)]
    );

    // An IP set made by hand under the name a resource would get: never
    // changed, and left there when the resource goes.
    let taken = set_name(&ns_a, "taken");
    client
        .create_ip_set(Scope::Cluster, &taken, "made by hand")
        .await
        .unwrap();
    env.apply(&ip_set("taken", json!([{"cidr": "10.3.0.1"}])))
        .await;
    let not_owned = wait_synced::<ProxmoxIPSet>(&ns_a, "taken", "NotOwned").await;
    assert!(
        not_owned
            .message
            .unwrap_or_default()
            .contains("never changed")
    );

    // B's set goes; A's stays as it was, and so does the one made by hand.
    delete::<ProxmoxIPSet>(&ns_b, "office").await;
    wait_gone::<ProxmoxIPSet>(&ns_b, "office").await;
    delete::<ProxmoxIPSet>(&ns_a, "taken").await;
    wait_gone::<ProxmoxIPSet>(&ns_a, "taken").await;
    let names: Vec<String> = client
        .ip_sets(Scope::Cluster)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert!(
        names.contains(&name_a) && !names.contains(&name_b),
        "{names:?}"
    );
    assert!(names.contains(&taken), "{names:?}");
    assert_eq!(cidrs(name_a).await, [("10.1.0.0/16".to_owned(), false)]);
    assert!(
        cidrs(taken).await.is_empty(),
        "the one made by hand untouched"
    );
    let _: ProxmoxIPSet = wait_ready(&ns_a, "office").await;
    delete::<ProxmoxIPSet>(&ns_a, "office").await;
    wait_gone::<ProxmoxIPSet>(&ns_a, "office").await;
    controller_b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_or_entry_pve_would_refuse_is_refused_or_said_naming_the_field() {
    let env = Env::start("fw-bad").await;
    let ns = env.ns.name().to_owned();
    for (obj, needle) in [
        (
            group("fwd", json!([{"type": "forward", "action": "REJECT"}])),
            "REJECT is not allowed on the forward chain",
        ),
        (
            group(
                "ports",
                json!([{"type": "in", "action": "ACCEPT", "dport": "22"}]),
            ),
            "dport needs proto",
        ),
        (
            ip_set("zero", json!([{"cidr": "10.0.0.0/0"}])),
            "zero prefix",
        ),
        (
            ip_set("notip", json!([{"cidr": "10.0.0.300"}])),
            "IP address or a CIDR",
        ),
    ] {
        let err = support::apply_expect_rejected(
            serde_json::to_string(&obj).unwrap().as_str(),
            Some(&ns),
        )
        .await;
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // A rule naming an IP set the namespace does not have: said, naming
    // the field, and nothing sent.
    env.apply(&group(
        "lost",
        json!([{"type": "in", "action": "ACCEPT", "source": {"ipSet": "nosuch"}}]),
    ))
    .await;
    let said = wait_synced::<ProxmoxSecurityGroup>(&ns, "lost", "InvalidSpec").await;
    assert!(
        said.message
            .unwrap_or_default()
            .contains("spec.forProvider.rules")
    );
    // Two entries that are one once stored: said, naming the field.
    env.apply(&ip_set(
        "twice",
        json!([{"cidr": "10.0.0.1"}, {"cidr": "10.0.0.1/32"}]),
    ))
    .await;
    let said = wait_synced::<ProxmoxIPSet>(&ns, "twice", "InvalidSpec").await;
    assert!(
        said.message
            .unwrap_or_default()
            .contains("spec.forProvider.cidrs[1].cidr")
    );
    assert_eq!(writes(&env).await, 0, "nothing sent for a bad spec");
    // A protocol the schema cannot know PVE refuses: said with the rule's
    // place and Proxmox's words, retried with backoff, not in a loop.
    env.apply(&group(
        "proto",
        json!([
            {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22"},
            {"type": "in", "action": "ACCEPT", "proto": "nosuch"},
        ]),
    ))
    .await;
    let refused = wait_synced::<ProxmoxSecurityGroup>(&ns, "proto", "ReconcileError").await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains("spec.forProvider.rules[1]")
            && message.contains("unknown protocol 'nosuch'"),
        "{message}"
    );
    wait_event_in(&ns, "proto", |(t, reason, _, _)| {
        t == "Warning" && reason == "ChangeRefused"
    })
    .await;
    delete::<ProxmoxSecurityGroup>(&ns, "proto").await;
    wait_gone::<ProxmoxSecurityGroup>(&ns, "proto").await;
    // The set "lost" names comes (applied after it, as a GitOps tool may):
    // the set's becoming Ready wakes the group, which waited for a change
    // (nothing else would look at it again), and it goes Ready.
    env.apply(&ip_set("nosuch", json!([{"cidr": "10.7.0.0/16"}])))
        .await;
    let _: ProxmoxSecurityGroup = wait_ready(&ns, "lost").await;
    delete::<ProxmoxSecurityGroup>(&ns, "lost").await;
    wait_gone::<ProxmoxSecurityGroup>(&ns, "lost").await;
    delete::<ProxmoxIPSet>(&ns, "nosuch").await;
    wait_gone::<ProxmoxIPSet>(&ns, "nosuch").await;
    delete::<ProxmoxIPSet>(&ns, "twice").await;
    wait_gone::<ProxmoxSecurityGroup>(&ns, "lost").await;
    wait_gone::<ProxmoxIPSet>(&ns, "twice").await;
}

/// The rbac tests' firewall workload: a set and a group naming it, Ready.
pub async fn workload(env: &Env) {
    let ns = env.ns.name();
    env.apply(&ip_set("web", json!([{"cidr": "10.0.0.0/24"}])))
        .await;
    env.apply(&group("web", web_rules())).await;
    let _: ProxmoxIPSet = wait_ready(ns, "web").await;
    let _: ProxmoxSecurityGroup = wait_ready(ns, "web").await;
}

/// Deletes [`workload`]'s objects and waits until they are gone.
pub async fn remove(env: &Env) {
    let ns = env.ns.name();
    delete::<ProxmoxSecurityGroup>(ns, "web").await;
    delete::<ProxmoxIPSet>(ns, "web").await;
    wait_gone::<ProxmoxSecurityGroup>(ns, "web").await;
    wait_gone::<ProxmoxIPSet>(ns, "web").await;
}

/// A VM of tier `tier` whose cloud-init gives it `ip`.
fn tiered_vm(name: &str, tier: &str, ip: &str) -> Value {
    let mut vm = manifests::vm(
        name,
        json!({
            "node": "pve",
            "memory": "1Gi",
            "networks": [{"slot": "net0", "bridge": "vmbr0"}],
            "cloudInit": {"ipConfigs": [{"interface": "net0", "ip": format!("{ip}/24")}]},
        }),
    );
    vm["metadata"]["labels"] = json!({"tier": tier});
    vm
}

/// The entries of `set` on pve-sim: (cidr, comment), sorted.
async fn entries_on_sim(env: &Env, set: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = env
        .sim
        .client()
        .ip_set_entries(Scope::Cluster, set)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.cidr, e.comment.unwrap_or_default()))
        .collect();
    out.sort();
    out
}

async fn wait_entries(env: &Env, set: &str, want: &[(&str, &str)], what: &str) {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(c, w)| ((*c).to_owned(), (*w).to_owned()))
        .collect();
    support::poll(what, DEADLINE, || async {
        let have = entries_on_sim(env, set).await;
        (have == want)
            .then_some(())
            .ok_or_else(|| format!("{have:?}"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_set_gains_and_loses_members_as_vms_and_containers_come_go_and_change_address() {
    // A resync far beyond the test: the set follows the VMs because their
    // changes wake it, not because it looks again.
    let options = Options {
        provider: json!({"resyncInterval": "10m"}),
        ..Options::default()
    };
    let env = Env::start_with("fw-select", options).await;
    let ns = env.ns.name().to_owned();
    let mut set = ip_set("db", json!([{"cidr": "10.9.0.0/16"}]));
    set["spec"]["forProvider"]["selector"] = json!({"matchLabels": {"tier": "db"}});
    env.apply(&set).await;
    let name = set_name(&ns, "db");
    let ready: ProxmoxIPSet = wait_ready(&ns, "db").await;
    assert_eq!(
        ready.status.unwrap().at_provider.members,
        Some(0),
        "no member yet: an empty selection"
    );
    assert_eq!(
        entries_on_sim(&env, &name).await,
        [("10.9.0.0/16".to_owned(), String::new())]
    );

    env.apply(&tiered_vm("db-1", "db", "10.5.0.11")).await;
    env.apply(&tiered_vm("db-2", "db", "10.5.0.12")).await;
    env.apply(&tiered_vm("web-1", "web", "10.5.0.21")).await;
    let gained = [
        ("10.5.0.11", "ProxmoxVM db-1"),
        ("10.5.0.12", "ProxmoxVM db-2"),
        ("10.9.0.0/16", ""),
    ];
    wait_entries(&env, &name, &gained, "the db VMs joined, not the web one").await;

    // A container joins by its label too, and leaves when it is deleted:
    // the container watch wakes the set as the VM watch does.
    let mut ct = containers::container(
        "db-ct",
        containers::debian(json!({"networks": [
            {"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "10.5.0.31/24"}
        ]})),
    );
    ct["metadata"]["labels"] = json!({"tier": "db"});
    env.apply(&ct).await;
    let with_container = [
        ("10.5.0.11", "ProxmoxVM db-1"),
        ("10.5.0.12", "ProxmoxVM db-2"),
        ("10.5.0.31", "ProxmoxContainer db-ct"),
        ("10.9.0.0/16", ""),
    ];
    wait_entries(&env, &name, &with_container, "the db container joined").await;
    env.containers()
        .delete("db-ct", &DeleteParams::default())
        .await
        .unwrap();
    wait_entries(&env, &name, &gained, "the deleted container left").await;

    // An address changes: the old one leaves, the new one joins.
    env.patch_vm(
        "db-2",
        json!({"spec": {"forProvider": {"cloudInit": {"ipConfigs": [{"interface": "net0", "ip": "10.5.0.13/24"}]}}}}),
    )
    .await;
    let moved = [
        ("10.5.0.11", "ProxmoxVM db-1"),
        ("10.5.0.13", "ProxmoxVM db-2"),
        ("10.9.0.0/16", ""),
    ];
    wait_entries(&env, &name, &moved, "db-2's new address").await;

    // A VM leaves by its label, another by its deletion.
    env.patch_vm("db-1", json!({"metadata": {"labels": {"tier": "web"}}}))
        .await;
    env.vms()
        .delete("db-2", &DeleteParams::default())
        .await
        .unwrap();
    wait_entries(
        &env,
        &name,
        &[("10.9.0.0/16", "")],
        "only the static entry left",
    )
    .await;
    let set_now: ProxmoxIPSet = wait_ready(&ns, "db").await;
    assert_eq!(set_now.status.unwrap().at_provider.members, Some(0));

    for vm in ["db-1", "web-1"] {
        env.vms()
            .delete(vm, &DeleteParams::default())
            .await
            .unwrap();
    }
    for vm in ["db-1", "db-2", "web-1"] {
        env.wait_gone(vm).await;
    }
    wait_gone::<ProxmoxContainer>(&ns, "db-ct").await;
    delete::<ProxmoxIPSet>(&ns, "db").await;
    wait_gone::<ProxmoxIPSet>(&ns, "db").await;
    // Crossplane's deletion histogram saw each kind's deletions (from the
    // watch, which may tell the controller a moment after the API server
    // told this test).
    let metrics = &env.controller.as_ref().unwrap().metrics;
    support::poll("the deletions timed", DEADLINE, || async {
        let text = metrics.encode();
        let want = [
            ("ProxmoxVM", 3),
            ("ProxmoxContainer", 1),
            ("ProxmoxIPSet", 1),
        ];
        for (kind, n) in want {
            let line = format!(
                "crossplane_managed_resource_deletion_seconds_count{{gvk=\"proxmox.m.crossplane.io/v1alpha1, Kind={kind}\"}} {n}"
            );
            if !text.contains(&line) {
                return Err(format!("no {line:?} in\n{text}"));
            }
        }
        Ok(())
    })
    .await;
}
