//! Observation at scale, counted on pve-sim: one active-task list per node
//! per interval answers for every task in flight, so the batched observer
//! makes far fewer requests than per-task polling.

use std::time::Duration;

use futures::future::join_all;
use pve_client::{Client, ObserveMode, TaskObservation, TaskOutcome, Upid};
use pve_sim::{Durations, SimConfig};
use serde_json::json;

use crate::harness::{Harness, clone_template, eventually, start_import};

const LIST: &str = "/nodes/{node}/tasks";
const STATUS: &str = "/nodes/{node}/tasks/{upid}/status";
const LOG: &str = "/nodes/{node}/tasks/{upid}/log";

/// A simulator whose imports take about an hour: tasks stay in flight for
/// the whole test.
async fn sim_with_long_imports() -> Harness {
    Harness::start_with(SimConfig {
        time_scale: 1.0,
        durations: Durations {
            import_bytes_per_sec: 1 << 20,
            ..Durations::default()
        },
        ..SimConfig::default()
    })
    .await
}

async fn start_imports(client: &Client, first_vmid: u32, n: u32) -> Vec<Upid> {
    let mut upids = Vec::new();
    for vmid in first_vmid..first_vmid + n {
        upids.push(start_import(client, vmid).await);
    }
    upids
}

async fn observe_round(client: &Client, upids: &[Upid]) {
    let results = join_all(upids.iter().map(|u| client.observe_task(u))).await;
    for r in results {
        assert!(
            matches!(r, Ok(TaskObservation::Running { .. })),
            "every task is still running: {r:?}"
        );
    }
}

#[tokio::test]
async fn batched_observation_beats_per_task_polling_for_30_tasks() {
    const TASKS: u32 = 30;
    const ROUNDS: u64 = 3;
    let h = sim_with_long_imports().await;
    let interval = Duration::from_millis(1000);
    let batched = h.client_with(|c| {
        c.tasks.poll_interval = interval;
        c.tasks.observe_mode = ObserveMode::Batched;
    });
    let per_task = h.client_with(|c| {
        c.tasks.poll_interval = interval;
        c.tasks.observe_mode = ObserveMode::PerTask;
    });
    let upids = start_imports(&batched, 600, TASKS).await;

    h.clear_stats().await;
    for round in 0..ROUNDS {
        if round > 0 {
            tokio::time::sleep(interval + Duration::from_millis(100)).await;
        }
        observe_round(&batched, &upids).await;
    }
    let batched_lists = h.count("GET", LIST).await;
    let batched_status = h.count("GET", STATUS).await;
    let batched_total = h.total().await;

    h.clear_stats().await;
    for _ in 0..ROUNDS {
        observe_round(&per_task, &upids).await;
    }
    let per_task_status = h.count("GET", STATUS).await;
    let per_task_total = h.total().await;

    // One list per node per round (two if a slow round straddles the
    // interval), and no per-task requests while tasks run.
    assert!(
        (ROUNDS..=2 * ROUNDS).contains(&batched_lists),
        "batched list requests: {batched_lists}"
    );
    assert_eq!(batched_status, 0, "running tasks cost no status request");
    assert_eq!(per_task_status, u64::from(TASKS) * ROUNDS);
    assert!(
        batched_total * 5 <= per_task_total,
        "batched {batched_total} vs per-task {per_task_total}"
    );
}

#[tokio::test]
async fn concurrent_observers_share_one_list_request() {
    let h = sim_with_long_imports().await;
    let client = h.client_with(|c| c.tasks.poll_interval = Duration::from_secs(30));
    let upids = start_imports(&client, 700, 20).await;
    h.clear_stats().await;
    let observers: Vec<_> = upids
        .iter()
        .cloned()
        .map(|u| {
            let c = client.clone();
            tokio::spawn(async move { c.observe_task(&u).await })
        })
        .collect();
    for o in observers {
        assert!(matches!(
            o.await.unwrap(),
            Ok(TaskObservation::Running { .. })
        ));
    }
    assert_eq!(h.count("GET", LIST).await, 1, "single flight per node");
    assert_eq!(h.total().await, 1);
}

#[tokio::test]
async fn finished_tasks_cost_no_request_of_their_own() {
    const TASKS: u32 = 10;
    let h = Harness::start().await;
    let client = h.client_with(|c| c.tasks.poll_interval = Duration::from_millis(50));
    let mut upids = Vec::new();
    for i in 0..TASKS {
        upids.push(clone_template(&client, 800 + i).await);
    }
    h.clear_stats().await;
    let outcomes = observe_until_finished(&client, &upids).await;
    assert!(outcomes.iter().all(TaskOutcome::is_success), "{outcomes:?}");
    // A finished task is listed RUNNING until PVE archives it, then with
    // its exit status in the archive part of the same list (`source=all`,
    // since the oldest task followed): no status request at all.
    assert_eq!(h.count("GET", STATUS).await, 0);
    assert!(h.count("GET", LIST).await >= 1);
    // Finished outcomes are cached: observing again is free.
    h.clear_stats().await;
    for u in &upids {
        assert!(matches!(
            client.observe_task(u).await.unwrap(),
            TaskObservation::Finished(_)
        ));
    }
    assert_eq!(h.total().await, 0);
    assert_eq!(client.observed_tasks(), TASKS as usize);
}

