//! What a running VM takes at once and what waits for its next start (the
//! VM's own `hotplug` features), the per-VM CPU flags, serial ports by
//! privilege, Windows machine pinning, and templates with linked clones:
//! on LVM-thin PVE destroys the template anyway (its clones are
//! independent thin snapshots), on a directory storage the clone's qcow2
//! is backed by the base, which PVE then refuses to destroy.

use serde_json::json;

use crate::common::start_with;
use crate::conformance::config::item_of;
use crate::mapping::{GPU_ON_PVE, create_mapping};

#[tokio::test]
async fn a_running_vm_takes_what_it_can_hot_plug() {
    let sim = start_with(|_| {}).await;
    create_mapping(&sim, "pci", "gpu", &[GPU_ON_PVE]).await;
    create_mapping(&sim, "usb", "token", &["node=pve,id=1050:0407"]).await;
    sim.create_plain("100", &[("ostype", "l26"), ("balloon", "512")])
        .await;
    sim.power("100", "start").await;
    sim.post_ok(
        "/nodes/pve/qemu/100/config",
        &[
            ("usb0", "mapping=token"),
            ("balloon", "256"),
            ("protection", "1"),
            ("startup", "order=1,up=10"),
            ("hostpci0", "mapping=gpu"),
            ("serial0", "socket"),
            ("vga", "serial0"),
            ("bios", "ovmf"),
            ("efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=1"),
        ],
    )
    .await;
    let current = sim
        .get_q("/nodes/pve/qemu/100/config", &[("current", "1")])
        .await
        .data();
    for (key, value) in [
        ("usb0", json!("mapping=token")),
        ("balloon", json!(256)),
        ("protection", json!(1)),
        ("startup", json!("order=1,up=10")),
    ] {
        assert_eq!(current[key], value, "{key} applies at once");
    }
    for key in ["hostpci0", "serial0", "vga", "bios", "efidisk0"] {
        assert!(current.get(key).is_none(), "{key} waits: {current}");
        assert!(
            item_of(&sim, "100", key).await.get("pending").is_some(),
            "{key} is pending"
        );
    }
    // Removing the balloon device, and anything once hot-plug is off, waits.
    sim.post_ok(
        "/nodes/pve/qemu/100/config",
        &[("balloon", "0"), ("hotplug", "0")],
    )
    .await;
    assert_eq!(item_of(&sim, "100", "balloon").await["pending"], 0);
    sim.post_ok(
        "/nodes/pve/qemu/100/config",
        &[("net1", "virtio,bridge=vmbr0")],
    )
    .await;
    assert!(
        item_of(&sim, "100", "net1").await.get("pending").is_some(),
        "hotplug=0 keeps a new NIC for the next start"
    );
    // A start applies everything.
    sim.power("100", "stop").await;
    sim.power("100", "start").await;
    let c = sim.config("100").await;
    assert_eq!(
        (c["bios"].as_str(), c["vga"].as_str()),
        (Some("ovmf"), Some("serial0"))
    );
    assert!(
        c["efidisk0"]
            .as_str()
            .unwrap()
            .starts_with("local-lvm:vm-100-disk-")
    );
}

#[tokio::test]
async fn vm_cpu_flags_serial_devices_and_windows_machines() {
    let sim = start_with(|c| {
        c.api_tokens.push("ci@pve!prov=s3cret".parse().unwrap());
        c.grants
            .push("ci@pve:/:PVEVMAdmin,PVEDatastoreUser".parse().unwrap());
    })
    .await;
    sim.create_plain("100", &[]).await;
    let avx = sim
        .put("/nodes/pve/qemu/100/config", &[("cpu", "host,flags=+avx2")])
        .await;
    assert!(
        avx.errors()["cpu"]
            .as_str()
            .unwrap()
            .contains("VM-specific CPU flags must be a subset of: aes, amd-no-ssb"),
        "{}",
        avx.body
    );
    let unsigned = sim
        .put("/nodes/pve/qemu/100/config", &[("cpu", "host,flags=aes")])
        .await;
    assert_eq!(unsigned.status, 400);
    let ok = sim
        .put(
            "/nodes/pve/qemu/100/config",
            &[("cpu", "host,flags=+aes;-pcid;+nested-virt,phys-bits=host")],
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);

    let ci = |p: &str| {
        sim.client
            .put(sim.url(p))
            .header("Authorization", "PVEAPIToken=ci@pve!prov=s3cret")
    };
    let socket = sim
        .send(ci("/nodes/pve/qemu/100/config").form(&[("serial0", "socket")]))
        .await;
    assert_eq!(socket.status, 200, "{}", socket.body);
    let device = sim
        .send(ci("/nodes/pve/qemu/100/config").form(&[("serial1", "/dev/ttyS0")]))
        .await;
    assert_eq!(
        device.reason,
        "only root can modify 'serial1' config for real devices"
    );

    sim.post_ok(
        "/nodes/pve/qemu",
        &[("vmid", "101"), ("ostype", "win11"), ("machine", "q35")],
    )
    .await;
    assert_eq!(sim.config("101").await["machine"], "pc-q35-9.2+pve1");
    sim.post_ok("/nodes/pve/qemu", &[("vmid", "102"), ("ostype", "win10")])
        .await;
    assert_eq!(sim.config("102").await["machine"], "pc-i440fx-9.2+pve1");
    sim.post_ok(
        "/nodes/pve/qemu",
        &[("vmid", "103"), ("ostype", "l26"), ("machine", "q35")],
    )
    .await;
    assert_eq!(sim.config("103").await["machine"], "q35");
}

