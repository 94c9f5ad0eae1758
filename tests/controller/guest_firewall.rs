//! A ProxmoxVM's own firewall on the real control plane and pve-sim: its
//! options and rules (one naming a ProxmoxIPSet, one a
//! ProxmoxSecurityGroup, by their Kubernetes names) made on Proxmox, a
//! rule deleted by hand put back, a re-apply that writes nothing, a
//! group of another namespace never named (the VM waits, its firewall
//! untouched), and a group in use kept until its VM lets go of it. The
//! guest's own aliases and IP sets made, named by its rules, corrected
//! when changed by hand, removed when dropped from the spec.

use provider_proxmox::api::{ProxmoxIPSet, ProxmoxSecurityGroup, ProxmoxVM};
use provider_proxmox::reconcile::common::firewall::observed_rule;
use provider_proxmox::reconcile::managed::names::derived;
use pve_client::firewall::RuleSpec;
use pve_client::{Client, Guest, GuestType};
use serde_json::{Value, json};

use crate::firewall::{delete, group, ip_set, wait, wait_gone, wait_ready};
use crate::reconcile::{DEADLINE, Env, condition, containers, manifests};
use crate::support;

/// The firewall routes of a VM that write.
const WRITES: &[(&str, &str)] = &[
    ("PUT", "/nodes/{node}/qemu/{vmid}/firewall/options"),
    ("POST", "/nodes/{node}/qemu/{vmid}/firewall/rules"),
    ("PUT", "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}"),
    ("DELETE", "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}"),
    ("POST", "/nodes/{node}/qemu/{vmid}/firewall/aliases"),
    ("PUT", "/nodes/{node}/qemu/{vmid}/firewall/aliases/{name}"),
    (
        "DELETE",
        "/nodes/{node}/qemu/{vmid}/firewall/aliases/{name}",
    ),
    ("POST", "/nodes/{node}/qemu/{vmid}/firewall/ipset"),
    ("POST", "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}"),
    ("DELETE", "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}"),
    (
        "PUT",
        "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}/{cidr}",
    ),
    (
        "DELETE",
        "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}/{cidr}",
    ),
];

fn guarded_vm(name: &str, group: &str) -> Value {
    manifests::vm(
        name,
        json!({
            "node": "pve",
            "memory": "1Gi",
            "networks": [{"slot": "net0", "bridge": "vmbr0", "firewall": true}],
            "firewall": {
                "policyIn": "DROP",
                "logLevelIn": "info",
                "rules": [
                    {"securityGroup": group},
                    {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22",
                     "source": {"ipSet": "office"}, "iface": "net0", "comment": "ssh"},
                ],
            },
        }),
    )
}

fn guest(vmid: u32) -> Guest {
    Guest {
        kind: GuestType::Qemu,
        node: "pve".into(),
        vmid,
    }
}

async fn rules_on_sim(client: &Client, vmid: u32) -> Vec<RuleSpec> {
    rules_of(client, &guest(vmid)).await
}