/// Observes every task until all have finished; returns the outcomes.
async fn observe_until_finished(client: &Client, upids: &[Upid]) -> Vec<TaskOutcome> {
    let mut outcomes = Vec::new();
    let mut pending: Vec<Upid> = upids.to_vec();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !pending.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "tasks never finished"
        );
        let mut still = Vec::new();
        for u in pending {
            match client.observe_task(&u).await.unwrap() {
                TaskObservation::Finished(outcome) => outcomes.push(outcome),
                _ => still.push(u),
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    outcomes
}

/// PVE lists a stopped task as `RUNNING` in the active list until an
/// archival pass moves it to the archive (pve-common `active_workers`), so
/// the batched observer cannot know it finished before then; afterwards the
/// archive part of the same list shows its exit status.
#[tokio::test]
async fn a_stopped_task_counts_as_running_until_archived_then_the_list_tells_its_end() {
    // Only a task start on the node archives.
    let h =
        Harness::start_with_durations(|d| d.task_archive = Duration::from_secs(1_000_000)).await;
    let client = h.client_with(|c| c.tasks.poll_interval = Duration::from_millis(50));
    let upid = clone_template(&client, 820).await;
    eventually("the clone to stop", || async {
        let status = client.task_status(&upid).await.unwrap();
        (!status.is_running()).then_some(())
    })
    .await;

    h.clear_stats().await;
    let seen = client.observe_task(&upid).await.unwrap();
    assert!(matches!(seen, TaskObservation::Running { .. }), "{seen:?}");
    assert_eq!(
        (h.count("GET", LIST).await, h.count("GET", STATUS).await),
        (1, 0),
        "the list answered: still RUNNING"
    );

    // Starting another task runs PVE's archival pass on the node; the
    // list is fetched again once the poll interval has passed.
    clone_template(&client, 821).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    h.clear_stats().await;
    let seen = client.observe_task(&upid).await.unwrap();
    assert!(
        matches!(seen, TaskObservation::Finished(ref o) if o.is_success()),
        "{seen:?}"
    );
    assert_eq!(
        (h.count("GET", LIST).await, h.count("GET", STATUS).await),
        (1, 0),
        "archived: the list shows its exit status"
    );
}

/// When the archival pass cannot write the task index, PVE keeps stopped
/// tasks in the active list with their exit status: then the list alone
/// tells the outcome, and only a failed task costs a request (its log tail).
#[tokio::test]
async fn with_an_unwritable_task_index_the_active_list_tells_the_outcome() {
    const TASKS: u32 = 6;
    let h = Harness::start().await;
    let client = h.client_with(|c| c.tasks.poll_interval = Duration::from_millis(50));
    h.fault(json!({"fault": "archive-error"})).await;
    h.fault(
        json!({"fault": "task-fail", "task_type": "qmclone", "message": "disk full", "count": 1}),
    )
    .await;
    let mut upids = Vec::new();
    for i in 0..TASKS {
        upids.push(clone_template(&client, 830 + i).await);
    }
    h.clear_stats().await;
    let outcomes = observe_until_finished(&client, &upids).await;
    let failed: Vec<_> = outcomes.iter().filter(|o| !o.is_success()).collect();
    assert!(
        matches!(failed.as_slice(), [TaskOutcome::Failed { exit_status, .. }] if exit_status == "clone failed: disk full"),
        "{outcomes:?}"
    );
    assert_eq!(h.count("GET", STATUS).await, 0, "no status request at all");
    assert_eq!(h.count("GET", LOG).await, 1, "the failed task's log tail");
}

#[tokio::test]
async fn the_active_task_list_is_shared_and_refetched_after_a_dispatch() {
    let h = sim_with_long_imports().await;
    let client = h.client_with(|c| c.tasks.poll_interval = Duration::from_secs(30));
    let first = start_imports(&client, 900, 1).await.remove(0);
    h.clear_stats().await;
    let listed = client.active_tasks("pve").await.unwrap();
    assert!(
        listed
            .iter()
            .any(|e| e.upid == first.as_str() && e.is_running())
    );
    client.active_tasks("pve").await.unwrap();
    assert_eq!(h.count("GET", LIST).await, 1, "reused within the interval");

    // A task started through this client makes the next list a fresh one:
    // a list from before the dispatch cannot say whether it runs.
    let second = start_imports(&client, 901, 1).await.remove(0);
    let listed = client.active_tasks("pve").await.unwrap();
    assert!(
        listed.iter().any(|e| e.upid == second.as_str()),
        "{listed:?}"
    );
    assert_eq!(h.count("GET", LIST).await, 2);
}

#[tokio::test]
async fn the_request_hook_sees_every_exchange() {
    use std::sync::{Arc, Mutex};
    let h = Harness::start().await;
    type Seen = Vec<(String, String, Option<u16>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let log = Arc::clone(&seen);
    let client = h.client_with(|c| {
        c.request_hook = Some(pve_client::RequestHook::new(move |r| {
            log.lock()
                .unwrap()
                .push((r.method.to_owned(), r.path.to_owned(), r.status));
        }))
    });
    h.clear_stats().await;
    client.version().await.unwrap();
    assert!(client.vm_status("pve", 4242).await.is_err());
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            ("GET".to_owned(), "/version".to_owned(), Some(200)),
            (
                "GET".to_owned(),
                "/nodes/{node}/qemu/{vmid}/status/current".to_owned(),
                Some(500)
            ),
        ]
    );
    assert_eq!(h.total().await, 2, "one record per request the sim saw");
}
