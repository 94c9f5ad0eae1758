//! VM creation: `lock: create` through the import, the import task log,
//! the resulting config, and the failure paths.

use serde_json::json;

use crate::common::*;

/// A simulator whose creates are held (a `task-held` fault, hold `create`)
/// until the test releases them: the VM is observed while its create runs,
/// however long the test takes to look.
async fn held_creates() -> Sim {
    let sim = start().await;
    sim.add_fault(json!({"fault": "task-held", "hold": "create", "task_type": "qmcreate"}))
        .await;
    sim
}

#[tokio::test]
async fn create_with_import_holds_lock_create_until_done() {
    let sim = held_creates().await;
    let disk = format!("local-lvm:0,import-from={UBUNTU},discard=on,ssd=1");
    let upid = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "100"),
                ("name", "web-1"),
                ("memory", "2048"),
                ("cores", "2"),
                ("agent", "1"),
                ("scsihw", "virtio-scsi-pci"),
                ("scsi0", &disk),
                ("ide2", "local-lvm:cloudinit"),
                ("net0", "virtio,bridge=vmbr0"),
                ("ciuser", "ubuntu"),
                ("cipassword", "s3cret"),
                ("ipconfig0", "ip=dhcp"),
            ],
        )
        .await
        .upid();

    // lock: create is there as soon as the call returns.
    let during = sim.config("100").await;
    assert_eq!(
        during.as_object().unwrap().len(),
        2,
        "only digest and lock while creating: {during}"
    );
    assert_eq!(during["lock"], "create");
    assert_eq!(during["digest"].as_str().unwrap().len(), 40);
    let status = sim.get("/nodes/pve/qemu/100/status/current").await.data();
    assert_eq!(
        (
            status["status"].as_str(),
            status["lock"].as_str(),
            status["name"].as_str()
        ),
        (Some("stopped"), Some("create"), Some("VM 100"))
    );
    let running = sim
        .get(&format!("/nodes/pve/tasks/{}/status", urlencode(&upid)))
        .await
        .data();
    assert_eq!(running["status"], "running");
    assert!(running.get("exitstatus").is_none());
    let resources = sim
        .get_q("/cluster/resources", &[("type", "vm")])
        .await
        .data();
    let vm = resources
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == 100)
        .unwrap()
        .clone();
    assert_eq!(vm["lock"], "create");

    sim.release("create").await;
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert!(
        log.contains(&format!("create full clone of drive scsi0 ({UBUNTU})")),
        "{log:?}"
    );
    let progress: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("transferred "))
        .collect();
    assert!(
        progress.len() >= 100,
        "about one progress line per percent, got {}",
        progress.len()
    );
    assert_eq!(progress[0], "transferred 0.0 B of 3.5 GiB (0.00%)");
    assert_eq!(
        progress.last().unwrap().as_str(),
        "transferred 3.5 GiB of 3.5 GiB (100.00%)"
    );
    assert!(log.contains(&"scsi0: successfully created disk 'local-lvm:vm-100-disk-0,discard=on,size=3584M,ssd=1'".to_owned()), "{log:?}");

    let config = sim.config("100").await;
    assert!(config.get("lock").is_none());
    assert_eq!(
        config["scsi0"], "local-lvm:vm-100-disk-0,discard=on,size=3584M,ssd=1",
        "import-from is not echoed back"
    );
    assert_eq!(config["ide2"], "local-lvm:vm-100-cloudinit,media=cdrom");
    assert_eq!(config["cipassword"], "**********");
    assert_eq!(config["cores"], json!(2), "integers come back as numbers");
    assert_eq!(config["memory"], "2048", "memory is a property string");
    assert_eq!(config["boot"], "order=scsi0;net0");
    let net0 = config["net0"].as_str().unwrap();
    assert!(
        regex::Regex::new(r"^virtio=BC:24:11:[0-9A-F]{2}:[0-9A-F]{2}:[0-9A-F]{2},bridge=vmbr0$")
            .unwrap()
            .is_match(net0),
        "{net0}"
    );
    assert!(config["smbios1"].as_str().unwrap().starts_with("uuid="));
    assert!(config["vmgenid"].as_str().unwrap().len() == 36);
    assert!(
        config["meta"]
            .as_str()
            .unwrap()
            .starts_with("creation-qemu=")
    );

    let content = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "100")])
        .await
        .data();
    let volids: Vec<&str> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["volid"].as_str().unwrap())
        .collect();
    assert_eq!(
        volids,
        ["local-lvm:vm-100-cloudinit", "local-lvm:vm-100-disk-0"]
    );
}

#[tokio::test]
async fn duplicate_vmids_fail_synchronously() {
    let sim = start().await;
    let resp = sim.post("/nodes/pve/qemu", &[("vmid", "9000")]).await;
    assert_eq!(
        (resp.status, resp.reason.as_str()),
        (
            500,
            "unable to create VM 9000 - VM 9000 already exists on node 'pve'"
        )
    );
    assert_eq!(
        resp.json()["message"],
        "unable to create VM 9000 - VM 9000 already exists on node 'pve'\n"
    );
}

