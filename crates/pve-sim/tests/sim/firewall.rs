//! The cluster firewall's security groups and IP sets over HTTP, as
//! pve-firewall answers: rule positions, `moveto`, the list digest, the
//! checks of a group's rules, entries stored clean, and the privileges.

use serde_json::Value;

use crate::common::{Sim, start, start_with, urlencode};

/// A synchronous POST that must succeed.
async fn post(sim: &Sim, path: &str, params: &[(&str, &str)]) {
    sim.post(path, params).await.data();
}

const GROUPS: &str = "/cluster/firewall/groups";

fn rules(sim_rules: &Value) -> Vec<String> {
    sim_rules
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}:{}:{}",
                r["pos"],
                r["dport"].as_str().unwrap_or("-"),
                r["enable"]
            )
        })
        .collect()
}

async fn listed(sim: &Sim, group: &str) -> Value {
    sim.get(&format!("{GROUPS}/{group}")).await.data()
}

fn digest(list: &Value) -> String {
    list[0]["digest"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn rules_go_first_move_by_position_and_refuse_a_stale_digest() {
    let sim = start().await;
    post(&sim, GROUPS, &[("group", "web"), ("comment", "c")]).await;
    let again = sim.post(GROUPS, &[("group", "web")]).await;
    assert_eq!(
        again.errors()["group"],
        "Security group 'web' already exists"
    );
    let path = format!("{GROUPS}/web");
    for port in ["22", "80"] {
        let rule = [
            ("type", "in"),
            ("action", "ACCEPT"),
            ("proto", "tcp"),
            ("dport", port),
        ];
        post(&sim, &path, &rule).await;
    }
    post(
        &sim,
        &path,
        &[("type", "in"), ("action", "DROP"), ("enable", "1")],
    )
    .await;
    // Each new rule went first; without `enable` a rule is disabled.
    let list = listed(&sim, "web").await;
    assert_eq!(rules(&list), ["0:-:1", "1:80:0", "2:22:0"]);
    let old = digest(&list);
    // moveto 3 (past the end) puts the first rule last, and ignores the
    // other arguments.
    sim.put(
        &format!("{path}/0"),
        &[("moveto", "3"), ("dport", "9"), ("digest", &old)],
    )
    .await
    .data();
    assert_eq!(
        rules(&listed(&sim, "web").await),
        ["0:80:0", "1:22:0", "2:-:1"]
    );
    // The list changed: the old digest is refused, by a change and a delete.
    let stale = sim
        .put(&format!("{path}/1"), &[("enable", "1"), ("digest", &old)])
        .await;
    assert_eq!(stale.status, 500, "{}", stale.body);
    assert!(
        stale.reason.contains("detected modified configuration"),
        "{}",
        stale.reason
    );
    let stale = sim.delete(&format!("{path}/1"), &[("digest", &old)]).await;
    assert_eq!(stale.status, 500);
    // moveto 1 from 2: before the rule at 1, counted before the move.
    let now = digest(&listed(&sim, "web").await);
    sim.put(&format!("{path}/2"), &[("moveto", "1"), ("digest", &now)])
        .await
        .data();
    assert_eq!(
        rules(&listed(&sim, "web").await),
        ["0:80:0", "1:-:1", "2:22:0"]
    );
    // A change with `delete` drops properties; `type` cannot go.
    let now = digest(&listed(&sim, "web").await);
    sim.put(
        &format!("{path}/0"),
        &[("enable", "1"), ("delete", "dport,proto"), ("digest", &now)],
    )
    .await
    .data();
    assert_eq!(rules(&listed(&sim, "web").await)[0], "0:-:1");
    let refused = sim.put(&format!("{path}/0"), &[("delete", "type")]).await;
    assert_eq!(
        refused.errors()["delete"],
        "unable to delete required property 'type'"
    );
    let beyond = sim.get(&format!("{path}/7")).await;
    assert_eq!(beyond.status, 500);
    assert!(beyond.reason.contains("no rule at position 7"));
    // A group with rules is not deleted.
    let full = sim.delete(&path, &[]).await;
    assert_eq!(full.status, 500);
    assert!(full.reason.contains("is not empty"), "{}", full.reason);
    for _ in 0..3 {
        sim.delete(&format!("{path}/0"), &[]).await.data();
    }
    sim.delete(&path, &[]).await.data();
    assert_eq!(sim.get(GROUPS).await.data(), serde_json::json!([]));
}

#[tokio::test]
async fn a_groups_rules_are_checked_as_pve_checks_them() {
    let sim = start().await;
    post(&sim, GROUPS, &[("group", "g1")]).await;
    let path = format!("{GROUPS}/g1");
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: &[Case] = &[
        (
            &[("type", "group"), ("action", "other")],
            "type",
            "invalid rule type 'group' for rule_env 'group'",
        ),
        (
            &[("type", "in"), ("action", "ALLOW")],
            "action",
            "unknown action 'ALLOW'",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("dport", "22")],
            "proto",
            "missing property - 'dport' requires this property",
        ),
        (
            &[
                ("type", "in"),
                ("action", "ACCEPT"),
                ("proto", "icmp"),
                ("sport", "1"),
            ],
            "sport",
            "protocol 'icmp' does not support ports",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("source", "+nosuch")],
            "source",
            "no such ipset 'nosuch'",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("iface", "net0")],
            "type",
            "parameter -i not allowed for this rule type",
        ),
        (
            &[("type", "forward"), ("action", "REJECT")],
            "action",
            "cannot define REJECT rules on forward chain",
        ),
    ];
    for (params, key, message) in cases {
        let resp = sim.post(&path, params).await;
        assert_eq!(resp.errors()[*key], *message, "{params:?}");
    }
    post(&sim, "/cluster/firewall/ipset", &[("name", "web")]).await;
    post(
        &sim,
        &path,
        &[("type", "in"), ("action", "ACCEPT"), ("source", "+web")],
    )
    .await;
    post(
        &sim,
        &path,
        &[("type", "out"), ("action", "DROP"), ("dest", "10.0.0.0/8")],
    )
    .await;
    let list = listed(&sim, "g1").await;
    assert_eq!(list[0]["ipversion"], 4, "recorded, as verify_rule does");
    assert!(list[1].get("ipversion").is_none());
    let bad_name = sim.post(GROUPS, &[("group", "1web")]).await;
    assert_eq!(bad_name.status, 400);
    let long = sim.post(GROUPS, &[("group", "a-name-of-19-chars-")]).await;
    assert_eq!(long.status, 400);
}

