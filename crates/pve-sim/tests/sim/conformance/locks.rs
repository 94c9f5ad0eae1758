//! The two lock mechanisms: the `lock` config property (sync 500 for config
//! updates, clone and template; in-task for power, resize, destroy) and the
//! flock with its 10 s `got timeout`.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn calls_during_create_fail_the_pve_way() {
    let sim = start().await;
    // The create is held at its first simulated wait, the import's first
    // step: by then it holds `lock: create` and the flock, and keeps them
    // while everything below happens.
    sim.hold_at_first_wait("create", "qmcreate").await;
    let create = sim
        .post(
            "/nodes/pve/qemu",
            &[
                ("vmid", "100"),
                ("scsi0", &format!("local-lvm:0,import-from={UBUNTU}")),
            ],
        )
        .await
        .upid();
    sim.log_line(&create, "transferred ").await;

    // Sync lock checks: HTTP 500 with the message as reason phrase.
    for resp in [
        sim.post("/nodes/pve/qemu/100/config", &[("memory", "1024")])
            .await,
        sim.put("/nodes/pve/qemu/100/config", &[("memory", "1024")])
            .await,
        sim.post("/nodes/pve/qemu/100/template", &[]).await,
        sim.post("/nodes/pve/qemu/100/clone", &[("newid", "105")])
            .await,
    ] {
        assert_eq!(
            (resp.status, resp.reason.as_str()),
            (500, "VM is locked (create)"),
            "{}",
            resp.body
        );
        assert_eq!(
            resp.json(),
            json!({"data": null, "message": "VM is locked (create)\n"})
        );
    }

    // In-task: a UPID now, then the flock times out after 10 (scaled) seconds.
    let flock_msg = "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout";
    for (path, params) in [
        ("/nodes/pve/qemu/100/status/start", vec![]),
        (
            "/nodes/pve/qemu/100/resize",
            vec![("disk", "scsi0"), ("size", "+1G")],
        ),
    ] {
        let resp = if path.ends_with("resize") {
            sim.put(path, &params).await
        } else {
            sim.post(path, &params).await
        };
        let upid = resp.upid();
        let status = sim.wait_task(&upid).await;
        assert_eq!(status["exitstatus"], flock_msg);
        let log = sim.task_log(&upid).await;
        assert_eq!(
            log,
            [
                "trying to acquire lock...",
                &format!("TASK ERROR: {flock_msg}")
            ]
        );
    }
    let destroy = sim.delete("/nodes/pve/qemu/100", &[]).await.upid();
    assert_eq!(sim.wait_task(&destroy).await["exitstatus"], flock_msg);

    let still = sim
        .get(&format!("/nodes/pve/tasks/{}/status", urlencode(&create)))
        .await
        .data();
    assert_eq!(
        still["status"], "running",
        "the checks above ran during the import"
    );
    sim.release("create").await;
    sim.task_ok(&create).await;
}

#[tokio::test]
async fn locked_vm_fails_inside_power_tasks() {
    let sim = start().await;
    // A clone target holds `lock: clone` (and the flock) while the clone
    // task runs; held at its first simulated wait, it runs until released.
    sim.hold_at_first_wait("clone", "qmclone").await;
    let clone = sim
        .post(
            "/nodes/pve/qemu/9000/clone",
            &[("newid", "300"), ("name", "c1")],
        )
        .await
        .upid();
    let cfg = sim
        .eventually("clone target config", || async {
            let r = sim.get("/nodes/pve/qemu/300/config").await;
            (r.status == 200).then(|| r.data())
        })
        .await;
    assert_eq!(cfg["lock"], "clone");
    // Its first log line comes after it took the flock.
    sim.log_line(&clone, "creating a clone").await;
    let start = sim
        .post("/nodes/pve/qemu/300/status/start", &[])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&start).await["exitstatus"],
        "can't lock file '/var/lock/qemu-server/lock-300.conf' - got timeout"
    );
    sim.release("clone").await;
    sim.task_ok(&clone).await;
    assert!(sim.config("300").await.get("lock").is_none());
}

#[tokio::test]
async fn lock_timeout_fault_gives_got_timeout() {
    let sim = start().await;
    sim.create_plain("111", &[]).await;
    sim.add_fault(json!({"fault": "lock-timeout", "method": "PUT", "path": "/nodes/{node}/qemu/{vmid}/config", "count": 1})).await;
    let put = sim
        .put("/nodes/pve/qemu/111/config", &[("memory", "1024")])
        .await;
    assert_eq!(
        (put.status, put.reason.as_str()),
        (
            500,
            "can't lock file '/var/lock/qemu-server/lock-111.conf' - got timeout"
        )
    );
    let again = sim
        .put("/nodes/pve/qemu/111/config", &[("memory", "1024")])
        .await;
    assert_eq!(again.json(), json!({"data": null}), "the rule fired once");

    sim.add_fault(json!({"fault": "lock-timeout", "path": "/nodes/{node}/qemu/{vmid}/config", "method": "POST"})).await;
    let post = sim
        .post("/nodes/pve/qemu/111/config", &[("memory", "2048")])
        .await
        .upid();
    let status = sim.wait_task(&post).await;
    assert_eq!(
        status["exitstatus"],
        "can't lock file '/var/lock/qemu-server/lock-111.conf' - got timeout"
    );
}

#[tokio::test]
async fn a_create_whose_flock_times_out_leaves_no_vm_behind() {
    // qemu-server's create worker removes the new VM's config after any
    // error; a VM left `lock: create` would block its VMID for good.
    let sim = start().await;
    sim.add_fault(json!({
        "fault": "lock-timeout", "method": "POST", "path": "/nodes/{node}/qemu", "count": 1,
    }))
    .await;
    let upid = sim
        .post("/nodes/pve/qemu", &[("vmid", "150"), ("name", "flocked")])
        .await
        .upid();
    let status = sim.wait_task(&upid).await;
    assert!(
        status["exitstatus"]
            .as_str()
            .is_some_and(|s| s.ends_with("got timeout")),
        "{status}"
    );
    let gone = sim.get("/nodes/pve/qemu/150/status/current").await;
    assert_eq!(gone.status, 500, "the VM is gone: {:?}", gone.json());
    // The VMID is free again.
    sim.create_plain("150", &[]).await;
}
