//! Snapshots: list with `current`, create under `lock: snapshot`, rollback
//! restoring the config, delete re-parenting the tree.

use std::time::Duration;

use crate::common::start_with;

#[tokio::test]
async fn snapshot_create_rollback_delete() {
    let sim = start_with(|c| c.durations.config = Duration::from_secs(50)).await;
    sim.post_ok(
        "/nodes/pve/qemu",
        &[
            ("vmid", "100"),
            ("memory", "1024"),
            ("scsi0", "local-lvm:4"),
        ],
    )
    .await;
    let base = "/nodes/pve/qemu/100/snapshot";
    // Held at its first simulated wait, the snapshot keeps its lock while
    // the test looks.
    sim.hold_at_first_wait("snap", "qmsnapshot").await;
    let upid = sim
        .post(base, &[("snapname", "s1"), ("description", "before")])
        .await
        .upid();
    let locked = sim
        .eventually("lock: snapshot", || async {
            let c = sim.config("100").await;
            (c["lock"] == "snapshot").then_some(c)
        })
        .await;
    assert_eq!(locked["lock"], "snapshot");
    sim.release("snap").await;
    sim.task_ok(&upid).await;
    let log = sim.task_log(&upid).await;
    assert!(
        log.contains(&"snapshotting 'drive-scsi0' (local-lvm:vm-100-disk-0)".to_owned()),
        "{log:?}"
    );
    let dup = sim.post(base, &[("snapname", "s1")]).await.upid();
    assert_eq!(
        sim.wait_task(&dup).await["exitstatus"],
        "snapshot name 's1' already used"
    );
    let reserved = sim.post(base, &[("snapname", "current")]).await;
    assert_eq!(
        reserved.reason,
        "unable to use snapshot name 'current' (reserved name)"
    );

    sim.put("/nodes/pve/qemu/100/config", &[("memory", "4096")])
        .await
        .data();
    sim.post_ok(base, &[("snapname", "s2")]).await;
    let list = sim.get(base).await.data();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"s1") && names.contains(&"s2") && names.contains(&"current"));
    let current = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "current")
        .unwrap();
    assert_eq!(current["parent"], "s2");
    let s2 = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "s2")
        .unwrap();
    assert_eq!(s2["parent"], "s1");

    sim.post_ok(&format!("{base}/s1/rollback"), &[]).await;
    let c = sim.config("100").await;
    assert_eq!(c["memory"], "1024");
    assert_eq!(c["parent"], "s1");
    let snapcfg = sim.get(&format!("{base}/s2/config")).await.data();
    assert_eq!(snapcfg["memory"], "4096");

    sim.hold_at_first_wait("delsnap", "qmdelsnapshot").await;
    let upid = sim.delete(&format!("{base}/s1"), &[]).await.upid();
    let deleting = sim
        .eventually("lock: snapshot-delete", || async {
            let c = sim.config("100").await;
            (c["lock"] == "snapshot-delete").then_some(c)
        })
        .await;
    assert_eq!(deleting["lock"], "snapshot-delete");
    sim.release("delsnap").await;
    sim.task_ok(&upid).await;
    let list = sim.get(base).await.data();
    let s2 = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "s2")
        .unwrap();
    assert!(s2.get("parent").is_none(), "{s2}");
    assert!(sim.config("100").await.get("parent").is_none());
    let gone = sim.delete(&format!("{base}/nope"), &[]).await.upid();
    assert_eq!(
        sim.wait_task(&gone).await["exitstatus"],
        "snapshot 'nope' does not exist"
    );
}

