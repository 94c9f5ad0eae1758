//! Clones: linked from a template by default, full on request.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn template_clones_linked_by_default() {
    let sim = start().await;
    let upid = sim
        .post(
            "/nodes/pve/qemu/9000/clone",
            &[("newid", "200"), ("name", "web-2")],
        )
        .await
        .upid();
    assert!(
        upid.contains(":qmclone:9000:"),
        "the task id is the source VM: {upid}"
    );
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert_eq!(log[0], "creating a clone of VM 9000 with ID 200");
    assert!(
        log.contains(&"create linked clone of drive scsi0 (local-lvm:base-9000-disk-0)".to_owned()),
        "{log:?}"
    );
    let config = sim.config("200").await;
    assert_eq!(config["name"], "web-2");
    assert_eq!(config["scsi0"], "local-lvm:vm-200-disk-0,size=3584M");
    assert_eq!(config["ide2"], "local-lvm:vm-200-cloudinit,media=cdrom");
    assert!(config.get("template").is_none());
    let template = sim.config("9000").await;
    assert_ne!(
        config["net0"], template["net0"],
        "a clone always gets a new MAC"
    );
    assert_ne!(config["smbios1"], template["smbios1"]);
    assert_ne!(config["vmgenid"], template["vmgenid"]);
    assert_eq!(config["agent"], template["agent"]);
}

#[tokio::test]
async fn full_clones_copy_with_progress() {
    let sim = start().await;
    let upid = sim
        .post_ok(
            "/nodes/pve/qemu/9000/clone",
            &[("newid", "201"), ("full", "1"), ("storage", "local-lvm")],
        )
        .await;
    let log = sim.task_log(&upid).await;
    assert!(
        log.contains(&"create full clone of drive scsi0 (local-lvm:base-9000-disk-0)".to_owned())
    );
    assert!(
        log.iter()
            .any(|l| l == "transferred 3.5 GiB of 3.5 GiB (100.00%)")
    );
    let config = sim.config("201").await;
    assert_eq!(config["name"], "Copy-of-VM-ubuntu-24.04-cloudinit");
    // A full clone of a regular VM.
    let again = sim
        .post("/nodes/pve/qemu/201/clone", &[("newid", "202")])
        .await
        .upid();
    sim.task_ok(&again).await;
    assert_eq!(
        sim.config("202").await["scsi0"],
        "local-lvm:vm-202-disk-0,size=3584M"
    );
}

#[tokio::test]
async fn clone_errors() {
    let sim = start().await;
    let linked_storage = sim
        .post(
            "/nodes/pve/qemu/9000/clone",
            &[("newid", "203"), ("storage", "local-lvm")],
        )
        .await;
    assert_eq!(
        (linked_storage.status, linked_storage.reason.as_str()),
        (500, "parameter 'storage' not allowed for linked clones")
    );
    let exists = sim
        .post(
            "/nodes/pve/qemu/9000/clone",
            &[("newid", "9000"), ("full", "1")],
        )
        .await;
    assert_eq!(
        (exists.status, exists.reason.as_str()),
        (500, "unable to create VM 9000: config file already exists")
    );
    let missing = sim
        .post("/nodes/pve/qemu/777/clone", &[("newid", "204")])
        .await;
    assert_eq!(
        (missing.status, missing.reason.as_str()),
        (
            500,
            "unable to find configuration file for VM 777 on node 'pve'"
        )
    );
    sim.create_plain("205", &[("scsi0", "local-lvm:1")]).await;
    let not_template = sim
        .post(
            "/nodes/pve/qemu/205/clone",
            &[("newid", "206"), ("full", "0")],
        )
        .await;
    assert_eq!(
        not_template.reason,
        "Linked clone feature is not supported for 'local-lvm:vm-205-disk-0' (scsi0)"
    );
    let bad_storage = sim
        .post(
            "/nodes/pve/qemu/9000/clone",
            &[("newid", "207"), ("full", "1"), ("storage", "local")],
        )
        .await;
    assert_eq!(
        bad_storage.errors(),
        json!({"storage": "storage 'local' does not support vm images"})
    );
}
