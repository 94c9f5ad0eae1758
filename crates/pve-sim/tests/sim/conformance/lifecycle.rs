//! Power, guest agent, template conversion, resize and destroy.

use serde_json::json;

use crate::common::*;

/// Until its guest has booted a running VM has no agent to answer. The
/// guests here boot for 10^7 s × 0.01 (over a day): the boot cannot end
/// while the test looks, however slow the machine (the test's own
/// deadline is 30 s).
#[tokio::test]
async fn a_booting_guest_has_no_agent_yet() {
    let sim =
        start_with(|c| c.durations.guest_boot = std::time::Duration::from_secs(10_000_000)).await;
    sim.create_plain("100", &[("agent", "1")]).await;
    sim.power("100", "start").await;
    let booting = sim
        .get("/nodes/pve/qemu/100/agent/network-get-interfaces")
        .await;
    assert_eq!(
        (booting.status, booting.reason.as_str()),
        (500, "QEMU guest agent is not running")
    );
    let again = sim
        .post("/nodes/pve/qemu/100/status/start", &[])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&again).await["exitstatus"],
        "VM 100 already running"
    );
}

#[tokio::test]
async fn start_boot_agent_and_stop() {
    let sim = start().await;
    sim.create_plain(
        "100",
        &[
            ("agent", "1"),
            ("ipconfig0", "ip=10.0.10.123/24,gw=10.0.10.1"),
        ],
    )
    .await;
    sim.create_plain("101", &[]).await;
    let agent = "/nodes/pve/qemu/100/agent/network-get-interfaces";

    let stopped = sim.get(agent).await;
    assert_eq!(
        (stopped.status, stopped.reason.as_str()),
        (500, "VM 100 is not running")
    );
    let no_agent = sim
        .get("/nodes/pve/qemu/101/agent/network-get-interfaces")
        .await;
    assert_eq!(no_agent.reason, "No QEMU guest agent configured");

    sim.power("100", "start").await;
    let data = sim
        .eventually("the guest agent", || async {
            let r = sim.get(agent).await;
            (r.status == 200).then(|| r.data())
        })
        .await;
    let ifaces = data["result"].as_array().unwrap();
    assert_eq!(ifaces[0]["name"], "lo");
    let eth0 = &ifaces[1];
    let mac = sim.config("100").await["net0"]
        .as_str()
        .unwrap()
        .split(['=', ','])
        .nth(1)
        .unwrap()
        .to_lowercase();
    assert_eq!(eth0["hardware-address"], mac.as_str());
    assert_eq!(
        eth0["ip-addresses"][0],
        json!({"ip-address-type": "ipv4", "ip-address": "10.0.10.123", "prefix": 24})
    );

    let stop = sim
        .post("/nodes/pve/qemu/100/status/stop", &[])
        .await
        .upid();
    sim.task_ok(&stop).await;
    assert_eq!(
        sim.get("/nodes/pve/qemu/100/status/current").await.data()["status"],
        "stopped"
    );
    let stop_again = sim
        .post("/nodes/pve/qemu/100/status/stop", &[])
        .await
        .upid();
    sim.task_ok(&stop_again).await;
}

#[tokio::test]
async fn dhcp_guests_get_documentation_addresses() {
    let sim = start().await;
    sim.create_plain("102", &[("agent", "1")]).await;
    sim.power("102", "start").await;
    let data = sim
        .eventually("the guest agent", || async {
            let r = sim
                .get("/nodes/pve/qemu/102/agent/network-get-interfaces")
                .await;
            (r.status == 200).then(|| r.data())
        })
        .await;
    let ip = data["result"][1]["ip-addresses"][0]["ip-address"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        ip.starts_with("192.0.2."),
        "TEST-NET-1 only, never a routable host: {ip}"
    );
}

#[tokio::test]
async fn shutdown_timeout_semantics() {
    let sim = start().await;
    sim.create_plain("103", &[]).await;
    // Not running: OK at once.
    sim.power("103", "shutdown").await;
    sim.power("103", "start").await;
    let too_short = sim
        .post("/nodes/pve/qemu/103/status/shutdown", &[("timeout", "1")])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&too_short).await["exitstatus"],
        "VM quit/powerdown failed - got timeout"
    );
    assert_eq!(
        sim.get("/nodes/pve/qemu/103/status/current").await.data()["status"],
        "running"
    );
    let forced = sim
        .post(
            "/nodes/pve/qemu/103/status/shutdown",
            &[("timeout", "1"), ("forceStop", "1")],
        )
        .await
        .upid();
    sim.task_ok(&forced).await;
    assert!(
        sim.task_log(&forced)
            .await
            .contains(&"VM still running - terminating now with SIGTERM".to_owned())
    );
    assert_eq!(
        sim.get("/nodes/pve/qemu/103/status/current").await.data()["status"],
        "stopped"
    );
    let reboot = sim.post("/nodes/pve/qemu/103/status/reboot", &[]).await;
    assert_eq!(
        (reboot.status, reboot.reason.as_str()),
        (500, "VM 103 not running")
    );
    // A stopped VM shuts down gracefully within the default timeout once booted.
    sim.power("103", "start").await;
    sim.power("103", "reboot").await;
    sim.power("103", "shutdown").await;
    // Power calls check the VM's existence in the task.
    let ghost = sim
        .post("/nodes/pve/qemu/555/status/start", &[])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&ghost).await["exitstatus"],
        "Configuration file 'nodes/pve/qemu-server/555.conf' does not exist"
    );
}

