//! Error shapes and parameter validation as PVE 8.4/9.x answers them.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn unknown_paths_are_501_with_message() {
    let sim = start().await;
    let resp = sim.get("/nodes/pve/foo").await;
    assert_eq!(
        (resp.status, resp.reason.as_str()),
        (501, "Method 'GET /nodes/pve/foo' not implemented")
    );
    assert_eq!(
        resp.json(),
        json!({"data": null, "message": "Method 'GET /nodes/pve/foo' not implemented"})
    );
    let wrong_method = sim.put("/version", &[]).await;
    assert_eq!(wrong_method.status, 501);
    let format = sim
        .send(
            sim.client
                .get(format!("{}/api2/xml/version", sim.handle.base_url())),
        )
        .await;
    assert_eq!(
        (format.status, format.reason.as_str()),
        (501, "no such uri")
    );
    let body_on_get = sim
        .send(sim.req(reqwest::Method::GET, "/version").body("x=1"))
        .await;
    assert_eq!(
        (body_on_get.status, body_on_get.reason.as_str()),
        (501, "Unexpected content for method 'GET'")
    );
}

#[tokio::test]
async fn parameter_errors_are_400_per_parameter() {
    let sim = start().await;
    let resp = sim.get_q("/nodes/pve/qemu", &[("full", "true")]).await;
    assert_eq!(
        (resp.status, resp.reason.as_str()),
        (400, "Parameter verification failed.")
    );
    assert_eq!(
        resp.json(),
        json!({"data": null, "errors": {"full": "type check ('boolean') failed - got 'true'"}, "message": "Parameter verification failed.\n"})
    );
    let ok = sim.get_q("/nodes/pve/qemu", &[("full", "1")]).await;
    assert_eq!(ok.status, 200);

    let errs = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "abc"),
                ("bogus", "1"),
                ("cores", "0"),
                ("ostype", "dos"),
            ],
        )
        .await
        .errors();
    assert_eq!(errs["vmid"], "type check ('integer') failed - got 'abc'");
    assert_eq!(
        errs["bogus"],
        "property is not defined in schema and the schema does not allow additional properties"
    );
    assert_eq!(errs["cores"], "value must have a minimum value of 1");
    assert!(
        errs["ostype"]
            .as_str()
            .unwrap()
            .starts_with("value 'dos' does not have a value in the enumeration 'other, wxp,")
    );

    let missing = sim.post("/nodes/pve/qemu", &[("name", "x")]).await.errors();
    assert_eq!(
        missing,
        json!({"vmid": "property is missing and it is not optional"})
    );

    let small = sim
        .post("/nodes/pve/qemu", &[("vmid", "99")])
        .await
        .errors();
    assert_eq!(
        small["vmid"],
        "invalid format - value does not look like a valid VM ID\n"
    );

    let name = sim
        .post(
            "/nodes/pve/qemu",
            &[("vmid", "101"), ("name", "not_a_dns_name")],
        )
        .await
        .errors();
    assert_eq!(
        name["name"],
        "invalid format - value does not look like a valid DNS name\n"
    );

    let drive = sim
        .post(
            "/nodes/pve/qemu",
            &[("vmid", "101"), ("scsi0", "local-lvm:4,cache=fast")],
        )
        .await
        .errors();
    assert_eq!(
        drive["scsi0"],
        "invalid format - format error\nscsi0.cache: value 'fast' does not have a value in the enumeration 'none, writethrough, writeback, unsafe, directsync'\n"
    );
    let net = sim
        .post(
            "/nodes/pve/qemu",
            &[("vmid", "101"), ("net0", "bridge=vmbr0")],
        )
        .await
        .errors();
    assert_eq!(
        net["net0"],
        "invalid format - format error\nnet0.model: property is missing and it is not optional\n"
    );

    let path_vmid = sim.get("/nodes/pve/qemu/abc/config").await.errors();
    assert_eq!(
        path_vmid["vmid"],
        "type check ('integer') failed - got 'abc'"
    );
}

#[tokio::test]
async fn json_bodies_accept_json_booleans() {
    let sim = start().await;
    let body = json!({"newid": 9100, "full": true, "name": "from-json"});
    let resp = sim
        .send(
            sim.req(reqwest::Method::POST, "/nodes/pve/qemu/9000/clone")
                .json(&body),
        )
        .await;
    sim.task_ok(&resp.upid()).await;
    assert_eq!(sim.config("9100").await["name"], "from-json");
    let bad = json!({"newid": 9101, "full": "true"});
    let resp = sim
        .send(
            sim.req(reqwest::Method::POST, "/nodes/pve/qemu/9000/clone")
                .json(&bad),
        )
        .await;
    assert_eq!(
        resp.errors()["full"],
        "type check ('boolean') failed - got 'true'"
    );
}

