//! `/cluster/sdn` over HTTP, as pve-network answers: zones, VNets and
//! subnets written pending, listed with `pending=1` as `pending_config`
//! shows them, committed by the apply and its `reloadnetworkall` task;
//! pve-network's checks and the privileges.

use serde_json::Value;

use crate::common::{start, start_with};

const ZONES: &str = "/cluster/sdn/zones";
const VNETS: &str = "/cluster/sdn/vnets";

fn find<'a>(list: &'a Value, key: &str, id: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|o| o[key] == id)
        .unwrap_or_else(|| panic!("no {id} in {list}"))
}

#[tokio::test]
async fn writes_are_pending_until_the_apply_task() {
    let sim = start().await;
    let ok = |r: crate::common::Resp| assert_eq!(r.status, 200, "{}", r.body);
    ok(sim
        .post(
            ZONES,
            &[("zone", "lan"), ("type", "vlan"), ("bridge", "vmbr0")],
        )
        .await);
    ok(sim
        .post(
            VNETS,
            &[
                ("vnet", "web"),
                ("zone", "lan"),
                ("tag", "10"),
                ("alias", "web net"),
            ],
        )
        .await);
    ok(sim
        .post(
            "/cluster/sdn/vnets/web/subnets",
            &[
                ("subnet", "10.0.0.0/24"),
                ("type", "subnet"),
                ("gateway", "10.0.0.1"),
                (
                    "dhcp-range",
                    "start-address=10.0.0.10,end-address=10.0.0.20",
                ),
            ],
        )
        .await);
    let pending = sim.get_q(VNETS, &[("pending", "1")]).await.data();
    let web = find(&pending, "vnet", "web");
    assert_eq!(web["state"], "new");
    assert_eq!(web["pending"]["tag"], 10);
    assert_eq!(web["pending"]["zone"], "lan");
    let running = sim.get_q(VNETS, &[("running", "1")]).await.data();
    assert_eq!(running, serde_json::json!([]), "nothing running yet");
    let subnets = sim
        .get_q("/cluster/sdn/vnets/web/subnets", &[("pending", "1")])
        .await
        .data();
    let s = find(&subnets, "subnet", "lan-10.0.0.0-24");
    assert_eq!(
        (s["cidr"].clone(), s["state"].clone()),
        ("10.0.0.0/24".into(), "new".into())
    );

    let upid = sim.put("/cluster/sdn", &[]).await.data();
    let upid = upid.as_str().unwrap().to_owned();
    assert!(upid.contains(":reloadnetworkall:"), "{upid}");
    let pending = sim.get_q(VNETS, &[("pending", "1")]).await.data();
    assert!(
        find(&pending, "vnet", "web").get("state").is_none(),
        "committed within the request: {pending}"
    );
    sim.task_ok(&upid).await;

    // A change, then a deletion: pending until applied again.
    ok(sim
        .put("/cluster/sdn/vnets/web", &[("alias", "renamed")])
        .await);
    let pending = sim.get_q(VNETS, &[("pending", "1")]).await.data();
    let web = find(&pending, "vnet", "web");
    assert_eq!(
        (web["state"].clone(), web["alias"].clone()),
        ("changed".into(), "web net".into())
    );
    assert_eq!(web["pending"]["alias"], "renamed");
    ok(sim
        .put("/cluster/sdn/vnets/web", &[("delete", "alias")])
        .await);
    let pending = sim.get_q(VNETS, &[("pending", "1")]).await.data();
    assert_eq!(find(&pending, "vnet", "web")["pending"]["alias"], "deleted");
    let refused = sim.delete("/cluster/sdn/vnets/web", &[]).await;
    assert_eq!(
        refused.errors()["vnet"],
        "Can't delete vnet if subnets exists"
    );
    ok(sim
        .delete("/cluster/sdn/vnets/web/subnets/lan-10.0.0.0-24", &[])
        .await);
    ok(sim.delete("/cluster/sdn/vnets/web", &[]).await);
    let pending = sim.get_q(VNETS, &[("pending", "1")]).await.data();
    assert_eq!(find(&pending, "vnet", "web")["state"], "deleted");
    let upid = sim.put("/cluster/sdn", &[]).await.data();
    sim.task_ok(upid.as_str().unwrap()).await;
    let after = sim.get_q(VNETS, &[("pending", "1")]).await.data();
    assert_eq!(after, serde_json::json!([]));
}