#[tokio::test]
async fn ip_set_entries_are_stored_clean_and_checked() {
    let sim = start().await;
    let sets = "/cluster/firewall/ipset";
    post(&sim, sets, &[("name", "office"), ("comment", "c")]).await;
    let path = format!("{sets}/office");
    post(&sim, &path, &[("cidr", "10.1.2.3/8")]).await;
    post(
        &sim,
        &path,
        &[("cidr", "10.9.9.9/32"), ("nomatch", "1"), ("comment", "x")],
    )
    .await;
    let list = sim.get(&path).await.data();
    let cidrs: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["cidr"].as_str().unwrap())
        .collect();
    assert_eq!(
        cidrs,
        ["10.9.9.9", "10.0.0.0/8"],
        "clean, the new one first"
    );
    assert_eq!(list[0]["nomatch"], 1);
    let dup = sim.post(&path, &[("cidr", "10.0.0.0/8")]).await;
    assert_eq!(dup.errors()["cidr"], "address '10.0.0.0/8' already exists");
    let zero = sim.post(&path, &[("cidr", "10.0.0.0/0")]).await;
    assert_eq!(
        zero.errors()["cidr"],
        "a zero prefix is not allowed in ipset entries"
    );
    let alias = sim.post(&path, &[("cidr", "office")]).await;
    assert_eq!(alias.status, 500);
    // Entry changes check the digest.
    let old = list[0]["digest"].as_str().unwrap().to_owned();
    let entry = format!("{path}/{}", urlencode("10.0.0.0/8"));
    sim.put(&entry, &[("nomatch", "1"), ("digest", &old)])
        .await
        .data();
    let stale = sim.delete(&entry, &[("digest", &old)]).await;
    assert_eq!(stale.status, 500);
    // A set with entries goes only with force.
    assert_eq!(sim.delete(&path, &[]).await.status, 500);
    sim.delete(&path, &[("force", "1")]).await.data();
    assert_eq!(sim.get(sets).await.data(), serde_json::json!([]));
}

