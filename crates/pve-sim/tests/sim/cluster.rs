//! `/cluster/status`, `/cluster/options` (`next-id`), node usage that follows
//! the running guests, and resource pools.

use crate::common::{form, start, start_with};

#[tokio::test]
async fn cluster_status_lists_the_cluster_and_its_nodes() {
    let sim = start_with(|c| c.nodes = vec!["pve".into(), "pve2".into()]).await;
    let status = sim.get("/cluster/status").await.data();
    let items = status.as_array().unwrap();
    assert_eq!(items[0]["type"], "cluster");
    assert_eq!(items[0]["quorate"], 1);
    assert_eq!(items[0]["nodes"], 2);
    let nodes: Vec<_> = items.iter().filter(|i| i["type"] == "node").collect();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["name"], "pve");
    assert_eq!(nodes[0]["local"], 1);
    assert_eq!(nodes[1]["local"], 0);
    assert_eq!(nodes[1]["online"], 1);
    assert_eq!(nodes[1]["id"], "node/pve2");

    // A single node has no cluster entry and node ID 0.
    let single = start().await;
    let status = single.get("/cluster/status").await.data();
    assert_eq!(status.as_array().unwrap().len(), 1);
    assert_eq!(status[0]["nodeid"], 0);
}

#[tokio::test]
async fn next_id_range_bounds_nextid() {
    let sim = start().await;
    let put = sim
        .put("/cluster/options", &[("next-id", "lower=200,upper=202")])
        .await;
    assert_eq!(put.status, 200, "{}", put.body);
    let opts = sim.get("/cluster/options").await.data();
    assert_eq!(opts["next-id"]["lower"], "200");
    assert_eq!(opts["next-id"]["upper"], "202");
    assert_eq!(sim.get("/cluster/nextid").await.data(), "200");
    sim.create_plain("200", &[]).await;
    sim.create_plain("201", &[]).await;
    let full = sim.get("/cluster/nextid").await;
    assert_eq!(full.status, 500);
    assert_eq!(
        full.reason,
        "unable to get any free VMID in range [200, 202]"
    );
    let bad = sim.put("/cluster/options", &[("next-id", "lower=5")]).await;
    assert!(
        bad.errors()["next-id"]
            .as_str()
            .unwrap()
            .contains("minimum value of 100")
    );
    sim.put("/cluster/options", &[("delete", "next-id")])
        .await
        .data();
    assert_eq!(sim.get("/cluster/nextid").await.data(), "100");
}

#[tokio::test]
async fn node_memory_follows_running_guests_and_flags() {
    let sim = start_with(|c| {
        c.nodes = vec!["pve".into(), "pve2".into()];
        c.node_memory.insert("pve2".into(), 8 << 30);
        c.node_cpus.insert("pve2".into(), 4);
    })
    .await;
    let node = |all: &serde_json::Value, name: &str| {
        all.as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == name)
            .unwrap()
            .clone()
    };
    let before = sim
        .get_q("/cluster/resources", &[("type", "node")])
        .await
        .data();
    assert_eq!(node(&before, "pve2")["maxmem"], 8u64 << 30);
    assert_eq!(node(&before, "pve2")["maxcpu"], 4);
    assert_eq!(node(&before, "pve")["maxmem"], 64u64 << 30);
    sim.create_plain("100", &[("memory", "4096")]).await;
    sim.power("100", "start").await;
    let after = sim
        .get_q("/cluster/resources", &[("type", "node")])
        .await
        .data();
    let grown = node(&after, "pve")["mem"].as_u64().unwrap()
        - node(&before, "pve")["mem"].as_u64().unwrap();
    assert_eq!(grown, 4096 << 20);
    let status = sim.get("/nodes/pve/status").await.data();
    assert_eq!(status["memory"]["used"], node(&after, "pve")["mem"]);
    sim.power("100", "stop").await;
    let stopped = sim
        .get_q("/cluster/resources", &[("type", "node")])
        .await
        .data();
    assert_eq!(node(&stopped, "pve")["mem"], node(&before, "pve")["mem"]);
}

#[tokio::test]
async fn pools_hold_guests_and_refuse_deletion_while_not_empty() {
    let sim = start().await;
    sim.post("/pools", &[("poolid", "ci"), ("comment", "CI guests")])
        .await
        .data();
    let dup = sim.post("/pools", &[("poolid", "ci")]).await;
    assert_eq!(dup.reason, "create pool failed: pool 'ci' already exists");
    sim.create_plain("100", &[]).await;
    sim.put("/pools/ci", &[("vms", "100")]).await.data();
    let res = sim.get("/cluster/resources").await.data();
    let vm = res
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "qemu/100")
        .unwrap();
    assert_eq!(vm["pool"], "ci");
    assert!(
        res.as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == "/pool/ci")
    );
    let pool = sim.get("/pools/ci").await.data();
    assert_eq!(pool["members"][0]["vmid"], 100);
    assert_eq!(pool["members"][0]["id"], "qemu/100");
    assert_eq!(pool["members"][0]["type"], "qemu");
    assert_eq!(pool["members"][0]["node"], "pve");
    assert_eq!(pool["comment"], "CI guests");
    let busy = sim.delete("/pools/ci", &[]).await;
    assert_eq!(
        busy.reason,
        "delete pool failed: pool 'ci' is not empty (contains VM 100)"
    );
    sim.put("/pools/ci", &[("vms", "100"), ("delete", "1")])
        .await
        .data();
    sim.delete("/pools/ci", &[]).await.data();
    assert_eq!(sim.get("/pools").await.data(), serde_json::json!([]));
}