#[tokio::test]
async fn sshkeys_must_be_strictly_percent_encoded_and_valid() {
    let sim = start().await;
    let key = ssh_key("me@example");
    // Space as '+' (form encoding) is not accepted: PVE wants %20.
    let plus = key.replace(' ', "+");
    let errs = sim
        .post("/nodes/pve/qemu", &[("vmid", "130"), ("sshkeys", &plus)])
        .await
        .errors();
    assert_eq!(
        errs["sshkeys"],
        format!("invalid format - invalid urlencoded string: {plus}\n")
    );

    let bad_key = urlencode("ssh-ed25519 notbase64 x");
    let resp = sim
        .post("/nodes/pve/qemu", &[("vmid", "130"), ("sshkeys", &bad_key)])
        .await;
    assert_eq!(
        (resp.status, resp.reason.as_str()),
        (500, "SSH public key validation error")
    );
    assert_eq!(resp.json()["message"], "SSH public key validation error\n");

    let two = format!("{key}\n{}", ssh_key("other"));
    let encoded = urlencode(&two);
    sim.create_plain("130", &[("sshkeys", &encoded)]).await;
    assert_eq!(
        sim.config("130").await["sshkeys"],
        encoded.as_str(),
        "sshkeys come back still encoded"
    );
}

#[tokio::test]
async fn unknown_node_fails_like_the_proxy_lookup() {
    let sim = start().await;
    let resp = sim.get("/nodes/nope/qemu").await;
    assert_eq!(resp.status, 500);
    assert_eq!(
        resp.reason,
        "hostname lookup 'nope' failed - failed to get address info for: nope: Name or service not known"
    );
}

#[tokio::test]
async fn nextid_is_a_string_and_reserves_nothing() {
    let sim = start().await;
    assert_eq!(
        sim.get("/cluster/nextid").await.json(),
        json!({"data": "100"})
    );
    assert_eq!(
        sim.get("/cluster/nextid").await.data(),
        "100",
        "nothing was reserved"
    );
    assert_eq!(
        sim.get_q("/cluster/nextid", &[("vmid", "123")])
            .await
            .data(),
        "123"
    );
    let taken = sim.get_q("/cluster/nextid", &[("vmid", "9000")]).await;
    assert_eq!(taken.errors(), json!({"vmid": "VM 9000 already exists"}));
    sim.create_plain("100", &[]).await;
    assert_eq!(sim.get("/cluster/nextid").await.data(), "101");
}

#[tokio::test]
async fn cluster_resources_lag_for_new_vms() {
    // A lag of 10^7 s × 0.01 (over a day): pvestatd cannot broadcast while
    // the test looks, however slow the machine (its deadline is 30 s).
    let sim =
        start_with(|c| c.durations.resources_lag = std::time::Duration::from_secs(10_000_000))
            .await;
    sim.create_plain("140", &[("tags", "b;a;b")]).await;
    let all = sim
        .get_q("/cluster/resources", &[("type", "vm")])
        .await
        .data();
    let vm = all
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == 140)
        .unwrap()
        .clone();
    assert_eq!(
        vm["status"], "unknown",
        "pvestatd has not broadcast yet: {vm}"
    );
    assert_eq!(vm["id"], "qemu/140");
    assert!(vm.get("name").is_none());
    assert_eq!(
        vm["tags"], "a;b",
        "tags are read live from the config, sorted and unique"
    );
    let template = all
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == 9000)
        .unwrap()
        .clone();
    // Seeded VMs existed before the simulator started: no lag for them.
    assert_eq!(
        (template["status"].as_str(), template["template"].as_i64()),
        (Some("stopped"), Some(1)),
        "{template}"
    );
    assert_eq!(template["name"], "ubuntu-24.04-cloudinit");
    assert_eq!(template["maxmem"], 2048_u64 << 20);
    let storages = sim
        .get_q("/cluster/resources", &[("type", "storage")])
        .await
        .data();
    assert!(
        storages
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == "storage/pve/local-lvm")
    );
}

#[tokio::test]
async fn several_nodes_share_one_vmid_space() {
    let sim = start_with(|c| c.nodes = vec!["pve".into(), "pve2".into()]).await;
    let nodes = sim.get("/nodes").await.data();
    assert_eq!(nodes.as_array().unwrap().len(), 2);
    let upid = sim
        .post(
            "/nodes/pve2/qemu",
            &[
                ("vmid", "100"),
                ("scsi0", &format!("local-lvm:0,import-from={UBUNTU}")),
            ],
        )
        .await
        .upid();
    assert!(
        upid.starts_with("UPID:pve2:"),
        "the UPID names the node that runs the task: {upid}"
    );
    sim.task_ok(&upid).await;
    assert_eq!(sim.get("/nodes/pve2/qemu").await.data()[0]["vmid"], 100);
    assert_eq!(
        sim.get("/nodes/pve2/qemu/9000/config").await.status,
        500,
        "the template lives on the first node"
    );
    let elsewhere = sim.get("/nodes/pve/qemu/100/config").await;
    assert_eq!(
        elsewhere.reason,
        "Configuration file 'nodes/pve/qemu-server/100.conf' does not exist"
    );
    let dup = sim.post("/nodes/pve/qemu", &[("vmid", "100")]).await;
    assert_eq!(
        dup.reason,
        "unable to create VM 100 - VM 100 already exists on node 'pve2'"
    );
    assert_eq!(sim.get("/cluster/nextid").await.data(), "101");
}