#[tokio::test]
async fn pve_networks_checks() {
    let sim = start().await;
    let post = |path: &'static str, params: Vec<(&'static str, &'static str)>| {
        let sim = &sim;
        async move { sim.post(path, &params).await }
    };
    assert_eq!(
        post(ZONES, vec![("zone", "v1"), ("type", "vlan")])
            .await
            .errors()["bridge"],
        "property is missing"
    );
    assert!(
        post(ZONES, vec![("zone", "e1"), ("type", "evpn")])
            .await
            .errors()["type"]
            .as_str()
            .unwrap()
            .contains("does not model EVPN")
    );
    assert_eq!(
        post(ZONES, vec![("zone", "x1"), ("type", "vxlan")])
            .await
            .errors()["peers"],
        "must have exactly one of peers / fabric defined"
    );
    let long = post(ZONES, vec![("zone", "toolongid"), ("type", "simple")]).await;
    assert_eq!(long.status, 400, "{}", long.body);
    assert_eq!(
        post(ZONES, vec![("zone", "s1"), ("type", "simple")])
            .await
            .status,
        200
    );
    assert_eq!(
        post(
            ZONES,
            vec![("zone", "l1"), ("type", "vlan"), ("bridge", "vmbr0")]
        )
        .await
        .status,
        200
    );
    assert_eq!(
        post(VNETS, vec![("vnet", "a"), ("zone", "s1")])
            .await
            .status,
        400,
        "an ID of one character"
    );
    assert_eq!(
        post(VNETS, vec![("vnet", "a1"), ("zone", "s1"), ("tag", "5")])
            .await
            .errors()["tag"],
        "vlan tag is not allowed on simple zone"
    );
    assert_eq!(
        post(VNETS, vec![("vnet", "a1"), ("zone", "l1")])
            .await
            .errors()["tag"],
        "missing vlan tag"
    );
    assert_eq!(
        post(VNETS, vec![("vnet", "a1"), ("zone", "nozone")])
            .await
            .errors()["zone"],
        "zone 'nozone' doesn't exist"
    );
    assert_eq!(
        post(VNETS, vec![("vnet", "a1"), ("zone", "l1"), ("tag", "7")])
            .await
            .status,
        200
    );
    assert_eq!(
        post(VNETS, vec![("vnet", "a2"), ("zone", "l1"), ("tag", "7")])
            .await
            .errors()["tag"],
        "tag 7 already exist in vnet a1"
    );
    let subnet =
        |params: Vec<(&'static str, &'static str)>| post("/cluster/sdn/vnets/a1/subnets", params);
    assert_eq!(
        subnet(vec![
            ("subnet", "10.1.0.0/24"),
            ("type", "subnet"),
            ("gateway", "10.2.0.1")
        ])
        .await
        .errors()["gateway"],
        "10.2.0.1 is not in subnet 10.1.0.0/24"
    );
    let backwards = subnet(vec![
        ("subnet", "10.1.0.0/24"),
        ("type", "subnet"),
        (
            "dhcp-range",
            "start-address=10.1.0.50,end-address=10.1.0.20",
        ),
    ])
    .await;
    assert!(
        backwards.errors()["dhcp-range"]
            .as_str()
            .is_some_and(|e| e.contains("greater than")),
        "{}",
        backwards.body
    );
    assert_eq!(
        subnet(vec![("subnet", "10.1.0.0/24"), ("type", "subnet")])
            .await
            .status,
        200
    );
    let zone_in_use = sim.delete("/cluster/sdn/zones/l1", &[]).await;
    assert_eq!(zone_in_use.status, 500);
    assert!(
        zone_in_use.body.contains("zone l1 is used by vnet a1"),
        "{}",
        zone_in_use.body
    );
}

#[tokio::test]
async fn sdn_needs_sdn_allocate() {
    let sim = start_with(|c| {
        c.api_tokens.push("ro@pve!audit=s3cret".parse().unwrap());
        c.grants.push("ro@pve!audit:/:PVEAuditor".parse().unwrap());
        c.grants.push("ro@pve:/:PVEAuditor".parse().unwrap());
    })
    .await;
    let as_auditor = |method: reqwest::Method, path: &str| {
        sim.client
            .request(method, sim.url(path))
            .header("Authorization", "PVEAPIToken=ro@pve!audit=s3cret")
    };
    let read = sim.send(as_auditor(reqwest::Method::GET, ZONES)).await;
    assert_eq!(read.status, 200, "SDN.Audit reads: {}", read.body);
    let write = sim
        .send(as_auditor(reqwest::Method::POST, ZONES).form(&[("zone", "z1"), ("type", "simple")]))
        .await;
    assert_eq!(write.status, 403, "{}", write.body);
    let apply = sim
        .send(as_auditor(reqwest::Method::PUT, "/cluster/sdn"))
        .await;
    assert_eq!(apply.status, 403, "{}", apply.body);
}
