//! Migration between nodes (`qmigrate`, `lock: migrate`, local disks),
//! `move_disk` (`qmmove`) and linked clones pinning their base.

use std::time::Duration;

use crate::common::{Sim, start_with};

#[tokio::test]
async fn migrate_offline_and_online_with_local_disks() {
    let sim = start_with(|c| {
        c.nodes = vec!["pve".into(), "pve2".into()];
        c.durations.import_bytes_per_sec = 20 << 20;
    })
    .await;
    sim.post_ok(
        "/nodes/pve/qemu",
        &[("vmid", "100"), ("memory", "512"), ("scsi0", "local-lvm:2")],
    )
    .await;
    let pre = sim.get("/nodes/pve/qemu/100/migrate").await.data();
    assert_eq!(pre["running"], 0);
    assert_eq!(pre["allowed_nodes"], serde_json::json!(["pve2"]));
    assert_eq!(pre["has-dbus-vmstate"], 1, "{pre}");
    assert_eq!(pre["local_disks"][0]["volid"], "local-lvm:vm-100-disk-0");
    let local = sim
        .post("/nodes/pve/qemu/100/migrate", &[("target", "pve")])
        .await;
    assert_eq!(local.errors()["target"], "target is local node.");

    // Held at its first simulated wait (the disk copy), the migration keeps
    // its lock while the test looks.
    sim.hold_at_first_wait("migrate", "qmigrate").await;
    let upid = sim
        .post("/nodes/pve/qemu/100/migrate", &[("target", "pve2")])
        .await
        .upid();
    assert!(upid.contains(":qmigrate:100:"));
    sim.eventually("lock: migrate", || async {
        let r = sim.get("/nodes/pve/qemu/100/config").await;
        (r.status == 200 && r.data()["lock"] == "migrate").then_some(())
    })
    .await;
    sim.release("migrate").await;
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert!(
        log.iter().any(|l| l.ends_with("copying local disk images")),
        "{log:?}"
    );
    assert!(log.iter().any(|l| l.contains("transferred")), "{log:?}");
    assert_eq!(sim.get("/nodes/pve/qemu/100/config").await.status, 500);
    let moved = sim.get("/nodes/pve2/qemu/100/config").await.data();
    assert!(moved.get("lock").is_none());
    let vols = sim
        .get_q("/nodes/pve2/storage/local-lvm/content", &[("vmid", "100")])
        .await
        .data();
    assert_eq!(vols[0]["volid"], "local-lvm:vm-100-disk-0");

    // Running: needs online=1, and with-local-disks for its local disk.
    sim.post_ok("/nodes/pve2/qemu/100/status/start", &[]).await;
    let refused = sim
        .post("/nodes/pve2/qemu/100/migrate", &[("target", "pve")])
        .await;
    assert_eq!(refused.reason, "can't migrate running VM without --online");
    let upid = sim
        .post(
            "/nodes/pve2/qemu/100/migrate",
            &[("target", "pve"), ("online", "1")],
        )
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&upid).await["exitstatus"],
        "migration aborted"
    );
    let log = sim.task_log(&upid).await;
    assert!(
        log.iter().any(|l| l.ends_with(
            "can't migrate local disk 'local-lvm:vm-100-disk-0': can't live migrate attached local disks without with-local-disks option"
        )),
        "{log:?}"
    );
    sim.post_ok(
        "/nodes/pve2/qemu/100/migrate",
        &[
            ("target", "pve"),
            ("online", "1"),
            ("with-local-disks", "1"),
        ],
    )
    .await;
    let status = sim.get("/nodes/pve/qemu/100/status/current").await.data();
    assert_eq!(status["status"], "running");
}

#[tokio::test]
async fn move_disk_and_linked_clone_base() {
    let sim = start_with(|c| c.durations.config = Duration::from_secs(1)).await;
    sim.post_ok(
        "/nodes/pve/qemu/9000/clone",
        &[("newid", "101"), ("name", "linked")],
    )
    .await;
    let no_images = sim
        .post(
            "/nodes/pve/qemu/101/move_disk",
            &[("disk", "scsi0"), ("storage", "local")],
        )
        .await;
    assert_eq!(
        no_images.errors()["storage"],
        "storage 'local' does not support vm images"
    );
    let cdrom = sim
        .post(
            "/nodes/pve/qemu/101/move_disk",
            &[("disk", "ide2"), ("storage", "local-lvm")],
        )
        .await;
    assert_eq!(cdrom.reason, "you can't move a cdrom");
    // (On LVM-thin the clone is an independent thin snapshot: PVE destroys
    // the template even while it exists, see hardware.rs.)
    let upid = sim.delete("/nodes/pve/qemu/101", &[]).await.upid();
    sim.task_ok(&upid).await;
    let upid = sim.delete("/nodes/pve/qemu/9000", &[]).await.upid();
    sim.task_ok(&upid).await;
}

