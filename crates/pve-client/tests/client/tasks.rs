//! Tasks against pve-sim: success, `WARNINGS: n`, failure, timeout,
//! cancellation, the `no such task` grace, import progress, and a create
//! with `import-from` end to end.

use std::time::Duration;

use tokio::time::Instant;

use pve_client::vm::{
    CreateVm, DeleteOptions, DiskSize, Drive, IpConfig, Nic, NicModel, ShutdownOptions, SshKeys,
    Tags, gib,
};
use pve_client::{Error, Secret, TaskObservation, TaskOutcome, WaitOptions};
use serde_json::json;

use crate::harness::{
    Harness, IMAGE, NODE, TEMPLATE, clone_template, cloned_vm, eventually, has_import,
    import_params, start_import,
};

#[tokio::test]
async fn a_successful_task_waits_to_ok() {
    let h = Harness::start().await;
    let client = h.client();
    let upid = clone_template(&client, 500).await;
    assert_eq!(upid.node(), NODE);
    assert_eq!(upid.task_type(), "qmclone");
    assert_eq!(upid.id(), TEMPLATE.to_string());
    assert_eq!(upid.user(), "root@pam!sim");
    let done = client.wait_task(&upid).await.unwrap();
    assert_eq!(done.warnings, 0);
    // Observing a finished task again is answered from the cache.
    h.clear_stats().await;
    let again = client.observe_task(&upid).await.unwrap();
    assert!(matches!(
        again,
        TaskObservation::Finished(TaskOutcome::Succeeded { .. })
    ));
    assert_eq!(h.total().await, 0);
}

#[tokio::test]
async fn warnings_are_success_and_kept() {
    let h = Harness::start().await;
    let client = h.client();
    cloned_vm(&client, 501).await;
    h.fault(json!({"fault": "task-warnings", "task_type": "qmstart", "warnings": 2, "count": 1}))
        .await;
    let upid = client.start_vm(NODE, 501).await.unwrap();
    let done = client.wait_task(&upid).await.unwrap();
    assert_eq!(done.warnings, 2);
    assert_eq!(done.warning_lines.len(), 2, "{:?}", done.warning_lines);
    assert!(done.warning_lines.iter().all(|l| l.starts_with("WARN:")));
    let status = client.task_status(&upid).await.unwrap();
    assert_eq!(status.exitstatus.as_deref(), Some("WARNINGS: 2"));
}

#[tokio::test]
async fn a_locked_vm_fails_its_task() {
    // start during a create: the start task waits for the flock, then
    // fails. The create is held running, so the flock is taken whatever
    // the machine's load.
    let h = Harness::start().await;
    h.hold_tasks("import", "qmcreate").await;
    let client = h.client();
    let create = start_import(&client, 502).await;
    let start = client.start_vm(NODE, 502).await.unwrap();
    let err = client.wait_task(&start).await.unwrap_err();
    match &err {
        Error::TaskFailed {
            exit_status,
            log_tail,
            ..
        } => {
            assert!(
                exit_status.contains("got timeout") || exit_status.contains("VM is locked"),
                "{exit_status}"
            );
            assert!(
                log_tail.iter().any(|l| l.starts_with("TASK ERROR")),
                "{log_tail:?}"
            );
        }
        other => panic!("expected TaskFailed, got {other:?}"),
    }
    // The create itself is unaffected.
    assert!(matches!(
        client.observe_task(&create).await.unwrap(),
        TaskObservation::Running { .. } | TaskObservation::Finished(TaskOutcome::Succeeded { .. })
    ));
}

#[tokio::test]
async fn waiting_times_out_without_stopping_the_task() {
    let h = Harness::start().await;
    // Held: still running after the wait gave up, however long that took.
    h.hold_tasks("import", "qmcreate").await;
    let client = h.client();
    let upid = start_import(&client, 503).await;
    let opts = WaitOptions {
        poll_interval: Duration::from_millis(20),
        timeout: Duration::from_millis(200),
    };
    let err = client
        .wait_task_with(&upid, opts, std::future::pending())
        .await
        .unwrap_err();
    match &err {
        Error::TaskTimeout { upid: u, waited } => {
            assert_eq!(u, &upid);
            assert!(*waited >= Duration::from_millis(200));
        }
        other => panic!("expected TaskTimeout, got {other:?}"),
    }
    assert!(client.task_status(&upid).await.unwrap().is_running());
}

