//! Paths of PVE's API the simulator does not model answer as PVE does for an
//! unconfigured feature; writes are refused with `pve-sim: not simulated`.

use crate::common::start;

#[tokio::test]
async fn unconfigured_features_answer_like_pve() {
    let sim = start().await;
    assert_eq!(
        sim.get("/cluster/firewall/rules").await.data(),
        serde_json::json!([])
    );
    let alias = sim.get("/cluster/firewall/aliases/office").await;
    assert_eq!(alias.status, 500);
    assert_eq!(alias.reason, "no such alias 'office'");
    let ceph = sim.get("/nodes/pve/ceph/status").await;
    assert_eq!(ceph.reason, "binary not installed: /usr/bin/ceph-mon");
    let index = sim.get("/cluster").await.data();
    let dirs: Vec<&str> = index
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["subdir"].as_str().unwrap())
        .collect();
    assert!(
        dirs.contains(&"resources") && dirs.contains(&"status"),
        "{dirs:?}"
    );
    // Guests in the path must exist, as PVE loads their config first.
    let missing = sim.get("/nodes/pve/qemu/4242/firewall/rules").await;
    assert_eq!(
        missing.reason,
        "Configuration file 'nodes/pve/qemu-server/4242.conf' does not exist"
    );
    let rules = sim.get("/nodes/pve/qemu/9000/firewall/rules").await.data();
    assert_eq!(rules, serde_json::json!([]));
    let write = sim
        .post("/cluster/jobs/realm-sync/sync1", &[("schedule", "daily")])
        .await;
    assert_eq!(write.status, 501);
    assert!(
        write.reason.starts_with("pve-sim: not simulated"),
        "{}",
        write.reason
    );
    // Not a PVE path: still PVE's own 501.
    let unknown = sim.get("/cluster/nope").await;
    assert_eq!(unknown.status, 501);
    assert_eq!(unknown.reason, "Method 'GET /cluster/nope' not implemented");
    // Generic answers still need authentication.
    let anon = sim
        .send(sim.client.get(sim.url("/cluster/firewall/rules")))
        .await;
    assert_eq!(anon.status, 401);
}