/// A migration of VM 100 from `pve` to `pve2`: its exit status and log.
async fn migrate_100(sim: &Sim, extra: &[(&str, &str)]) -> (String, Vec<String>) {
    let params: Vec<_> = [("target", "pve2")].iter().chain(extra).copied().collect();
    let upid = sim
        .post("/nodes/pve/qemu/100/migrate", &params)
        .await
        .upid();
    let exit = sim.wait_task(&upid).await["exitstatus"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (exit, sim.task_log(&upid).await)
}

async fn set_ide0(sim: &Sim, value: &str) {
    let put = sim
        .put("/nodes/pve/qemu/100/config", &[("ide0", value)])
        .await;
    assert_eq!(put.status, 200, "{put:?}");
}

fn has_line(log: &[String], line: &str) -> bool {
    log.iter().any(|l| l.ends_with(line))
}

/// QemuMigrate's volume scan: snapshots on LVM-thin pin a VM to its node
/// (online and offline), a local ISO must be ejected first, and the
/// generated cloud-init drive travels with the VM.
#[tokio::test]
async fn migrate_refuses_local_snapshots_and_isos() {
    let state = pve_sim::state::file::StateFile::parse(
        "nodes: [{name: pve}, {name: pve2}]\nvolumes: [{volid: 'local:iso/seed.iso', size: 368K}]\n",
    )
    .unwrap();
    let sim = start_with(|c| c.state = Some(state)).await;
    sim.post_ok(
        "/nodes/pve/qemu",
        &[
            ("vmid", "100"),
            ("scsi0", "local-lvm:1"),
            ("ide2", "local-lvm:cloudinit"),
        ],
    )
    .await;
    sim.post_ok("/nodes/pve/qemu/100/snapshot", &[("snapname", "s1")])
        .await;
    let aborted = |(exit, log): (String, Vec<String>), volid: &str, why: &str| {
        assert_eq!(exit, "migration aborted");
        assert!(
            has_line(&log, &format!("can't migrate local disk '{volid}': {why}")),
            "{log:?}"
        );
        assert!(
            has_line(
                &log,
                "ERROR: migration aborted (duration 00:00:00): Problem found while scanning volumes - can't migrate VM - check log"
            ),
            "{log:?}"
        );
    };
    let disk = "local-lvm:vm-100-disk-0";
    aborted(
        migrate_100(&sim, &[]).await,
        disk,
        "non-migratable snapshot exists",
    );
    sim.power("100", "start").await;
    let live = [("online", "1"), ("with-local-disks", "1")];
    aborted(
        migrate_100(&sim, &live).await,
        disk,
        "online storage migration not possible if non-replicated snapshot exists",
    );
    // Nothing moved, and the lock is gone again.
    let config = sim.get("/nodes/pve/qemu/100/config").await.data();
    assert!(config.get("lock").is_none(), "{config}");

    // Without the snapshot but with a local ISO in the drive: refused too.
    let upid = sim
        .delete("/nodes/pve/qemu/100/snapshot/s1", &[])
        .await
        .upid();
    sim.task_ok(&upid).await;
    sim.power("100", "stop").await;
    set_ide0(&sim, "local:iso/seed.iso,media=cdrom").await;
    aborted(
        migrate_100(&sim, &[]).await,
        "local:iso/seed.iso",
        "local cdrom image",
    );

    // Ejected: the disk and the generated cloud-init drive move.
    set_ide0(&sim, "none,media=cdrom").await;
    let (exit, log) = migrate_100(&sim, &[]).await;
    assert_eq!(exit, "OK", "{log:?}");
    for line in [
        "found local disk 'local-lvm:vm-100-disk-0' (attached)",
        "found generated disk 'local-lvm:vm-100-cloudinit' (in current VM config)",
    ] {
        assert!(has_line(&log, line), "{line}: {log:?}");
    }
    let vols = sim
        .get_q("/nodes/pve2/storage/local-lvm/content", &[("vmid", "100")])
        .await
        .data();
    assert_eq!(vols.as_array().map(Vec::len), Some(2), "{vols}");
}