#[tokio::test]
async fn waiting_can_be_cancelled() {
    let h = Harness::start().await;
    // Held: the wait can only end by the cancel.
    h.hold_tasks("import", "qmcreate").await;
    let client = h.client();
    let upid = start_import(&client, 504).await;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let waiter = {
        let client = client.clone();
        let upid = upid.clone();
        tokio::spawn(async move {
            let opts = WaitOptions {
                poll_interval: Duration::from_millis(20),
                timeout: Duration::from_secs(600),
            };
            client
                .wait_task_with(&upid, opts, async {
                    let _ = rx.await;
                })
                .await
        })
    };
    // Let it poll a few times, then cancel.
    eventually("a few polls", || async {
        (h.count("GET", "/nodes/{node}/tasks").await
            + h.count("GET", "/nodes/{node}/tasks/{upid}/status").await
            >= 2)
            .then_some(())
    })
    .await;
    tx.send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("cancel ends the wait promptly")
        .unwrap();
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
}

#[tokio::test]
async fn a_task_not_visible_yet_is_not_a_failure() {
    let h = Harness::start().await;
    // Every observation with a list fetched after the start (a task
    // started after the list was fetched counts as running).
    let client = h.client_with(|c| c.tasks.poll_interval = Duration::ZERO);
    cloned_vm(&client, 505).await;
    // Hidden until released, however long the first observation takes.
    h.fault(json!({"fault": "task-hidden", "task_type": "qmstart", "hold": "unseen", "count": 1}))
        .await;
    let upid = client.start_vm(NODE, 505).await.unwrap();
    let first = client.observe_task(&upid).await.unwrap();
    assert_eq!(first, TaskObservation::NotVisibleYet);
    assert!(
        h.count_status("GET", "/nodes/{node}/tasks/{upid}/status", 400)
            .await
            >= 1
    );
    h.release("unseen").await;
    client.wait_task(&upid).await.unwrap();
}

#[tokio::test]
async fn a_task_unknown_past_the_grace_is_an_error() {
    let h = Harness::start().await;
    let client = h.client_with(|c| {
        c.tasks.not_visible_grace = Duration::from_millis(100);
        c.tasks.poll_interval = Duration::ZERO;
    });
    cloned_vm(&client, 506).await;
    h.fault(json!({"fault": "task-hidden", "task_type": "qmstart", "ms": 600000, "count": 1}))
        .await;
    let upid = client.start_vm(NODE, 506).await.unwrap();
    assert_eq!(
        client.observe_task(&upid).await.unwrap(),
        TaskObservation::NotVisibleYet
    );
    let err = eventually("the grace to run out", || async {
        client.observe_task(&upid).await.err()
    })
    .await;
    assert!(
        matches!(&err, Error::TaskUnknown { upid: u } if u == &upid),
        "{err:?}"
    );
}

#[tokio::test]
async fn progress_costs_a_log_read_at_most_every_progress_interval() {
    let h = Harness::start().await;
    let every = Duration::from_millis(500);
    let client = h.client_with(|c| c.tasks.progress_every = every);
    // The import stays running (held at its first progress line) throughout.
    h.fault(
        json!({"fault": "task-held", "hold": "import", "at": "sleep",
        "task_type": "qmcreate", "count": 1}),
    )
    .await;
    let upid = start_import(&client, 508).await;
    let log_reads = || async {
        h.requests()
            .await
            .into_iter()
            .filter(|r| r["route"] == "/nodes/{node}/tasks/{upid}/log")
            .count()
    };
    // At most one read per whole interval that a window spans: exact
    // (none, then one) when five observations take less than an interval,
    // and still a bound, not a failure, when a busy machine is slower.
    let intervals = |since: Instant| (since.elapsed().as_secs_f64() / every.as_secs_f64()) as usize;
    // Before the first observation, so the task is first seen after it.
    let started = Instant::now();
    for _ in 0..5 {
        let seen = client.observe_task_progress(&upid).await.unwrap();
        assert!(matches!(seen, TaskObservation::Running { .. }), "{seen:?}");
    }
    let early = log_reads().await;
    assert!(
        early <= intervals(started),
        "a task that has not run for the interval yet costs no log read: {early}"
    );
    tokio::time::sleep(every).await;
    let window = Instant::now();
    for _ in 0..5 {
        client.observe_task_progress(&upid).await.unwrap();
    }
    let reads = log_reads().await - early;
    assert!(
        (1..=1 + intervals(window)).contains(&reads),
        "five observations within the interval read the log once: {reads}"
    );
    h.release("import").await;
    client.wait_task(&upid).await.unwrap();
}