async fn rules_of(client: &Client, guest: &Guest) -> Vec<RuleSpec> {
    client
        .guest_firewall_rules(guest)
        .await
        .unwrap()
        .iter()
        .map(observed_rule)
        .collect()
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_firewall_holds_its_rules_and_names_only_its_own_namespaces_groups() {
    let env = Env::start("fw-guest").await;
    let ns = env.ns.name().to_owned();
    env.apply(&ip_set("office", json!([{"cidr": "10.9.0.0/16"}])))
        .await;
    env.apply(&group(
        "web",
        json!([{"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "80,443"}]),
    ))
    .await;
    let _: ProxmoxIPSet = wait_ready(&ns, "office").await;
    let _: ProxmoxSecurityGroup = wait_ready(&ns, "web").await;
    env.apply(&guarded_vm("guarded", "web")).await;
    let ready = env.wait_ready("guarded").await;
    let vmid = env.vmid("guarded").await;
    let client = env.sim.client();
    let (gname, sname) = (derived(&ns, "web", 18), derived(&ns, "office", 64));
    let want = vec![
        RuleSpec {
            kind: "group".into(),
            action: gname.clone(),
            enable: true,
            ..RuleSpec::default()
        },
        RuleSpec {
            kind: "in".into(),
            action: "ACCEPT".into(),
            enable: true,
            proto: Some("tcp".into()),
            dport: Some("22".into()),
            source: Some(format!("+{sname}")),
            iface: Some("net0".into()),
            comment: Some("ssh".into()),
            ..RuleSpec::default()
        },
    ];
    assert_eq!(
        rules_on_sim(&client, vmid).await,
        want,
        "exactly these, in order"
    );
    let options = client.guest_firewall_options(&guest(vmid)).await.unwrap();
    assert_eq!(options.enable, Some(true));
    assert_eq!(options.policy_in.as_deref(), Some("DROP"));
    assert_eq!(options.log_level_in.as_deref(), Some("info"));
    assert_eq!(options.ndp, None, "what the spec leaves out is not set");
    let shown = ready.status.unwrap().at_provider.firewall.expect("shown");
    assert_eq!(
        shown.rules[0].security_group.as_deref(),
        Some(gname.as_str())
    );

    // A rule deleted by hand comes back.
    let listed = client.guest_firewall_rules(&guest(vmid)).await.unwrap();
    client
        .delete_guest_firewall_rule(&guest(vmid), 0, listed[0].digest.as_deref())
        .await
        .unwrap();
    support::poll("the group rule put back", DEADLINE, || async {
        let have = rules_on_sim(&client, vmid).await;
        (have == want)
            .then_some(())
            .ok_or_else(|| format!("{have:#?}"))
    })
    .await;

    // A re-apply writes nothing: two more firewall reads pass without a
    // write.
    let _ = env.wait_ready("guarded").await;
    let before = writes(&env).await;
    env.apply(&guarded_vm("guarded", "web")).await;
    let route = "/nodes/{node}/qemu/{vmid}/firewall/rules";
    let reads = env.sim.count("GET", route).await;
    support::poll("two more reads of the rules", DEADLINE, || async {
        let now = env.sim.count("GET", route).await;
        (now >= reads + 2)
            .then_some(())
            .ok_or_else(|| format!("{now} after {reads}"))
    })
    .await;
    assert_eq!(writes(&env).await, before, "a re-apply writes nothing");

    // The group is named by the VM: its deletion waits, naming the VM.
    delete::<ProxmoxSecurityGroup>(&ns, "web").await;
    wait(
        &ns,
        "web",
        "Deleting, naming its user",
        |g: &ProxmoxSecurityGroup| {
            g.status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .filter(|c| c.reason == "Deleting")
                .and_then(|c| c.message.clone())
                .filter(|m| m.contains("ProxmoxVM guarded"))
                .ok_or_else(|| "not waiting for its user".to_owned())
        },
    )
    .await;
    assert!(
        client
            .security_groups()
            .await
            .unwrap()
            .iter()
            .any(|g| g.name == gname),
        "the group in use stays on Proxmox"
    );
    // The VM lets go of it: the group goes.
    env.patch_vm(
        "guarded",
        json!({"spec": {"forProvider": {"firewall": {"rules": [
            {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22"}
        ]}}}}),
    )
    .await;
    wait_gone::<ProxmoxSecurityGroup>(&ns, "web").await;
    support::poll("the VM's rules follow its spec", DEADLINE, || async {
        let have = rules_on_sim(&client, vmid).await;
        (have.len() == 1 && have[0].kind == "in")
            .then_some(())
            .ok_or_else(|| format!("{have:#?}"))
    })
    .await;

    // Namespace B has a group; a VM of this namespace naming it waits,
    // and its firewall is not touched.
    let b = support::namespace("fw-guest-b").await;
    let foreign = serde_json::from_value(group("foreign", json!([]))).unwrap();
    support::apply_objects(&[foreign], Some(b.name())).await;
    let before = writes(&env).await;
    env.apply(&guarded_vm("intruder", "foreign")).await;
    let waiting = env
        .wait_synced_reason("intruder", "ReferenceNotReady")
        .await;
    let message = waiting.message.unwrap_or_default();
    assert!(
        message.contains(&format!("ProxmoxSecurityGroup {ns}/foreign does not exist")),
        "{message}"
    );
    let intruder = env.vmid("intruder").await;
    assert!(rules_on_sim(&client, intruder).await.is_empty());
    let options = client
        .guest_firewall_options(&guest(intruder))
        .await
        .unwrap();
    assert_eq!(options.enable, None, "not even the options are written");
    assert_eq!(writes(&env).await, before, "nothing written for it");
    let vm: ProxmoxVM = env.vm("intruder").await;
    assert!(
        condition(&vm, "Ready")
            .is_some_and(|c| c.status != provider_proxmox::api::ConditionStatus::True),
        "not Ready while it waits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_containers_firewall_holds_its_rules_and_a_rule_deleted_by_hand_comes_back() {
    let env = Env::start("fw-ct").await;
    let ns = env.ns.name().to_owned();
    env.apply(&ip_set("office", json!([{"cidr": "10.9.0.0/16"}])))
        .await;
    let _: ProxmoxIPSet = wait_ready(&ns, "office").await;
    let ct = containers::container(
        "app",
        containers::debian(json!({"firewall": {"policyIn": "REJECT",
        "aliases": [{"name": "db", "cidr": "10.0.3.4"}],
        "ipSets": [{"name": "admins", "entries": [{"cidr": "10.0.4.0/24"}]}],
        "rules": [
            {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "443",
             "source": {"ipSet": "office"}},
            {"type": "out", "action": "ACCEPT", "source": {"guestIpSet": "admins"},
             "dest": {"guestAlias": "db"}},
        ]}})),
    );
    env.apply(&ct).await;
    let vmid = env.wait_container_ready("app").await;
    let client = env.sim.client();
    let guest = Guest {
        kind: GuestType::Lxc,
        node: "pve".into(),
        vmid,
    };
    let want = vec![
        RuleSpec {
            kind: "in".into(),
            action: "ACCEPT".into(),
            enable: true,
            proto: Some("tcp".into()),
            dport: Some("443".into()),
            source: Some(format!("+{}", derived(&ns, "office", 64))),
            ..RuleSpec::default()
        },
        RuleSpec {
            kind: "out".into(),
            action: "ACCEPT".into(),
            enable: true,
            source: Some("+guest/admins".into()),
            dest: Some("guest/db".into()),
            ..RuleSpec::default()
        },
    ];
    assert_eq!(rules_of(&client, &guest).await, want);
    assert_eq!(
        own_objects(&client, &guest).await,
        (
            vec![("db".to_owned(), "10.0.3.4".to_owned())],
            vec!["admins: 10.0.4.0/24".to_owned()]
        ),
        "the container's own alias and set"
    );
    let options = client.guest_firewall_options(&guest).await.unwrap();
    assert_eq!(
        (options.enable, options.policy_in.as_deref()),
        (Some(true), Some("REJECT"))
    );
    let listed = client.guest_firewall_rules(&guest).await.unwrap();
    client
        .delete_guest_firewall_rule(&guest, 0, listed[0].digest.as_deref())
        .await
        .unwrap();
    support::poll("the rule put back", DEADLINE, || async {
        let have = rules_of(&client, &guest).await;
        (have == want)
            .then_some(())
            .ok_or_else(|| format!("{have:#?}"))
    })
    .await;
}

fn vm_with_own_objects(name: &str) -> Value {
    manifests::vm(
        name,
        json!({
            "node": "pve",
            "memory": "1Gi",
            "networks": [{"slot": "net0", "bridge": "vmbr0", "firewall": true}],
            "firewall": {
                "aliases": [{"name": "gw", "cidr": "10.0.0.1/32", "comment": "the gateway"}],
                "ipSets": [{"name": "peers", "comment": "p", "entries": [
                    {"cidr": "10.0.1.0/24"}, {"cidr": "10.0.1.7", "nomatch": true}
                ]}],
                "rules": [
                    {"type": "in", "action": "ACCEPT", "source": {"guestIpSet": "peers"},
                     "dest": {"guestAlias": "gw"}},
                ],
            },
        }),
    )
}

/// The guest's aliases as (name, cidr) and its sets as name: entries. A
/// set listed and gone when its entries are read is left out: the
/// provider may delete it in between, as it does once the spec drops it.
async fn own_objects(client: &Client, guest: &Guest) -> (Vec<(String, String)>, Vec<String>) {
    use pve_client::ipset::Scope;
    let aliases = client.guest_aliases(guest).await.unwrap();
    let mut sets = vec![];
    for set in client.ip_sets(Scope::Guest(guest)).await.unwrap() {
        let entries = match client.ip_set_entries(Scope::Guest(guest), &set.name).await {
            Err(pve_client::Error::NotFound { .. }) => continue,
            read => read.unwrap(),
        };
        let mut cidrs: Vec<String> = entries
            .iter()
            .map(|e| format!("{}{}", if e.nomatch { "!" } else { "" }, e.cidr))
            .collect();
        cidrs.sort();
        sets.push(format!("{}: {}", set.name, cidrs.join(",")));
    }
    (
        aliases.into_iter().map(|a| (a.name, a.cidr)).collect(),
        sets,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_own_aliases_and_ip_sets_are_kept_and_named_by_its_rules() {
    use pve_client::ipset::Scope;
    let env = Env::start("fw-own").await;
    env.apply(&vm_with_own_objects("own")).await;
    let ready = env.wait_ready("own").await;
    let vmid = env.vmid("own").await;
    let client = env.sim.client();
    let g = guest(vmid);
    let want = (
        vec![("gw".to_owned(), "10.0.0.1".to_owned())],
        vec!["peers: !10.0.1.7,10.0.1.0/24".to_owned()],
    );
    assert_eq!(own_objects(&client, &g).await, want);
    let rules = rules_on_sim(&client, vmid).await;
    assert_eq!(
        (rules[0].source.as_deref(), rules[0].dest.as_deref()),
        (Some("+guest/peers"), Some("guest/gw")),
        "the rule names the guest's own, scoped"
    );
    assert!(ready.status.unwrap().at_provider.firewall.is_some());
    // The status shows them, as Proxmox has them.
    support::poll(
        "the status shows the VM's own objects",
        DEADLINE,
        || async {
            let vm = env.vms().get("own").await.map_err(|e| e.to_string())?;
            let fw = vm
                .status
                .and_then(|s| s.at_provider.firewall)
                .unwrap_or_default();
            let peers = fw.ip_sets.get("peers").cloned().unwrap_or_default();
            (fw.aliases == ["gw=10.0.0.1"] && peers.contains(&"!10.0.1.7".to_owned()))
                .then_some(())
                .ok_or_else(|| format!("{:?} {:?}", fw.aliases, fw.ip_sets))
        },
    )
    .await;

    // By hand: an entry deleted, an alias changed, a set and an alias
    // added. All put back.
    let entries = client
        .ip_set_entries(Scope::Guest(&g), "peers")
        .await
        .unwrap();
    let digest = entries[0].digest.clone().unwrap_or_default();
    client
        .delete_ip_set_entry(Scope::Guest(&g), "peers", "10.0.1.0/24", &digest)
        .await
        .unwrap();
    client
        .set_guest_alias(&g, ("gw", "10.0.0.9", None), None)
        .await
        .unwrap();
    client
        .create_guest_alias(&g, "extra", "10.5.5.5", None)
        .await
        .unwrap();
    client
        .create_ip_set(Scope::Guest(&g), "stray", "")
        .await
        .unwrap();
    support::poll("the guest's own objects put back", DEADLINE, || async {
        let have = own_objects(&client, &g).await;
        (have == want)
            .then_some(())
            .ok_or_else(|| format!("{have:?}"))
    })
    .await;

    // A re-apply writes nothing.
    let _ = env.wait_ready("own").await;
    let before = writes(&env).await;
    env.apply(&vm_with_own_objects("own")).await;
    let route = "/nodes/{node}/qemu/{vmid}/firewall/aliases";
    let reads = env.sim.count("GET", route).await;
    support::poll("two more reads of the aliases", DEADLINE, || async {
        let now = env.sim.count("GET", route).await;
        (now >= reads + 2)
            .then_some(())
            .ok_or_else(|| format!("{now} after {reads}"))
    })
    .await;
    assert_eq!(writes(&env).await, before, "a re-apply writes nothing");

    // Dropped from the spec (and from the rule): removed from Proxmox.
    env.patch_vm(
        "own",
        json!({"spec": {"forProvider": {"firewall": {"aliases": [], "ipSets": [], "rules": [
            {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22"}
        ]}}}}),
    )
    .await;
    support::poll("the guest's own objects removed", DEADLINE, || async {
        let have = own_objects(&client, &g).await;
        (have == (vec![], vec![]))
            .then_some(())
            .ok_or_else(|| format!("{have:?}"))
    })
    .await;
}

/// A VM naming an IP set that exists but is not Ready waits (Synced True,
/// `ReferenceNotReady`), and goes on as soon as the set is Ready: woken
/// by the set's watch, since its own resync (1h here) is far past the
/// deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_waiting_for_an_ip_set_goes_on_once_the_set_is_ready() {
    let env = Env::start("fw-wait").await;
    let ns = env.ns.name().to_owned();
    // Two entries that are one once stored: refused, so not Ready.
    let twice = json!([{"cidr": "10.7.0.1"}, {"cidr": "10.7.0.1/32"}]);
    env.apply(&ip_set("later", twice)).await;
    wait(&ns, "later", "refused", |s: &ProxmoxIPSet| {
        let synced = s.status.as_ref().and_then(|s| {
            s.conditions.iter().find(|c| {
                c.type_ == "Synced" && c.status == provider_proxmox::api::ConditionStatus::False
            })
        });
        synced
            .map(|_| ())
            .ok_or_else(|| "not refused yet".to_owned())
    })
    .await;
    let mut vm = manifests::vm(
        "patient",
        json!({
            "node": "pve",
            "memory": "1Gi",
            "firewall": {"rules": [
                {"type": "in", "action": "ACCEPT", "source": {"ipSet": "later"}},
            ]},
        }),
    );
    vm["metadata"]["annotations"] = json!({"crossplane.io/poll-interval": "1h"});
    env.apply(&vm).await;
    let waiting = env.wait_synced_reason("patient", "ReferenceNotReady").await;
    assert_eq!(
        waiting.status,
        provider_proxmox::api::ConditionStatus::True,
        "waiting for a set that exists is not a failure: {:?}",
        waiting.message
    );
    assert!(
        waiting
            .message
            .as_deref()
            .unwrap_or_default()
            .contains(&format!("ProxmoxIPSet {ns}/later is not Ready")),
        "{:?}",
        waiting.message
    );
    env.apply(&ip_set("later", json!([{"cidr": "10.7.0.1"}])))
        .await;
    let _: ProxmoxIPSet = wait_ready(&ns, "later").await;
    let _ = env.wait_ready("patient").await;
}
