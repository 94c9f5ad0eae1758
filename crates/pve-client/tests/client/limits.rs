//! The per-client concurrency cap, checked on pve-sim's request log.

use serde_json::json;

use crate::harness;
use crate::harness::Harness;

/// With at most 2 requests in flight and every request held 300 ms by the
/// server, request `i + 2` can only be sent after request `i` or `i + 1`
/// has completed — so it arrives at least 300 ms after request `i` did.
/// This is a causal bound (a slow machine only widens the gaps), not a
/// speed measurement.
#[tokio::test]
async fn no_more_than_the_cap_is_in_flight() {
    const HOLD_MS: u64 = 300;
    let h = Harness::start().await;
    let client = h.client_with(|c| c.limits.max_concurrent_requests = 2);
    h.fault(json!({"method": "GET", "path": "/version", "fault": "latency", "ms": HOLD_MS}))
        .await;
    harness::concurrent_versions(&client, 6).await;
    let mut arrivals: Vec<f64> = h
        .requests()
        .await
        .iter()
        .filter(|r| r["path"] == "/version")
        .map(|r| r["time"].as_f64().unwrap())
        .collect();
    assert_eq!(arrivals.len(), 6);
    arrivals.sort_by(f64::total_cmp);
    // 10 ms of slack for clock granularity.
    let hold = (HOLD_MS as f64 - 10.0) / 1000.0;
    for i in 0..arrivals.len() - 2 {
        let gap = arrivals[i + 2] - arrivals[i];
        assert!(
            gap >= hold,
            "requests {i} and {} overlapped a third: {arrivals:?}",
            i + 2
        );
    }
}

/// A closed write gate keeps a write from going out (nothing reaches
/// Proxmox), reads are not asked about, and the gate is asked at the
/// moment of sending: opened again, the same client writes.
#[tokio::test]
async fn a_closed_write_gate_sends_no_write() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let h = Harness::start().await;
    let open = Arc::new(AtomicBool::new(false));
    let gate = Arc::clone(&open);
    let client = h.client_with(|c| {
        c.write_gate = Some(pve_client::WriteGate::new(move || {
            gate.load(Ordering::SeqCst)
        }));
    });
    let refused = client.create_pool("gated", "").await;
    assert!(
        matches!(refused, Err(pve_client::Error::NotSent { .. })),
        "{refused:?}"
    );
    assert_eq!(h.count("POST", "/pools").await, 0, "nothing sent");
    assert!(
        client.pool("gated").await.unwrap().is_none(),
        "reads go out"
    );
    open.store(true, Ordering::SeqCst);
    client.create_pool("gated", "").await.unwrap();
    assert_eq!(h.count("POST", "/pools").await, 1);
}