#[tokio::test]
async fn corrupt_import_fails_and_removes_the_vm() {
    let sim = start().await;
    let upid = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "101"),
                (
                    "scsi0",
                    "local-lvm:0,import-from=local:import/corrupt.qcow2",
                ),
            ],
        )
        .await
        .upid();
    let status = sim.wait_task(&upid).await;
    let exit = status["exitstatus"].as_str().unwrap();
    assert!(exit.starts_with("unable to create VM 101 - cannot import from 'local:import/corrupt.qcow2' - copy failed:"), "{exit}");
    let log = sim.task_log(&upid).await;
    assert!(
        log.iter()
            .any(|l| l.starts_with("qemu-img: error while reading at byte")),
        "{log:?}"
    );
    assert!(
        log.last()
            .unwrap()
            .starts_with("TASK ERROR: unable to create VM 101 - ")
    );
    let gone = sim.get("/nodes/pve/qemu/101/config").await;
    assert_eq!(
        (gone.status, gone.reason.as_str()),
        (
            500,
            "Configuration file 'nodes/pve/qemu-server/101.conf' does not exist"
        )
    );
    let content = sim
        .get_q("/nodes/pve/storage/local-lvm/content", &[("vmid", "101")])
        .await
        .data();
    assert_eq!(content, json!([]), "new volumes are freed");
    assert_eq!(sim.get("/cluster/nextid").await.data(), "100");
    let missing = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "102"),
                (
                    "scsi0",
                    "local-lvm:0,import-from=local:import/missing.qcow2",
                ),
            ],
        )
        .await
        .upid();
    let exit = sim.wait_task(&missing).await["exitstatus"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        exit,
        "unable to create VM 102 - cannot import from 'local:import/missing.qcow2' - could not get size of local:import/missing.qcow2"
    );
}

#[tokio::test]
async fn import_from_syntax_and_source_rules() {
    let sim = start().await;
    let sized = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "103"),
                ("scsi0", &format!("local-lvm:8,import-from={UBUNTU}")),
            ],
        )
        .await;
    assert_eq!(
        sized.errors()["scsi0"],
        "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>"
    );
    let iso = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "103"),
                ("scsi0", "local-lvm:0,import-from=local:iso/ubuntu.img"),
            ],
        )
        .await;
    assert_eq!(
        iso.errors()["scsi0"],
        "local:iso/ubuntu.img has wrong type 'iso' - needs to be 'images' or 'import'"
    );
    let wrong_storage = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "103"),
                ("scsi0", &format!("local:0,import-from={UBUNTU}")),
            ],
        )
        .await;
    assert_eq!(
        wrong_storage.errors(),
        json!({"storage": "storage 'local' does not support vm images"})
    );
    let no_storage = sim
        .post("/nodes/pve/qemu", &[("vmid", "103"), ("scsi0", "ceph:4")])
        .await;
    assert_eq!(
        (no_storage.status, no_storage.reason.as_str()),
        (500, "storage 'ceph' does not exist")
    );
    let efi = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "103"),
                ("efidisk0", &format!("local-lvm:0,import-from={UBUNTU}")),
            ],
        )
        .await;
    assert_eq!(
        efi.errors()["efidisk0"],
        "need to specify 'efitype' when using 'import-from'"
    );
    let iso_disk = sim
        .post(
            "/nodes/pve/qemu",
            &[("vmid", "103"), ("ide2", "local:iso/x.iso")],
        )
        .await;
    assert_eq!(
        iso_disk.errors()["ide2"],
        "explicit 'media=cdrom' is required for iso images"
    );
    assert_eq!(
        sim.get("/nodes/pve/qemu/103/config").await.status,
        500,
        "nothing was created"
    );
}

#[tokio::test]
async fn empty_disks_and_start_after_create() {
    let sim = start().await;
    let upid = sim
        .post_ok(
            "/nodes/pve/qemu",
            &[
                ("vmid", "104"),
                ("virtio0", "local-lvm:4"),
                ("agent", "enabled=1"),
                ("start", "1"),
                ("net0", "virtio,bridge=vmbr0"),
            ],
        )
        .await;
    let log = sim.task_log(&upid).await;
    assert!(
        log.contains(
            &"virtio0: successfully created disk 'local-lvm:vm-104-disk-0,size=4G'".to_owned()
        ),
        "{log:?}"
    );
    assert!(log.contains(&"Execute autostart".to_owned()));
    // The start is its own task.
    let status = sim
        .eventually("VM 104 to run", || async {
            let s = sim.get("/nodes/pve/qemu/104/status/current").await.data();
            (s["status"] == "running").then_some(s)
        })
        .await;
    assert_eq!(status["agent"], 1);
    assert_eq!(status["qmpstatus"], "running");
    assert!(status["pid"].is_u64());
    let starts = sim
        .get_q(
            "/nodes/pve/tasks",
            &[("typefilter", "qmstart"), ("source", "all")],
        )
        .await
        .data();
    assert_eq!(starts.as_array().unwrap().len(), 1);
}