#[tokio::test]
async fn template_conversion_and_resize() {
    let sim = start().await;
    sim.create_plain("104", &[("scsi0", "local-lvm:2")]).await;

    let grow = sim
        .put(
            "/nodes/pve/qemu/104/resize",
            &[("disk", "scsi0"), ("size", "+1G")],
        )
        .await
        .upid();
    assert!(grow.contains(":resize:104:"));
    sim.task_ok(&grow).await;
    assert_eq!(
        sim.config("104").await["scsi0"],
        "local-lvm:vm-104-disk-0,size=3G"
    );
    let log = sim.task_log(&grow).await;
    assert!(
        log[0].contains("changed from 2.00 GiB (512 extents) to 3.00 GiB (768 extents)"),
        "{log:?}"
    );
    let absolute = sim
        .put(
            "/nodes/pve/qemu/104/resize",
            &[("disk", "scsi0"), ("size", "5G")],
        )
        .await
        .upid();
    sim.task_ok(&absolute).await;
    assert_eq!(
        sim.config("104").await["scsi0"],
        "local-lvm:vm-104-disk-0,size=5G"
    );
    let shrink = sim
        .put(
            "/nodes/pve/qemu/104/resize",
            &[("disk", "scsi0"), ("size", "1G")],
        )
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&shrink).await["exitstatus"],
        "shrinking disks is not supported"
    );
    let nodisk = sim
        .put(
            "/nodes/pve/qemu/104/resize",
            &[("disk", "scsi5"), ("size", "+1G")],
        )
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&nodisk).await["exitstatus"],
        "disk 'scsi5' does not exist"
    );
    let bad = sim
        .put(
            "/nodes/pve/qemu/104/resize",
            &[("disk", "scsi0"), ("size", "-1G")],
        )
        .await;
    assert_eq!(
        bad.errors()["size"],
        "value does not match the regex pattern"
    );

    sim.post_ok("/nodes/pve/qemu/104/template", &[]).await;
    let config = sim.config("104").await;
    assert_eq!(config["template"], 1);
    assert_eq!(config["scsi0"], "local-lvm:base-104-disk-0,size=5G");
    let twice = sim.post("/nodes/pve/qemu/104/template", &[]).await;
    assert_eq!(
        (twice.status, twice.reason.as_str()),
        (500, "you can't convert a template to a template")
    );
    let start = sim
        .post("/nodes/pve/qemu/104/status/start", &[])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&start).await["exitstatus"],
        "you can't start a vm if it's a template"
    );
}

#[tokio::test]
async fn destroy_rules() {
    let sim = start().await;
    sim.create_plain("105", &[("scsi0", "local-lvm:1"), ("protection", "1")])
        .await;
    let protected = sim.delete("/nodes/pve/qemu/105", &[]).await;
    assert_eq!(
        (protected.status, protected.reason.as_str()),
        (500, "can't remove VM 105 - protection mode enabled")
    );
    assert_eq!(
        sim.put("/nodes/pve/qemu/105/config", &[("protection", "0")])
            .await
            .status,
        200
    );

    sim.power("105", "start").await;
    let running = sim.delete("/nodes/pve/qemu/105", &[]).await;
    assert_eq!(
        (running.status, running.reason.as_str()),
        (500, "VM 105 is running - destroy failed")
    );
    sim.power("105", "stop").await;

    let upid = sim
        .delete(
            "/nodes/pve/qemu/105",
            &[("purge", "1"), ("destroy-unreferenced-disks", "1")],
        )
        .await
        .upid();
    assert!(upid.contains(":qmdestroy:105:"));
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert!(
        log.contains(&"  Logical volume \"vm-105-disk-0\" successfully removed.".to_owned()),
        "{log:?}"
    );
    assert!(log.contains(&"purging VM 105 from related configurations..".to_owned()));
    assert_eq!(sim.get("/nodes/pve/qemu/105/config").await.status, 500);
    assert_eq!(
        sim.get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "105")])
            .await
            .data(),
        json!([])
    );
    let gone = sim.delete("/nodes/pve/qemu/105", &[]).await;
    assert_eq!(
        gone.reason,
        "Configuration file 'nodes/pve/qemu-server/105.conf' does not exist"
    );
    let bool_check = sim.delete("/nodes/pve/qemu/105", &[("purge", "yes")]).await;
    assert_eq!(
        bool_check.errors()["purge"],
        "type check ('boolean') failed - got 'yes'"
    );
}
