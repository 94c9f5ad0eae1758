//! Offline nodes (595 through the proxy) and quorum loss, driven through the
//! control API.

use reqwest::Method;
use serde_json::json;

use crate::common::start_with;

#[tokio::test]
async fn offline_nodes_answer_595_and_quorum_follows_the_majority() {
    let sim = start_with(|c| c.nodes = vec!["pve".into(), "pve2".into(), "pve3".into()]).await;
    let r = sim
        .control(Method::POST, "/nodes/pve3", Some(json!({"online": false})))
        .await;
    assert_eq!(r["quorate"], true);
    let down = sim.get("/nodes/pve3/qemu").await;
    assert_eq!(down.status, 595);
    assert_eq!(
        down.reason,
        "Errors during connection establishment, proxy handshake: No route to host"
    );
    let nodes = sim
        .get_q("/cluster/resources", &[("type", "node")])
        .await
        .data();
    let pve3 = nodes
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "pve3")
        .unwrap();
    assert_eq!(pve3["status"], "offline");
    assert!(pve3.get("mem").is_none(), "{pve3}");
    let status = sim.get("/cluster/status").await.data();
    assert_eq!(status[3]["online"], 0);
    sim.create_plain("100", &[]).await;

    sim.control(Method::POST, "/nodes/pve2", Some(json!({"online": false})))
        .await;
    let status = sim.get("/cluster/status").await.data();
    assert_eq!(status[0]["quorate"], 0);
    let write = sim.post("/nodes/pve/qemu", &[("vmid", "101")]).await;
    assert_eq!(write.status, 500);
    assert_eq!(write.reason, "cluster not ready - no quorum?");
    assert_eq!(sim.get("/nodes/pve/qemu/100/config").await.status, 200);

    sim.control(Method::POST, "/nodes/pve2", Some(json!({"online": true})))
        .await;
    sim.create_plain("101", &[]).await;
    sim.control(Method::POST, "/quorum", Some(json!({"quorate": false})))
        .await;
    let write = sim.post("/nodes/pve/qemu/101/status/start", &[]).await;
    assert_eq!(write.reason, "cluster not ready - no quorum?");
    sim.control(Method::POST, "/quorum", Some(json!({"quorate": true})))
        .await;
    sim.power("101", "start").await;
}
