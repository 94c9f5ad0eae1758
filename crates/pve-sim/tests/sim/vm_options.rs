//! The VM options a provider needs for UEFI, TPM, console and devices are
//! accepted, validated and echoed like PVE does, with `Mapping.Use` for
//! mapped devices and `protection` guarding destroy.

use crate::common::start_with;

#[tokio::test]
async fn uefi_tpm_console_and_device_options_round_trip() {
    let sim = start_with(|_| {}).await;
    sim.post_ok(
        "/nodes/pve/qemu",
        &[
            ("vmid", "100"),
            ("bios", "ovmf"),
            ("machine", "q35,viommu=virtio"),
            ("efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=1"),
            ("tpmstate0", "local-lvm:1,version=v2.0"),
            ("serial0", "socket"),
            ("vga", "serial0"),
            ("cpu", "host,flags=+aes;-pcid"),
            ("numa", "1"),
            ("balloon", "0"),
            ("hotplug", "network,disk,usb,memory,cpu"),
            ("rng0", "source=/dev/urandom,max_bytes=1024,period=1000"),
            ("hostpci0", "mapping=gpu,pcie=1"),
            ("usb0", "mapping=token"),
            ("onboot", "1"),
            ("startup", "order=2,up=30"),
            ("protection", "1"),
            ("cicustom", "user=local:snippets/user.yaml"),
        ],
    )
    .await;
    let c = sim.config("100").await;
    assert_eq!(c["bios"], "ovmf");
    assert_eq!(c["machine"], "q35,viommu=virtio");
    assert_eq!(
        c["efidisk0"],
        "local-lvm:vm-100-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M"
    );
    assert_eq!(
        c["tpmstate0"],
        "local-lvm:vm-100-disk-1,size=4M,version=v2.0"
    );
    assert_eq!(c["cpu"], "host,flags=+aes;-pcid");
    assert_eq!(c["numa"], 1);
    assert_eq!(c["balloon"], 0);
    assert_eq!(c["hostpci0"], "mapping=gpu,pcie=1");
    assert_eq!(c["usb0"], "mapping=token");
    assert_eq!(c["onboot"], 1);
    let content = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "100")])
        .await
        .data();
    assert_eq!(content.as_array().unwrap().len(), 2, "{content}");

    let bad = sim
        .put(
            "/nodes/pve/qemu/100/config",
            &[("machine", "q35,viommu=amd")],
        )
        .await;
    assert!(bad.errors()["machine"].as_str().unwrap().contains("viommu"));
    let bad = sim
        .put(
            "/nodes/pve/qemu/100/config",
            &[("tpmstate0", "local-lvm:1,version=v3")],
        )
        .await;
    assert!(bad.errors().get("tpmstate0").is_some());

    // protection: destroy refused until it is cleared.
    let refused = sim.delete("/nodes/pve/qemu/100", &[]).await;
    assert_eq!(
        refused.reason,
        "can't remove VM 100 - protection mode enabled"
    );
    sim.put("/nodes/pve/qemu/100/config", &[("delete", "protection")])
        .await
        .data();
    let upid = sim.delete("/nodes/pve/qemu/100", &[]).await.upid();
    sim.task_ok(&upid).await;
    let left = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "100")])
        .await
        .data();
    assert_eq!(left, serde_json::json!([]));
}

#[tokio::test]
async fn mapped_devices_need_mapping_use_and_iso_cdroms_are_kept() {
    let sim = start_with(|c| {
        c.api_tokens.push("ci@pve!prov=s3cret".parse().unwrap());
        c.grants.push(
            "ci@pve:/:PVEVMAdmin,PVEDatastoreUser,PVESDNUser"
                .parse()
                .unwrap(),
        );
        c.grants
            .push("ci@pve:/mapping/pci/gpu:Mapping.Use".parse().unwrap());
    })
    .await;
    let ci = |m: reqwest::Method, p: &str| {
        sim.client
            .request(m, sim.url(p))
            .header("Authorization", "PVEAPIToken=ci@pve!prov=s3cret")
    };
    sim.create_plain("100", &[]).await;
    let ok = sim
        .send(
            ci(reqwest::Method::PUT, "/nodes/pve/qemu/100/config")
                .form(&[("hostpci0", "mapping=gpu")]),
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let other = sim
        .send(
            ci(reqwest::Method::PUT, "/nodes/pve/qemu/100/config")
                .form(&[("hostpci1", "mapping=nic")]),
        )
        .await;
    assert_eq!(other.status, 403);
    assert_eq!(
        other.reason,
        "Permission check failed (/mapping/pci/nic, Mapping.Use)"
    );
    let raw = sim
        .send(
            ci(reqwest::Method::PUT, "/nodes/pve/qemu/100/config")
                .form(&[("hostpci1", "0000:01:00.0")]),
        )
        .await;
    assert_eq!(
        raw.reason,
        "only root can set 'hostpci1' config for non-mapped devices"
    );
    let usb = sim
        .send(
            ci(reqwest::Method::PUT, "/nodes/pve/qemu/100/config")
                .form(&[("usb0", "host=1234:5678")]),
        )
        .await;
    assert_eq!(
        usb.reason,
        "only root can set 'usb0' config for real devices"
    );

    let missing = sim
        .put(
            "/nodes/pve/qemu/100/config",
            &[("ide2", "local:iso/nope.iso,media=cdrom")],
        )
        .await;
    assert_eq!(missing.reason, "volume local:iso/nope.iso does not exist");
    let no_media = sim
        .put(
            "/nodes/pve/qemu/100/config",
            &[("ide2", "local:iso/nope.iso")],
        )
        .await;
    assert_eq!(
        no_media.errors()["ide2"],
        "explicit 'media=cdrom' is required for iso images"
    );
}
