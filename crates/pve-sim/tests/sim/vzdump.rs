//! Backups on demand (`POST /nodes/{node}/vzdump`) under `lock: backup`,
//! their archives in the storage's `backup` content, deleting them
//! (refused while protected) and restoring them into new guests
//! (`qmrestore`, `vzrestore`) with the disks holding what the originals held.

use serde_json::Value;

use crate::common::{Sim, start, urlencode};

const IMAGE: &str = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2";
const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

/// The backups on `local`.
async fn backups(sim: &Sim) -> Vec<Value> {
    let list = sim
        .get_q("/nodes/pve/storage/local/content", &[("content", "backup")])
        .await
        .data();
    list.as_array().cloned().unwrap_or_default()
}

/// What a volume holds, as the simulator's state export records it.
async fn contents(sim: &Sim, volid: &str) -> Option<String> {
    let state = sim.control(reqwest::Method::GET, "/state", None).await;
    state["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["volid"] == volid)
        .map(|v| v["contents"].as_str().unwrap_or(volid).to_owned())
}

#[tokio::test]
async fn a_vm_backed_up_and_restored_holds_the_same_disk() {
    let sim = start().await;
    sim.post_ok(
        "/nodes/pve/qemu",
        &[
            ("vmid", "100"),
            ("name", "web"),
            ("memory", "1024"),
            ("net0", "virtio,bridge=vmbr0"),
            ("scsi0", &format!("local-lvm:0,import-from={IMAGE}")),
        ],
    )
    .await;
    sim.hold_at_first_wait("dump", "vzdump").await;
    let upid = sim
        .post(
            "/nodes/pve/vzdump",
            &[
                ("vmid", "100"),
                ("storage", "local"),
                ("mode", "snapshot"),
                ("compress", "zstd"),
                ("notes-template", "{{guestname}} on {{node}}"),
                ("protected", "1"),
                ("remove", "0"),
            ],
        )
        .await
        .upid();
    assert!(upid.contains(":vzdump:100:"), "{upid}");
    sim.eventually("lock: backup", || async {
        (sim.config("100").await["lock"] == "backup").then_some(())
    })
    .await;
    sim.release("dump").await;
    sim.task_ok(&upid).await;
    assert!(sim.config("100").await.get("lock").is_none());

    let list = backups(&sim).await;
    assert_eq!(list.len(), 1, "{list:?}");
    let b = &list[0];
    let volid = b["volid"].as_str().unwrap().to_owned();
    assert!(
        volid.starts_with("local:backup/vzdump-qemu-100-") && volid.ends_with(".vma.zst"),
        "{volid}"
    );
    assert_eq!(b["content"], "backup");
    assert_eq!(b["subtype"], "qemu");
    assert_eq!(b["vmid"], 100);
    assert_eq!(b["format"], "vma.zst");
    assert_eq!(b["notes"], "web on pve");
    assert_eq!(b["protected"], 1);
    assert!(b["size"].as_u64().unwrap() > 0);

    // Protected: the delete task fails and the archive stays.
    let path = format!("/nodes/pve/storage/local/content/{}", urlencode(&volid));
    let del = sim.delete(&path, &[]).await.upid();
    let name = volid.trim_start_matches("local:");
    assert_eq!(
        sim.wait_task(&del).await["exitstatus"],
        format!("cannot remove protected volume '{name}' on 'local'")
    );
    assert_eq!(backups(&sim).await.len(), 1);

    // Restored into a new VMID: the archived config, new disks holding
    // what the original's held.
    let restore = sim
        .post(
            "/nodes/pve/qemu",
            &[("vmid", "101"), ("archive", &volid), ("unique", "1")],
        )
        .await
        .upid();
    assert!(restore.contains(":qmrestore:101:"), "{restore}");
    sim.task_ok(&restore).await;
    let restored = sim.config("101").await;
    let original = sim.config("100").await;
    assert_eq!(restored["name"], "web");
    assert_eq!(restored["memory"], original["memory"]);
    assert!(
        restored["scsi0"]
            .as_str()
            .unwrap()
            .starts_with("local-lvm:vm-101-disk-0,"),
        "{restored}"
    );
    assert_ne!(restored["net0"], original["net0"], "unique: a new MAC");
    let held = contents(&sim, "local-lvm:vm-100-disk-0").await;
    assert_eq!(held.as_deref(), Some(IMAGE));
    assert_eq!(contents(&sim, "local-lvm:vm-101-disk-0").await, held);

    // Never over an existing guest without `force`; drives conflict.
    let over = sim
        .post("/nodes/pve/qemu", &[("vmid", "100"), ("archive", &volid)])
        .await;
    assert_eq!(
        over.reason,
        "unable to restore VM 100 - VM 100 already exists on node 'pve'"
    );
    let drive = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "102"),
                ("archive", &volid),
                ("scsi0", "local-lvm:1"),
            ],
        )
        .await;
    assert_eq!(
        drive.errors()["scsi0"],
        "option conflicts with option 'archive'"
    );

    // Unprotected, it goes.
    sim.put(&path, &[("protected", "0")]).await.data();
    sim.task_ok(&sim.delete(&path, &[]).await.upid()).await;
    assert!(backups(&sim).await.is_empty());
}