#[tokio::test]
async fn a_pool_acl_is_granted_read_and_goes_with_the_pool() {
    let sim = start_with(|c| {
        c.users.push("alice@pve:pw".parse().unwrap());
        c.api_tokens.push("ci@pve!pools=s".parse().unwrap());
        c.api_tokens.push("ci@pve!other=s".parse().unwrap());
        c.grants.push("ci@pve:/pool:PVEPoolAdmin".parse().unwrap());
        c.groups.push("devs".into());
    })
    .await;
    sim.post("/pools", &[("poolid", "team")]).await.data();
    let grant = |roles: &'static str, key: &'static str, who: &'static str| {
        let sim = &sim;
        async move {
            sim.put(
                "/access/acl",
                &[("path", "/pool/team"), ("roles", roles), (key, who)],
            )
            .await
        }
    };
    grant("PVEVMUser", "users", "alice@pve").await.data();
    grant("PVEAuditor", "groups", "devs").await.data();
    grant("PVEPoolUser", "tokens", "ci@pve!other").await.data();
    let unknown_role = grant("Bogus", "users", "alice@pve").await;
    assert_eq!(
        unknown_role.reason,
        "ACL update failed: role 'Bogus' does not exist"
    );
    let unknown_user = grant("PVEVMUser", "users", "bob@pve").await;
    assert_eq!(
        unknown_user.reason,
        "ACL update failed: user 'bob@pve' does not exist"
    );
    let unknown_group = grant("PVEVMUser", "groups", "ops").await;
    assert_eq!(
        unknown_group.reason,
        "ACL update failed: group 'ops' does not exist"
    );
    let nobody = sim
        .put(
            "/access/acl",
            &[("path", "/pool/team"), ("roles", "PVEVMUser")],
        )
        .await;
    assert!(nobody.errors()["users"].is_string());
    sim.put(
        "/access/acl",
        &[
            ("path", "/pool/team"),
            ("roles", "PVEVMUser"),
            ("users", "alice@pve"),
            ("propagate", "0"),
        ],
    )
    .await
    .data();
    let acl = sim.get("/access/acl").await.data();
    let on_pool: Vec<_> = acl
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["path"] == "/pool/team")
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["ugid"].as_str().unwrap().to_owned(),
                e["roleid"].as_str().unwrap().to_owned(),
                e["propagate"].as_u64().unwrap(),
            )
        })
        .collect();
    let own = |t: &str, u: &str, r: &str, p| (t.to_owned(), u.to_owned(), r.to_owned(), p);
    assert_eq!(
        on_pool,
        vec![
            own("user", "alice@pve", "PVEVMUser", 0),
            own("group", "devs", "PVEAuditor", 1),
            own("token", "ci@pve!other", "PVEPoolUser", 1),
        ]
    );
    // Pool.Allocate without Permissions.Modify hands out only what it has.
    let token = |method, path: &str| {
        sim.client
            .request(method, sim.url(path))
            .header("Authorization", "PVEAPIToken=ci@pve!pools=s")
    };
    let more = sim
        .send(token(reqwest::Method::PUT, "/access/acl").form(&form(&[
            ("path", "/pool/team"),
            ("roles", "PVEVMUser"),
            ("users", "alice@pve"),
        ])))
        .await;
    assert!(
        more.errors()["role"]
            .as_str()
            .unwrap()
            .contains("Permissions.Modify")
    );
    sim.send(token(reqwest::Method::PUT, "/access/acl").form(&form(&[
        ("path", "/pool/team"),
        ("roles", "PVEPoolUser"),
        ("users", "alice@pve"),
    ])))
    .await
    .data();
    let elsewhere = sim
        .send(token(reqwest::Method::PUT, "/access/acl").form(&form(&[
            ("path", "/vms/100"),
            ("roles", "PVEPoolUser"),
            ("users", "alice@pve"),
        ])))
        .await;
    assert_eq!(elsewhere.status, 403);
    sim.delete("/pools/team", &[]).await.data();
    let left = sim.get("/access/acl").await.data();
    assert!(
        !left
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["path"] == "/pool/team"),
        "{left}"
    );
}