#[tokio::test]
async fn an_lvm_thin_template_goes_and_its_linked_clone_stays() {
    let sim = start_with(|_| {}).await;
    sim.post_ok(
        "/nodes/pve/qemu/9000/clone",
        &[("newid", "101"), ("name", "linked")],
    )
    .await;
    let clone_disk = sim.config("101").await["scsi0"].clone();
    assert!(
        clone_disk
            .as_str()
            .unwrap()
            .starts_with("local-lvm:vm-101-disk-0,"),
        "a thin snapshot under its own name: {clone_disk}"
    );
    let upid = sim.delete("/nodes/pve/qemu/9000", &[]).await.upid();
    sim.task_ok(&upid).await;
    assert_eq!(sim.config("101").await["scsi0"], clone_disk);
    sim.power("101", "start").await;
}

#[tokio::test]
async fn a_directory_template_is_pinned_by_its_linked_clones() {
    let state = pve_sim::state::file::StateFile::parse(
        "storages:
  - {id: local-lvm, type: lvmthin, content: [images, rootdir], size: 100G}
  - {id: dirimg, type: dir, path: /srv/images, content: [images], size: 100G}
guests: []
",
    )
    .unwrap();
    let sim = start_with(|c| c.state = Some(state)).await;
    sim.post_ok(
        "/nodes/pve/qemu",
        &[
            ("vmid", "100"),
            ("scsi0", "dirimg:1"),
            ("scsi1", "dirimg:1"),
        ],
    )
    .await;
    let c = sim.config("100").await;
    assert!(
        c["scsi0"]
            .as_str()
            .unwrap()
            .starts_with("dirimg:100/vm-100-disk-0.qcow2")
    );
    assert!(
        c["scsi1"]
            .as_str()
            .unwrap()
            .starts_with("dirimg:100/vm-100-disk-1.qcow2"),
        "two disks, two names: {c}"
    );
    let upid = sim.post_ok("/nodes/pve/qemu/100/template", &[]).await;
    sim.task_ok(&upid).await;
    let base = "dirimg:100/base-100-disk-0.qcow2";
    assert!(
        sim.config("100").await["scsi0"]
            .as_str()
            .unwrap()
            .starts_with(base)
    );

    let upid = sim
        .post_ok(
            "/nodes/pve/qemu/100/clone",
            &[("newid", "101"), ("name", "linked")],
        )
        .await;
    sim.task_ok(&upid).await;
    let volid = format!("{base}/101/vm-101-disk-0.qcow2");
    let clone = sim.config("101").await;
    assert!(
        clone["scsi0"].as_str().unwrap().starts_with(&volid),
        "the clone names its base: {clone}"
    );
    let content = sim
        .get_q("/nodes/pve/storage/dirimg/content", &[("vmid", "101")])
        .await
        .data();
    let entry = content
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["volid"] == volid.as_str())
        .unwrap_or_else(|| panic!("{volid} in {content}"))
        .clone();
    assert_eq!(entry["parent"], "../100/base-100-disk-0.qcow2");

    let upid = sim.delete("/nodes/pve/qemu/100", &[]).await.upid();
    assert_eq!(
        sim.wait_task(&upid).await["exitstatus"],
        format!("base volume '{base}' is still in use by linked cloned")
    );
    let upid = sim.delete("/nodes/pve/qemu/101", &[]).await.upid();
    sim.task_ok(&upid).await;
    let upid = sim.delete("/nodes/pve/qemu/100", &[]).await.upid();
    sim.task_ok(&upid).await;
}