#[tokio::test]
async fn a_locked_guest_fails_its_backup_and_a_storage_without_backups_is_refused() {
    let sim = start().await;
    sim.create_plain("100", &[]).await;
    sim.hold_at_first_wait("first", "vzdump").await;
    let dump = [("vmid", "100"), ("storage", "local")];
    let first = sim.post("/nodes/pve/vzdump", &dump).await.upid();
    sim.eventually("lock: backup", || async {
        (sim.config("100").await["lock"] == "backup").then_some(())
    })
    .await;
    let second = sim.post("/nodes/pve/vzdump", &dump).await.upid();
    assert_eq!(sim.wait_task(&second).await["exitstatus"], "job errors");
    let log = sim.task_log(&second).await;
    assert!(
        log.iter()
            .any(|l| l == "ERROR: Backup of VM 100 failed - VM is locked (backup)"),
        "{log:?}"
    );
    sim.release("first").await;
    sim.task_ok(&first).await;
    let refused = sim
        .post(
            "/nodes/pve/vzdump",
            &[("vmid", "100"), ("storage", "local-lvm")],
        )
        .await;
    assert_eq!(
        refused.reason,
        "storage 'local-lvm' does not support vzdump backups"
    );
}

#[tokio::test]
async fn a_container_backed_up_is_restored_with_restore() {
    let sim = start().await;
    sim.post_ok(
        "/nodes/pve/lxc",
        &[
            ("vmid", "200"),
            ("ostemplate", TEMPLATE),
            ("hostname", "ct1"),
            ("storage", "local-lvm"),
            ("rootfs", "local-lvm:4"),
        ],
    )
    .await;
    let upid = sim
        .post(
            "/nodes/pve/vzdump",
            &[("vmid", "200"), ("storage", "local"), ("compress", "gzip")],
        )
        .await
        .upid();
    sim.task_ok(&upid).await;
    let list = backups(&sim).await;
    let volid = list[0]["volid"].as_str().unwrap().to_owned();
    assert!(volid.ends_with(".tar.gz"), "{volid}");
    assert_eq!(list[0]["subtype"], "lxc");

    // A container archive is no VM backup.
    let wrong = sim
        .post("/nodes/pve/qemu", &[("vmid", "201"), ("archive", &volid)])
        .await;
    assert_eq!(
        wrong.reason,
        format!("unable to restore VM 201 - archive '{volid}' is a lxc backup")
    );
    // Without `storage` pve-container restores to `local`, which holds no
    // container volumes here: the task fails, and nothing is left.
    let to_local = sim
        .post(
            "/nodes/pve/lxc",
            &[("vmid", "201"), ("ostemplate", &volid), ("restore", "1")],
        )
        .await
        .upid();
    let failed = sim.wait_task(&to_local).await;
    assert!(
        failed["exitstatus"]
            .as_str()
            .is_some_and(|e| e.contains("storage 'local'")),
        "{failed}"
    );
    let restore = sim
        .post(
            "/nodes/pve/lxc",
            &[
                ("vmid", "201"),
                ("ostemplate", &volid),
                ("restore", "1"),
                ("storage", "local-lvm"),
            ],
        )
        .await
        .upid();
    assert!(restore.contains(":vzrestore:201:"), "{restore}");
    sim.task_ok(&restore).await;
    let ct = sim.get("/nodes/pve/lxc/201/config").await.data();
    assert_eq!(ct["hostname"], "ct1");
    assert!(
        ct["rootfs"]
            .as_str()
            .unwrap()
            .starts_with("local-lvm:vm-201-disk-0,"),
        "{ct}"
    );
    assert_eq!(
        contents(&sim, "local-lvm:vm-201-disk-0").await.as_deref(),
        Some("local-lvm:vm-200-disk-0")
    );
}

/// A backup job run as the scheduler runs it (`POST
/// /_sim/backup-jobs/{id}/run`): one `vzdump` task of `root@pam` on the
/// node (no ID: two guests), its log naming the job, an archive of each
/// guest; `/cluster/tasks` lists it with its outcome once it ended.
#[tokio::test]
async fn a_backup_job_run_now_is_a_vzdump_task_naming_the_job() {
    let sim = start().await;
    sim.create_plain("100", &[]).await;
    sim.create_plain("101", &[]).await;
    let created = sim
        .post(
            "/cluster/backup",
            &[
                ("id", "backup-nightly"),
                ("schedule", "daily"),
                ("vmid", "100,101"),
                ("storage", "local"),
            ],
        )
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    let ran = sim
        .control(
            reqwest::Method::POST,
            "/backup-jobs/backup-nightly/run",
            None,
        )
        .await;
    let upids = ran["upids"].as_array().expect("upids");
    assert_eq!(upids.len(), 1, "one task on the one node: {ran}");
    let upid = upids[0].as_str().unwrap();
    assert!(upid.contains(":vzdump::root@pam:"), "{upid}");
    sim.task_ok(upid).await;
    let log = sim.task_log(upid).await;
    assert!(
        log.first().is_some_and(|l| l
            .starts_with("INFO: starting new backup job: vzdump 100 101 --job-id backup-nightly")),
        "{log:?}"
    );
    let vmids: Vec<u64> = backups(&sim)
        .await
        .iter()
        .filter_map(|b| b["vmid"].as_u64())
        .collect();
    assert_eq!(vmids.len(), 2, "{vmids:?}");
    sim.eventually("the run listed cluster-wide with its end", || async {
        let list = sim.get("/cluster/tasks").await.data();
        list.as_array()?
            .iter()
            .find(|t| t["upid"] == upid && t["status"] == "OK" && t["endtime"].is_u64())
            .map(|_| ())
    })
    .await;
    let missing = sim
        .client
        .post(format!(
            "{}/_sim/backup-jobs/none/run",
            sim.handle.base_url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}