#[tokio::test]
async fn import_progress_is_seen_while_a_create_runs() {
    // 3.5 GiB at 120 MiB/s × 0.1 ≈ 3 s of import with ~100 progress lines.
    let h = Harness::start_scaled(0.1).await;
    // Read the log on every observation (the default reads it every 15 s).
    let client = h.client_with(|c| c.tasks.progress_every = Duration::ZERO);
    // Held at its first progress line until the test has seen progress.
    h.fault(
        json!({"fault": "task-held", "hold": "import", "at": "sleep",
        "task_type": "qmcreate", "count": 1}),
    )
    .await;
    let upid = start_import(&client, 507).await;
    let mut seen = Vec::new();
    loop {
        match client.observe_task_progress(&upid).await.unwrap() {
            TaskObservation::Running { progress: Some(p) } => {
                if seen.is_empty() {
                    h.release("import").await;
                }
                seen.push(p.percent)
            }
            TaskObservation::Running { progress: None } | TaskObservation::NotVisibleYet => {}
            TaskObservation::Finished(outcome) => {
                assert!(outcome.is_success(), "{outcome:?}");
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!seen.is_empty(), "no progress observed during the import");
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "progress went backwards: {seen:?}"
    );
    assert!(seen.iter().all(|p| (0.0..=100.0).contains(p)));
}

#[tokio::test]
async fn create_with_import_from_end_to_end() {
    let h = Harness::start().await;
    let client = h.client();
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@example".to_owned();
    let mut params = import_params();
    params
        .disks
        .insert("ide2".parse().unwrap(), Drive::cloud_init("local-lvm"));
    params.nets.insert(0, Nic::new(NicModel::Virtio, "vmbr0"));
    params.ciuser = Some("ubuntu".into());
    params.cipassword = Some(Secret::new("cloud-init-pw"));
    params.sshkeys = Some(SshKeys::new([&key]));
    params.ipconfig.insert(0, IpConfig::dhcp());
    params.tags = Some(Tags::parse("Prod;k8s"));
    params.onboot = Some(true);
    let vmid = client.next_vmid().await.unwrap();
    let upid = client
        .create_vm(
            NODE,
            &CreateVm {
                vmid,
                params,
                ..CreateVm::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(upid.task_type(), "qmcreate");
    client.wait_task(&upid).await.unwrap();

    let cfg = client.vm_config(NODE, vmid).await.unwrap();
    assert!(cfg.lock.is_none());
    assert_eq!(cfg.name.as_deref(), Some("web-1"));
    let scsi0 = &cfg.disks["scsi0"];
    assert_eq!(scsi0.storage(), Some("local-lvm"));
    assert_eq!(scsi0.size, Some(3584 << 20), "the image's virtual size");
    assert!(cfg.disks["ide2"].is_cloudinit());
    assert_eq!(cfg.sshkeys, [key]);
    assert!(cfg.cipassword_set);
    assert_eq!(cfg.tags, Tags::parse("k8s;prod"));
    assert_eq!(cfg.ipconfig[&0], IpConfig::dhcp());
    assert_eq!(cfg.nets[&0].bridge.as_deref(), Some("vmbr0"));
    assert!(cfg.nets[&0].mac.is_some(), "PVE generates a MAC");
    assert_eq!(cfg.onboot, Some(true));
    assert!(!cfg.raw.contains_key("import-from"));
    assert!(has_import(&client, IMAGE).await, "the image stays");

    // Grow the disk, then power-cycle and delete.
    let resize = client
        .resize_disk(NODE, vmid, "scsi0", DiskSize::Grow(gib(2)))
        .await
        .unwrap();
    client.wait_task(&resize).await.unwrap();
    let cfg = client.vm_config(NODE, vmid).await.unwrap();
    assert_eq!(cfg.disks["scsi0"].size, Some((3584 << 20) + gib(2)));

    let start = client.start_vm(NODE, vmid).await.unwrap();
    client.wait_task(&start).await.unwrap();
    assert!(client.vm_status(NODE, vmid).await.unwrap().is_running());
    let shutdown = client
        .shutdown_vm(
            NODE,
            vmid,
            ShutdownOptions {
                timeout: Some(60),
                force_stop: Some(true),
            },
        )
        .await
        .unwrap();
    client.wait_task(&shutdown).await.unwrap();
    assert!(!client.vm_status(NODE, vmid).await.unwrap().is_running());

    let delete = client
        .delete_vm(
            NODE,
            vmid,
            DeleteOptions {
                purge: true,
                destroy_unreferenced_disks: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(delete.task_type(), "qmdestroy");
    client.wait_task(&delete).await.unwrap();
    assert!(
        client
            .vm_status(NODE, vmid)
            .await
            .unwrap_err()
            .is_not_found()
    );
}
