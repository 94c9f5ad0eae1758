//! Cluster resource mappings (`/cluster/mapping/pci`, `/cluster/mapping/usb`)
//! and what a start does with them: the mapping must have an entry for the
//! VM's node, and a running VM holds its PCI device until it stops, as
//! qemu-server's PCI reservations do.

use crate::common::{Sim, start_with};

pub const GPU_ON_PVE: &str = "node=pve,path=0000:01:00.0,id=10de:2204";

pub async fn create_mapping(sim: &Sim, kind: &str, id: &str, map: &[&str]) {
    let mut params = vec![("id", id)];
    params.extend(map.iter().map(|m| ("map", *m)));
    let resp = sim.post(&format!("/cluster/mapping/{kind}"), &params).await;
    assert_eq!(resp.status, 200, "{}", resp.body);
}

/// The PCI mapping IDs a token sees.
async fn list_as(sim: &Sim, token: &str) -> Vec<String> {
    let req = sim
        .client
        .get(sim.url("/cluster/mapping/pci"))
        .header("Authorization", format!("PVEAPIToken={token}"));
    sim.send(req)
        .await
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn mappings_are_created_listed_checked_and_deleted() {
    let sim = start_with(|c| {
        c.api_tokens.push("ci@pve!prov=s3cret".parse().unwrap());
        c.api_tokens.push("ops@pve!ro=s3cret".parse().unwrap());
        c.grants
            .push("ci@pve:/mapping/pci/gpu:PVEMappingUser".parse().unwrap());
        c.grants
            .push("ops@pve:/mapping:PVEMappingAdmin".parse().unwrap());
    })
    .await;
    create_mapping(
        &sim,
        "pci",
        "gpu",
        &[
            GPU_ON_PVE,
            "node=pve2,path=0000:02:00.0;0000:03:00.0,id=10de:2204",
        ],
    )
    .await;
    create_mapping(
        &sim,
        "pci",
        "nic",
        &["node=pve,path=0000:04:00.0,id=8086:1533"],
    )
    .await;
    create_mapping(&sim, "usb", "token", &["node=pve,id=1050:0407"]).await;

    let gpu = sim.get("/cluster/mapping/pci/gpu").await.data();
    assert_eq!(gpu["id"], "gpu");
    assert_eq!(gpu["map"].as_array().map(Vec::len), Some(2));

    let dup = sim
        .post(
            "/cluster/mapping/pci",
            &[("id", "gpu"), ("map", GPU_ON_PVE)],
        )
        .await;
    assert_eq!(dup.status, 500);
    assert_eq!(dup.reason, "pci ID 'gpu' already defined");

    let no_id = sim
        .post(
            "/cluster/mapping/pci",
            &[("id", "bad"), ("map", "node=pve,path=0000:01:00.0")],
        )
        .await;
    assert_eq!(no_id.status, 400);
    assert!(
        no_id.errors()["map[0]"]
            .as_str()
            .unwrap()
            .contains("map[0].id: property is missing and it is not optional"),
        "{}",
        no_id.body
    );
    let bad_usb = sim
        .post(
            "/cluster/mapping/usb",
            &[("id", "bad"), ("map", "node=pve,id=1050:0407,path=usb1")],
        )
        .await;
    assert!(
        bad_usb.errors()["map[0]"]
            .as_str()
            .unwrap()
            .contains("map[0].path: value does not match the regex pattern"),
        "{}",
        bad_usb.body
    );

    // Each token sees the mappings it may use, audit or modify.
    assert_eq!(list_as(&sim, "ci@pve!prov=s3cret").await, ["gpu"]);
    assert_eq!(list_as(&sim, "ops@pve!ro=s3cret").await, ["gpu", "nic"]);
    let create_as_user = sim
        .send(
            sim.client
                .post(sim.url("/cluster/mapping/pci"))
                .header("Authorization", "PVEAPIToken=ci@pve!prov=s3cret")
                .form(&[("id", "mine"), ("map", GPU_ON_PVE)]),
        )
        .await;
    assert_eq!(create_as_user.status, 403);
    assert_eq!(
        create_as_user.reason,
        "Permission check failed (/mapping/pci, Mapping.Modify)"
    );

    let gone = sim.delete("/cluster/mapping/pci/nic", &[]).await;
    assert_eq!(gone.status, 200, "{}", gone.body);
    assert_eq!(
        sim.get("/cluster/mapping/pci/nic").await.reason,
        "mapping 'nic' not found"
    );
}

#[tokio::test]
async fn a_start_needs_the_mapping_on_its_node_and_a_free_device() {
    let sim = start_with(|c| c.nodes = vec!["pve".into(), "pve2".into()]).await;
    create_mapping(&sim, "pci", "gpu", &[GPU_ON_PVE]).await;
    create_mapping(&sim, "usb", "token", &["node=pve2,id=1050:0407"]).await;
    for vmid in ["100", "101"] {
        sim.create_plain(
            vmid,
            &[("hostpci0", "mapping=gpu,pcie=1"), ("machine", "q35")],
        )
        .await;
    }

    sim.power("100", "start").await;
    let upid = sim
        .post("/nodes/pve/qemu/101/status/start", &[])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&upid).await["exitstatus"],
        "PCI device '0000:01:00.0' already in use by VMID '100'"
    );
    // Once 100 stops, its reservation is stale and 101 takes the device.
    sim.power("100", "stop").await;
    sim.power("101", "start").await;

    // A USB mapping without an entry for this node: the start fails.
    sim.create_plain("102", &[("usb0", "mapping=token")]).await;
    let upid = sim
        .post("/nodes/pve/qemu/102/status/start", &[])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&upid).await["exitstatus"],
        "USB device mapping not found for 'token'"
    );
    // A mapping removed under a stopped VM: its next start says so.
    assert_eq!(
        sim.delete("/cluster/mapping/pci/gpu", &[]).await.status,
        200
    );
    let upid = sim
        .post("/nodes/pve/qemu/100/status/start", &[])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&upid).await["exitstatus"],
        "PCI device mapping not found for 'gpu'"
    );
}
