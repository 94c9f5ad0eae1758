//! What a node cannot run is created and then refused at start, as Proxmox
//! does it: more vCPUs than the host has (qemu-server's
//! `config_to_command`), a bridge the node does not have
//! (`PVE::Network::tap_plug`), more memory than the host has (QEMU cannot
//! allocate it). `GET /nodes/{node}/network` lists the bridges.

use crate::common::start_with;

#[tokio::test]
async fn vms_the_node_cannot_run_are_created_and_refused_at_start() {
    let sim = start_with(|c| {
        c.node_cpus.insert("*".into(), 16);
    })
    .await;
    for (vmid, extra, error) in [
        (
            "101",
            vec![("sockets", "2"), ("cores", "9")],
            "MAX 16 vcpus allowed per VM on this node",
        ),
        (
            "102",
            vec![("net1", "virtio,bridge=vmbr9")],
            "bridge 'vmbr9' does not exist",
        ),
        (
            "103",
            vec![("memory", "70000000")],
            "start failed: QEMU exited with code 1",
        ),
    ] {
        let mut params = vec![("memory", "512")];
        params.extend(extra);
        sim.create_plain(vmid, &params).await;
        let upid = sim
            .post(&format!("/nodes/pve/qemu/{vmid}/status/start"), &[])
            .await
            .upid();
        let status = sim.wait_task(&upid).await;
        assert_eq!(status["exitstatus"], error, "VM {vmid}: {status}");
    }
    sim.create_plain("104", &[("sockets", "2"), ("cores", "8")])
        .await;
    sim.power("104", "start").await;
}

#[tokio::test]
async fn the_node_network_lists_its_bridges_by_type() {
    let sim = start_with(|_| {}).await;
    let names = |v: serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i["iface"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = sim.get("/nodes/pve/network").await.data();
    assert_eq!(names(all), ["eno1", "vmbr0"]);
    for filter in ["any_bridge", "any_local_bridge", "bridge"] {
        let bridges = sim
            .get_q("/nodes/pve/network", &[("type", filter)])
            .await
            .data();
        assert_eq!(names(bridges.clone()), ["vmbr0"], "{filter}");
        assert_eq!(bridges[0]["type"], "bridge");
    }
    let eth = sim
        .get_q("/nodes/pve/network", &[("type", "eth")])
        .await
        .data();
    assert_eq!(names(eth), ["eno1"]);
    let bad = sim.get_q("/nodes/pve/network", &[("type", "banana")]).await;
    assert_eq!(bad.status, 400, "{}", bad.body);
}
