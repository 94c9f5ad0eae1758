//! HA resources and rules (PVE 9) or groups (PVE 8): the simulated CRM
//! starts requested guests, power calls become `hastart`/`hastop`, and a
//! control-API migration moves a guest as HA or a load balancer would.

use reqwest::Method;
use serde_json::json;

use crate::common::start_with;

#[tokio::test]
async fn ha_resources_rules_and_crm_actions() {
    let sim = start_with(|c| c.nodes = vec!["pve".into(), "pve2".into()]).await;
    sim.create_plain("100", &[]).await;
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("state", "started")],
    )
    .await
    .data();
    sim.eventually("HA starts the VM", || async {
        let s = sim.get("/nodes/pve/qemu/100/status/current").await.data();
        (s["status"] == "running").then_some(())
    })
    .await;
    let res = sim.get("/cluster/ha/resources").await.data();
    assert_eq!(res[0]["sid"], "vm:100");
    assert_eq!(res[0]["state"], "started");
    let vm = sim
        .get_q("/cluster/resources", &[("type", "vm")])
        .await
        .data();
    let entry = vm
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["vmid"] == 100)
        .unwrap();
    assert_eq!(entry["hastate"], "started");
    let status = sim.get("/cluster/ha/status/current").await.data();
    assert!(
        status
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["sid"] == "vm:100")
    );
    let dup = sim.post("/cluster/ha/resources", &[("sid", "100")]).await;
    assert_eq!(
        dup.reason,
        "create resource failed: resource ID 'vm:100' already defined"
    );

    // A stop on an HA-managed VM asks the CRM.
    let upid = sim
        .post("/nodes/pve/qemu/100/status/stop", &[])
        .await
        .upid();
    assert!(upid.contains(":hastop:100:"), "{upid}");
    sim.task_ok(&upid).await;
    assert_eq!(
        sim.task_log(&upid).await[0],
        "Requesting HA stop for VM 100"
    );
    sim.eventually("HA stops the VM", || async {
        let s = sim.get("/nodes/pve/qemu/100/status/current").await.data();
        (s["status"] == "stopped").then_some(())
    })
    .await;

    // Rules (PVE 9) need managed resources and existing nodes.
    let rule = sim
        .post(
            "/cluster/ha/rules",
            &[
                ("rule", "keep-on-pve2"),
                ("type", "node-affinity"),
                ("resources", "vm:100"),
                ("nodes", "pve2:2"),
            ],
        )
        .await;
    assert_eq!(rule.status, 200, "{}", rule.body);
    let bad = sim
        .post(
            "/cluster/ha/rules",
            &[
                ("rule", "r2"),
                ("type", "node-affinity"),
                ("resources", "vm:101"),
                ("nodes", "pve2"),
            ],
        )
        .await;
    assert_eq!(bad.reason, "cannot use unmanaged resource(s) vm:101.");
    assert_eq!(
        sim.get("/cluster/ha/rules").await.data()[0]["rule"],
        "keep-on-pve2"
    );
    let groups = sim.get("/cluster/ha/groups").await;
    assert_eq!(
        groups.reason,
        "cannot index groups: ha groups have been migrated to rules"
    );

    // A migrate of an HA-managed VM is a request; the CRM migrates.
    let upid = sim
        .post("/nodes/pve/qemu/100/migrate", &[("target", "pve2")])
        .await
        .upid();
    assert!(upid.contains(":hamigrate:100:"), "{upid}");
    sim.eventually("HA migrates the VM", || async {
        (sim.get("/nodes/pve2/qemu/100/config").await.status == 200).then_some(())
    })
    .await;
    sim.delete("/cluster/ha/resources/vm:100", &[]).await.data();
    assert_eq!(sim.get("/cluster/ha/rules").await.data(), json!([]));

    // The load balancer moves a VM through the control API.
    sim.create_plain("101", &[]).await;
    let r = sim
        .control(
            Method::POST,
            "/migrate",
            Some(json!({"vmid": 101, "node": "pve2"})),
        )
        .await;
    let upid = r["upid"].as_str().unwrap().to_owned();
    assert!(upid.ends_with(":qmigrate:101:root@pam:"), "{upid}");
    sim.task_ok(&upid).await;
    assert_eq!(sim.get("/nodes/pve2/qemu/101/config").await.status, 200);
}

