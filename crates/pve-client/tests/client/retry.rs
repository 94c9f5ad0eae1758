//! Retry bounds, counted on pve-sim: reads and sync writes retry transient
//! and lock errors up to the bound; a task-starting write is sent again
//! only when the failure proves it never ran.

use std::time::Duration;

use pve_client::vm::{ConfigUpdate, VmParams};
use pve_client::{Error, RetryPolicy};
use serde_json::json;

use crate::harness::{Harness, NODE, cloned_vm, http_fault};

fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        retry_locked: true,
    }
}

#[tokio::test]
async fn a_read_is_retried_up_to_the_bound_then_gives_up() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = policy(3));
    h.fault(http_fault("GET", "/version", 596, None)).await;
    let err = client.version().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Transient {
                status: Some(596),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        h.count("GET", "/version").await,
        3,
        "exactly max_attempts requests"
    );
}

#[tokio::test]
async fn a_read_recovers_within_the_bound() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = policy(4));
    h.fault(http_fault("GET", "/version", 503, Some(3))).await;
    client.version().await.unwrap();
    // Three 503s, then success.
    assert_eq!(h.count("GET", "/version").await, 4);

    // A reset connection is retried the same way.
    h.clear_stats().await;
    h.fault(json!({"method": "GET", "path": "/version", "fault": "reset", "count": 1}))
        .await;
    client.version().await.unwrap();
    assert_eq!(h.count("GET", "/version").await, 2);
}

#[tokio::test]
async fn a_read_sees_a_503_then_a_reset_then_succeeds() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = policy(4));
    h.fault(
        json!({"method": "GET", "path": "/version", "fault": "sequence", "steps": [
            {"fault": "http-error", "status": 503},
            {"fault": "reset"},
        ]}),
    )
    .await;
    client.version().await.unwrap();
    assert_eq!(
        h.count("GET", "/version").await,
        3,
        "exactly three requests"
    );
    for status in [503, 0, 200] {
        assert_eq!(
            h.count_status("GET", "/version", status).await,
            1,
            "{status}"
        );
    }
}

#[tokio::test]
async fn a_task_start_answered_without_a_upid_is_an_error_and_not_resent() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = policy(5));
    cloned_vm(&client, 403).await;
    let route = "/nodes/{node}/qemu/{vmid}/status/start";
    h.clear_stats().await;
    let tasks_before = h.sim.task_count();
    h.fault(json!({"method": "POST", "path": route, "fault": "null-data", "count": 1}))
        .await;
    let err = client.start_vm(NODE, 403).await.unwrap_err();
    match &err {
        Error::MissingUpid { endpoint, body } => {
            assert_eq!(endpoint, &format!("POST {route}"));
            assert_eq!(body, r#"{"data":null}"#);
        }
        other => panic!("expected MissingUpid, got {other:?}"),
    }
    assert!(!err.is_retryable(), "{err:?}");
    assert!(err.to_string().contains("returned no task id"), "{err}");
    assert_eq!(h.count("POST", route).await, 1, "sent once only");
    // The answer was lost, not the work: the start ran once.
    assert_eq!(h.sim.task_count(), tasks_before + 1);
}

#[tokio::test]
async fn a_task_starting_write_is_never_resent_when_it_may_have_run() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = policy(5));
    cloned_vm(&client, 400).await;
    let route = "/nodes/{node}/qemu/{vmid}/status/start";
    for fault in [
        http_fault("POST", route, 596, Some(1)),
        http_fault("POST", route, 599, Some(1)),
        http_fault("POST", route, 502, Some(1)),
        json!({"method": "POST", "path": route, "fault": "reset", "count": 1}),
    ] {
        h.clear_stats().await;
        h.fault(fault.clone()).await;
        let err = client.start_vm(NODE, 400).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Transient {
                    may_have_run: true,
                    ..
                }
            ),
            "{fault}: {err:?}"
        );
        assert_eq!(h.count("POST", route).await, 1, "{fault}: sent once only");
    }
}

#[tokio::test]
async fn a_task_starting_write_is_resent_when_it_provably_did_not_run() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = policy(5));
    cloned_vm(&client, 401).await;
    let route = "/nodes/{node}/qemu/{vmid}/status/start";
    let tasks_before = h.sim.task_count();
    h.fault(http_fault("POST", route, 595, Some(2))).await;
    let upid = client.start_vm(NODE, 401).await.unwrap();
    assert_eq!(h.count("POST", route).await, 3, "two 595s, then the start");
    assert_eq!(
        h.sim.task_count(),
        tasks_before + 1,
        "exactly one task started"
    );
    client.wait_task(&upid).await.unwrap();
}

#[tokio::test]
async fn a_sync_write_is_retried_on_a_lock_timeout() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = policy(3));
    cloned_vm(&client, 402).await;
    let route = "/nodes/{node}/qemu/{vmid}/config";
    h.fault(json!({"method": "PUT", "path": route, "fault": "lock-timeout", "count": 1}))
        .await;
    let update = ConfigUpdate {
        set: VmParams {
            cores: Some(3),
            ..VmParams::default()
        },
        ..ConfigUpdate::default()
    };
    client
        .update_vm_config_sync(NODE, 402, &update)
        .await
        .unwrap();
    assert_eq!(h.count("PUT", route).await, 2);
    assert_eq!(client.vm_config(NODE, 402).await.unwrap().cores, Some(3));

    // With lock retries off, the lock comes back at once.
    let no_lock_retry = h.client_with(|c| {
        c.retry = RetryPolicy {
            retry_locked: false,
            ..policy(3)
        };
    });
    h.clear_stats().await;
    h.fault(json!({"method": "PUT", "path": route, "fault": "lock-timeout", "count": 1}))
        .await;
    let err = no_lock_retry
        .update_vm_config_sync(NODE, 402, &update)
        .await
        .unwrap_err();
    assert!(err.is_locked(), "{err:?}");
    assert_eq!(h.count("PUT", route).await, 1);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let h = Harness::start().await;
    let client = h.client_with(|c| c.retry = policy(5));
    h.fault(http_fault("GET", "/version", 500, None)).await;
    let err = client.version().await.unwrap_err();
    assert!(matches!(err, Error::Api { status: 500, .. }), "{err:?}");
    assert_eq!(h.count("GET", "/version").await, 1);
}