#[tokio::test]
async fn cluster_firewall_objects_need_sys_modify_on_the_root() {
    let sim = start_with(|c| {
        c.api_tokens.push("ro@pve!audit=s3cret".parse().unwrap());
        c.grants.push("ro@pve:/:PVEAuditor".parse().unwrap());
        c.grants.push("ro@pve!audit:/:PVEAuditor".parse().unwrap());
    })
    .await;
    let as_auditor = |method: reqwest::Method, path: &str| {
        sim.client
            .request(method, sim.url(path))
            .header("Authorization", "PVEAPIToken=ro@pve!audit=s3cret")
    };
    let read = sim.send(as_auditor(reqwest::Method::GET, GROUPS)).await;
    assert_eq!(read.status, 200, "Sys.Audit reads: {}", read.body);
    let write = sim
        .send(as_auditor(reqwest::Method::POST, GROUPS).form(&[("group", "web")]))
        .await;
    assert_eq!(write.status, 403, "{}", write.body);
}

#[tokio::test]
async fn a_guests_firewall_has_options_and_rules_and_goes_with_the_guest() {
    let sim = start().await;
    sim.create_plain("100", &[]).await;
    let fw = "/nodes/pve/qemu/100/firewall";
    let opts = sim.get(&format!("{fw}/options")).await.data();
    assert_eq!(
        opts.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["digest"]
    );
    sim.put(
        &format!("{fw}/options"),
        &[("enable", "1"), ("policy_in", "DROP"), ("ndp", "0")],
    )
    .await
    .data();
    let opts = sim.get(&format!("{fw}/options")).await.data();
    assert_eq!(opts["enable"], 1);
    assert_eq!(opts["ndp"], 0);
    assert_eq!(opts["policy_in"], "DROP");
    // `delete` removes; a stale digest is refused.
    let old = opts["digest"].as_str().unwrap().to_owned();
    sim.put(
        &format!("{fw}/options"),
        &[("delete", "ndp"), ("digest", &old)],
    )
    .await
    .data();
    let stale = sim
        .put(&format!("{fw}/options"), &[("dhcp", "1"), ("digest", &old)])
        .await;
    assert_eq!(stale.status, 500);
    let bad = sim
        .put(&format!("{fw}/options"), &[("delete", "nosuch")])
        .await;
    assert_eq!(bad.errors()["delete"], "no such option 'nosuch'");
    assert!(
        sim.get(&format!("{fw}/options"))
            .await
            .data()
            .get("ndp")
            .is_none()
    );
    // Rules: a group (not looked up, as PVE), an interface, a cluster set.
    post(&sim, "/cluster/firewall/ipset", &[("name", "web")]).await;
    let rules_path = format!("{fw}/rules");
    post(
        &sim,
        &rules_path,
        &[("type", "group"), ("action", "webservers"), ("enable", "1")],
    )
    .await;
    post(
        &sim,
        &rules_path,
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("proto", "tcp"),
            ("dport", "22"),
            ("source", "+web"),
            ("iface", "net0"),
        ],
    )
    .await;
    for (params, key) in [
        (&[("type", "forward"), ("action", "ACCEPT")][..], "type"),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("iface", "eth0")][..],
            "iface",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("source", "+db")][..],
            "source",
        ),
    ] {
        let resp = sim.post(&rules_path, params).await;
        assert_eq!(resp.status, 400, "{params:?}");
        assert!(
            resp.errors().get(key).is_some(),
            "{params:?}: {}",
            resp.body
        );
    }
    let list = sim.get(&rules_path).await.data();
    assert_eq!(list[0]["source"], "+web");
    assert_eq!(list[0]["enable"], 0);
    assert_eq!(list[1]["type"], "group");
    let d = digest(&list);
    sim.put(
        &format!("{rules_path}/1"),
        &[("moveto", "0"), ("digest", &d)],
    )
    .await
    .data();
    let list = sim.get(&rules_path).await.data();
    assert_eq!(list[0]["action"], "webservers");
    let stale = sim
        .delete(&format!("{rules_path}/0"), &[("digest", &d)])
        .await;
    assert_eq!(stale.status, 500);
    // The VM's firewall goes with the VM.
    let upid = sim.delete("/nodes/pve/qemu/100", &[]).await.data();
    sim.wait_task(upid.as_str().unwrap()).await;
    let gone = sim.get(&rules_path).await;
    assert_eq!(gone.status, 500, "{}", gone.body);
}