#[tokio::test]
async fn pve8_has_groups_and_no_rules() {
    let sim = start_with(|c| c.pve_version = 8).await;
    assert_eq!(sim.get("/version").await.data()["release"], "8.4");
    sim.post("/cluster/ha/groups", &[("group", "g1"), ("nodes", "pve")])
        .await
        .data();
    assert_eq!(sim.get("/cluster/ha/groups").await.data()[0]["group"], "g1");
    sim.create_plain("100", &[]).await;
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("group", "g1"), ("state", "stopped")],
    )
    .await
    .data();
    assert_eq!(
        sim.get("/cluster/ha/resources/vm:100").await.data()["group"],
        "g1"
    );
    let rules = sim.get("/cluster/ha/rules").await;
    assert_eq!(rules.status, 501);
}

#[tokio::test]
async fn rules_are_updated_and_purged_with_their_resource() {
    let sim = start_with(|c| c.nodes = vec!["pve".into(), "pve2".into()]).await;
    sim.create_plain("100", &[]).await;
    let status = sim.get("/nodes/pve/qemu/100/status/current").await.data();
    assert_eq!(status["ha"], json!({"managed": 0}));
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("state", "stopped")],
    )
    .await
    .data();
    let status = sim.get("/nodes/pve/qemu/100/status/current").await.data();
    assert_eq!(status["ha"]["managed"], 1);
    let rule = [
        ("rule", "keep"),
        ("type", "node-affinity"),
        ("resources", "vm:100"),
        ("nodes", "pve"),
    ];
    sim.post("/cluster/ha/rules", &rule).await.data();
    sim.put(
        "/cluster/ha/rules/keep",
        &[
            ("type", "node-affinity"),
            ("nodes", "pve,pve2"),
            ("strict", "1"),
        ],
    )
    .await
    .data();
    let got = sim.get("/cluster/ha/rules/keep").await.data();
    assert_eq!(got["nodes"], "pve,pve2");
    let unknown_node = sim
        .put(
            "/cluster/ha/rules/keep",
            &[("type", "node-affinity"), ("nodes", "pve9")],
        )
        .await;
    assert_eq!(unknown_node.status, 500, "{}", unknown_node.body);
    let missing = sim
        .put("/cluster/ha/rules/nope", &[("type", "node-affinity")])
        .await;
    assert_eq!(
        missing.reason,
        "update HA rules failed: HA rule 'nope' does not exist"
    );

    // An HA-managed VM is destroyed only with purge, which takes it (and
    // the rule left without resources) out of HA.
    let refused = sim.delete("/nodes/pve/qemu/100", &[]).await;
    assert_eq!(
        refused.reason,
        "unable to remove VM 100 - used in HA resources and purge parameter not set."
    );
    let upid = sim
        .delete("/nodes/pve/qemu/100", &[("purge", "1")])
        .await
        .upid();
    sim.task_ok(&upid).await;
    assert_eq!(sim.get("/cluster/ha/resources").await.data(), json!([]));
    assert_eq!(sim.get("/cluster/ha/rules").await.data(), json!([]));
}

#[tokio::test]
async fn pve8_groups_are_updated_and_kept_while_used() {
    let sim = start_with(|c| {
        c.pve_version = 8;
        c.nodes = vec!["pve".into(), "pve2".into()];
    })
    .await;
    sim.post("/cluster/ha/groups", &[("group", "g1"), ("nodes", "pve")])
        .await
        .data();
    sim.put(
        "/cluster/ha/groups/g1",
        &[("nodes", "pve,pve2"), ("restricted", "1")],
    )
    .await
    .data();
    let group = &sim.get("/cluster/ha/groups").await.data()[0];
    assert_eq!(
        (&group["nodes"], &group["restricted"]),
        (&json!("pve,pve2"), &json!(1))
    );
    let required = sim
        .put("/cluster/ha/groups/g1", &[("delete", "nodes")])
        .await;
    assert_eq!(
        required.reason,
        "update ha group failed: unable to delete required option 'nodes'"
    );
    sim.create_plain("100", &[]).await;
    sim.post(
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("group", "g1"), ("state", "stopped")],
    )
    .await
    .data();
    let used = sim.delete("/cluster/ha/groups/g1", &[]).await;
    assert_eq!(
        used.reason,
        "delete ha group failed: ha group is used by service 'vm:100'"
    );
    sim.delete("/cluster/ha/resources/vm:100", &[]).await.data();
    sim.delete("/cluster/ha/groups/g1", &[]).await.data();
    assert_eq!(sim.get("/cluster/ha/groups").await.data(), json!([]));
}
