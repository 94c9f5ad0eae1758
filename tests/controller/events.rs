//! Events are correlated as Kubernetes' own recorders do, on the real API
//! server: repeats patch the count of one Event, similar events are
//! combined, and a burst about one object is cut by its rate limit.

use std::sync::Arc;

use provider_proxmox::reconcile::events::Events;
use provider_proxmox::reconcile::runtime::metrics::Metrics;
use provider_proxmox::reconcile::vm::plan;
use serde_json::json;

use crate::reconcile::{Env, Options, manifests};
use crate::support;

const COMBINED: &str = "(combined from similar events): ";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_about_one_object_makes_a_handful_of_events() {
    // No controller: the test is the only publisher.
    let env = Env::without_controller("events", Options::default()).await;
    let mut vm = manifests::vm("web", manifests::imported(json!({})));
    vm["metadata"]["annotations"] = json!({"crossplane.io/paused": "true"});
    env.apply(&vm).await;
    let vm = env.vm("web").await;
    let metrics = Arc::new(Metrics::default());
    let events = Events::new(support::client(), "test".into(), Arc::clone(&metrics));

    // 100 similar events: one reason, a message each (as UPIDs make them).
    const BURST: usize = 100;
    for i in 0..BURST {
        let event = plan::Event {
            warning: false,
            reason: "TaskStarted",
            note: format!("started qmcreate: UPID:pve:{i:08X}:qmcreate:100:"),
        };
        events.publish(&vm, &event).await;
    }
    // 5 identical ones of the other type.
    for _ in 0..5 {
        let event = plan::Event {
            warning: true,
            reason: "VmidTaken",
            note: "VMID 100 was taken".into(),
        };
        events.publish(&vm, &event).await;
    }

    let written = env.events("web").await;
    let normal: Vec<_> = written.iter().filter(|e| e.0 == "Normal").collect();
    // 9 distinct messages alone, then one combined event whose count grows
    // until the object's 25 writes are spent; the other 75 are dropped.
    assert_eq!(normal.len(), 10, "{normal:#?}");
    let alone = normal
        .iter()
        .filter(|e| !e.2.starts_with(COMBINED))
        .collect::<Vec<_>>();
    assert_eq!(alone.len(), 9);
    assert!(alone.iter().all(|e| e.3 == 1), "{alone:#?}");
    let combined = normal
        .iter()
        .find(|e| e.2.starts_with(COMBINED))
        .expect("a combined event");
    assert_eq!(combined.1, "TaskStarted");
    assert_eq!(combined.3, 16, "{combined:?}");
    assert_eq!(
        combined.2,
        format!(
            "{COMBINED}started qmcreate: UPID:pve:{:08X}:qmcreate:100:",
            24
        ),
        "the latest message written"
    );
    let warnings: Vec<_> = written.iter().filter(|e| e.0 == "Warning").collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        (
            warnings[0].1.as_str(),
            warnings[0].2.as_str(),
            warnings[0].3
        ),
        ("VmidTaken", "VMID 100 was taken", 5)
    );

    let text = metrics.encode();
    for line in [
        "proxmox_provider_events_total{write=\"create\"} 11",
        "proxmox_provider_events_total{write=\"patch\"} 19",
        "proxmox_provider_events_total{write=\"dropped\"} 75",
        "proxmox_provider_event_publish_failures_total 0",
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
}