#[tokio::test]
async fn a_guests_own_aliases_and_ip_sets_are_kept_and_named_by_its_rules() {
    let sim = start().await;
    sim.create_plain("100", &[]).await;
    let fw = "/nodes/pve/lxc/100/firewall";
    // A container's path does not reach a VM.
    assert_eq!(sim.get(&format!("{fw}/aliases")).await.status, 500);
    let fw = "/nodes/pve/qemu/100/firewall";
    let aliases = format!("{fw}/aliases");
    post(&sim, &aliases, &[("name", "GW"), ("cidr", "10.0.0.1/32")]).await;
    let taken = sim
        .post(&aliases, &[("name", "gw"), ("cidr", "10.0.0.2")])
        .await;
    assert_eq!(
        taken.errors()["name"],
        "alias 'gw' already exists",
        "case-blind"
    );
    let bad = sim
        .post(&aliases, &[("name", "lan"), ("cidr", "10.0.0.0/33")])
        .await;
    assert!(bad.errors().get("cidr").is_some(), "{}", bad.body);
    let list = sim.get(&aliases).await.data();
    assert_eq!(
        (&list[0]["name"], &list[0]["cidr"]),
        (&"GW".into(), &"10.0.0.1".into())
    );
    let d = digest(&list);
    sim.put(
        &format!("{aliases}/gw"),
        &[("cidr", "10.0.0.254"), ("comment", "c"), ("digest", &d)],
    )
    .await
    .data();
    let stale = sim
        .delete(&format!("{aliases}/gw"), &[("digest", &d)])
        .await;
    assert_eq!(stale.status, 500, "a stale digest is refused");
    // The guest's own set: created, entries stored clean, guarded by
    // the digest, apart from the cluster's.
    let sets = format!("{fw}/ipset");
    post(&sim, &sets, &[("name", "peers")]).await;
    let set = format!("{sets}/peers");
    post(&sim, &set, &[("cidr", "10.1.2.3/16"), ("nomatch", "1")]).await;
    let entries = sim.get(&set).await.data();
    assert_eq!(
        (&entries[0]["cidr"], &entries[0]["nomatch"]),
        (&"10.1.0.0/16".into(), &1.into())
    );
    assert_eq!(
        sim.get("/cluster/firewall/ipset").await.data(),
        serde_json::json!([])
    );
    // Rules may name them, scoped or not; an unknown one is refused.
    let rules = format!("{fw}/rules");
    post(
        &sim,
        &rules,
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("source", "+guest/peers"),
            ("dest", "guest/gw"),
        ],
    )
    .await;
    for (key, value) in [("source", "+guest/nosuch"), ("dest", "guest/nosuch")] {
        let resp = sim
            .post(
                &rules,
                &[("type", "in"), ("action", "ACCEPT"), (key, value)],
            )
            .await;
        assert_eq!(resp.status, 400, "{value}: {}", resp.body);
    }
    // Removal: the set with force, the alias by name.
    assert_eq!(sim.delete(&set, &[]).await.status, 500, "not empty");
    sim.delete(&set, &[("force", "1")]).await.data();
    sim.delete(&format!("{aliases}/gw"), &[]).await.data();
    assert_eq!(sim.get(&aliases).await.data(), serde_json::json!([]));
}

#[tokio::test]
async fn a_guests_own_objects_need_vm_config_network() {
    let sim = start_with(|c| {
        c.api_tokens.push("ro@pve!audit=s3cret".parse().unwrap());
        c.grants.push("ro@pve:/:PVEAuditor".parse().unwrap());
        c.grants.push("ro@pve!audit:/:PVEAuditor".parse().unwrap());
    })
    .await;
    sim.create_plain("100", &[]).await;
    let as_auditor = |method: reqwest::Method, path: &str| {
        sim.client
            .request(method, sim.url(path))
            .header("Authorization", "PVEAPIToken=ro@pve!audit=s3cret")
    };
    for path in [
        "/nodes/pve/qemu/100/firewall/aliases",
        "/nodes/pve/qemu/100/firewall/ipset",
    ] {
        let read = sim.send(as_auditor(reqwest::Method::GET, path)).await;
        assert_eq!(read.status, 200, "VM.Audit reads {path}: {}", read.body);
        let form: &[(&str, &str)] = if path.ends_with("aliases") {
            &[("name", "gw"), ("cidr", "10.0.0.1")]
        } else {
            &[("name", "peers")]
        };
        let write = sim
            .send(as_auditor(reqwest::Method::POST, path).form(form))
            .await;
        assert_eq!(write.status, 403, "{path}: {}", write.body);
    }
}