/// A container's snapshots: the same tree and locks under `vz*` task
/// types, no `vmstate` (pve-container's create has no such parameter: the
/// 400 proxcenter-ui#170 met), and a rollback of a running container
/// leaves it stopped unless `start` is given.
#[tokio::test]
async fn container_snapshots_have_no_vmstate_and_vz_tasks() {
    let sim = start_with(|c| c.durations.config = Duration::from_millis(50)).await;
    sim.post_ok(
        "/nodes/pve/lxc",
        &[
            ("vmid", "200"),
            (
                "ostemplate",
                "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
            ),
            ("rootfs", "local-lvm:8"),
        ],
    )
    .await;
    let base = "/nodes/pve/lxc/200/snapshot";
    let refused = sim
        .post(base, &[("snapname", "s1"), ("vmstate", "1")])
        .await;
    assert_eq!(refused.status, 400, "{}", refused.reason);
    let upid = sim
        .post(base, &[("snapname", "s1"), ("description", "first")])
        .await
        .upid();
    assert!(upid.contains(":vzsnapshot:200:"), "{upid}");
    sim.task_ok(&upid).await;
    sim.post_ok(base, &[("snapname", "s2")]).await;
    let list = sim.get(base).await.data();
    let s1 = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "s1")
        .unwrap()
        .clone();
    assert_eq!(s1["description"], "first");
    sim.put(&format!("{base}/s1/config"), &[("description", "changed")])
        .await
        .data();
    let cfg = sim.get(&format!("{base}/s1/config")).await.data();
    assert_eq!(cfg["description"], "changed");

    sim.post_ok("/nodes/pve/lxc/200/status/start", &[]).await;
    let upid = sim.post(&format!("{base}/s1/rollback"), &[]).await.upid();
    assert!(upid.contains(":vzrollback:200:"), "{upid}");
    sim.task_ok(&upid).await;
    let status = sim.get("/nodes/pve/lxc/200/status/current").await.data();
    assert_eq!(status["status"], "stopped");
    let c = sim.get("/nodes/pve/lxc/200/config").await.data();
    assert_eq!(c["parent"], "s1");
    assert!(c.get("lock").is_none(), "{c}");
    sim.post_ok(&format!("{base}/s1/rollback"), &[("start", "1")])
        .await;
    let status = sim.get("/nodes/pve/lxc/200/status/current").await.data();
    assert_eq!(status["status"], "running");

    // Deleting s1, which s2 was taken after: s2 is re-parented.
    let upid = sim.delete(&format!("{base}/s1"), &[]).await.upid();
    assert!(upid.contains(":vzdelsnapshot:200:"), "{upid}");
    sim.task_ok(&upid).await;
    let list = sim.get(base).await.data();
    let s2 = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "s2")
        .unwrap();
    assert!(s2.get("parent").is_none(), "{s2}");
    // The qemu API does not see the container's snapshots.
    let as_vm = sim.get("/nodes/pve/qemu/200/snapshot").await;
    assert_eq!(as_vm.status, 500, "{}", as_vm.reason);
}

/// A rollback stops a running VM; from a snapshot with RAM (`vmstate`) it
/// resumes running, without RAM it is left stopped (no `start`), as
/// qemu-server does.
#[tokio::test]
async fn a_vm_rollback_resumes_only_from_a_snapshot_with_ram() {
    let sim = start_with(|c| c.durations.config = Duration::from_millis(50)).await;
    sim.post_ok(
        "/nodes/pve/qemu",
        &[
            ("vmid", "100"),
            ("memory", "1024"),
            ("scsi0", "local-lvm:4"),
        ],
    )
    .await;
    sim.post_ok("/nodes/pve/qemu/100/status/start", &[]).await;
    let base = "/nodes/pve/qemu/100/snapshot";
    sim.post_ok(base, &[("snapname", "ram"), ("vmstate", "1")])
        .await;
    sim.post_ok(base, &[("snapname", "disk")]).await;
    let status = || async {
        sim.get("/nodes/pve/qemu/100/status/current").await.data()["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    sim.post_ok(&format!("{base}/disk/rollback"), &[]).await;
    assert_eq!(status().await, "stopped");
    sim.post_ok(&format!("{base}/ram/rollback"), &[]).await;
    assert_eq!(status().await, "running");
    let list = sim.get(base).await.data();
    let ram = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "ram")
        .unwrap();
    assert_eq!(ram["vmstate"], 1);
}
