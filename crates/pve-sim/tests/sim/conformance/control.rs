//! The control API: fault injection, statistics and the request log.

use reqwest::Method;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn http_faults_have_pve_reason_phrases() {
    let sim = start().await;
    let id = sim.add_fault(json!({"method": "GET", "path": "/cluster/nextid", "fault": "http-error", "status": 596, "count": 2})).await;
    for _ in 0..2 {
        let resp = sim.get("/cluster/nextid").await;
        assert_eq!(
            (resp.status, resp.reason.as_str(), resp.body.as_str()),
            (596, "Connection timed out", "")
        );
    }
    assert_eq!(
        sim.get("/cluster/nextid").await.status,
        200,
        "count exhausted"
    );
    let listed = sim.control(Method::GET, "/faults", None).await;
    assert!(
        listed["faults"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["id"] != id)
    );

    sim.add_fault(json!({"path": "/version", "fault": "http-error", "status": 595}))
        .await;
    let resp = sim.get("/version").await;
    assert_eq!(
        (resp.status, resp.reason.as_str()),
        (
            595,
            "Errors during connection establishment, proxy handshake: Connection refused"
        )
    );
    sim.control(Method::DELETE, "/faults", None).await;
    assert_eq!(sim.get("/version").await.status, 200);

    sim.add_fault(json!({"path": "/version", "fault": "http-error", "status": 500, "message": "cfs-lock 'file-user_cfg' error: got lock request timeout", "count": 1})).await;
    let resp = sim.get("/version").await;
    assert_eq!(
        resp.reason,
        "cfs-lock 'file-user_cfg' error: got lock request timeout"
    );
    assert_eq!(
        resp.json()["message"],
        "cfs-lock 'file-user_cfg' error: got lock request timeout\n"
    );
}

#[tokio::test]
async fn connection_resets_and_latency() {
    let sim = start().await;
    sim.add_fault(json!({"path": "/version", "fault": "reset", "count": 1}))
        .await;
    let err = sim.req(Method::GET, "/version").send().await;
    assert!(err.is_err(), "the connection is dropped without a response");
    assert_eq!(sim.get("/version").await.status, 200);
    sim.add_fault(json!({"path": "/version", "fault": "latency", "ms": 50, "count": 1}))
        .await;
    assert_eq!(
        sim.get("/version").await.status,
        200,
        "latency delays but answers"
    );
    let stats = sim.control(Method::GET, "/stats", None).await;
    assert_eq!(
        stats["requests"]["GET /version"]["status"]["0"], 1,
        "resets are counted with status 0"
    );
}

#[tokio::test]
async fn task_faults() {
    let sim = start().await;
    sim.create_plain("100", &[]).await;
    sim.add_fault(json!({"fault": "task-fail", "task_type": "qmstart", "message": "start failed: QEMU exited with code 1", "count": 1})).await;
    let failed = sim
        .post("/nodes/pve/qemu/100/status/start", &[])
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&failed).await["exitstatus"],
        "start failed: QEMU exited with code 1"
    );
    assert_eq!(
        sim.get("/nodes/pve/qemu/100/status/current").await.data()["status"],
        "stopped"
    );

    sim.add_fault(
        json!({"fault": "task-warnings", "task_type": "qmstart", "warnings": 2, "count": 1}),
    )
    .await;
    let warned = sim
        .post("/nodes/pve/qemu/100/status/start", &[])
        .await
        .upid();
    assert_eq!(sim.wait_task(&warned).await["exitstatus"], "WARNINGS: 2");
    let log = sim.task_log(&warned).await;
    assert_eq!(log.last().unwrap(), "TASK WARNINGS: 2");
    assert_eq!(log.iter().filter(|l| l.starts_with("WARN: ")).count(), 2);

    // A created VM whose task fails is removed again.
    sim.add_fault(json!({"fault": "task-fail", "task_type": "qmcreate", "count": 1}))
        .await;
    let create = sim
        .post(
            "/nodes/pve/qemu",
            &[("vmid", "101"), ("scsi0", "local-lvm:1")],
        )
        .await
        .upid();
    assert_eq!(
        sim.wait_task(&create).await["exitstatus"],
        "unable to create VM 101 - pve-sim: injected task failure"
    );
    assert_eq!(sim.get("/nodes/pve/qemu/101/config").await.status, 500);

    // Hidden until released, however long the look takes.
    sim.add_fault(
        json!({"fault": "task-hidden", "task_type": "qmstop", "hold": "unseen", "count": 1}),
    )
    .await;
    let hidden = sim
        .post("/nodes/pve/qemu/100/status/stop", &[])
        .await
        .upid();
    let first = sim
        .get(&format!("/nodes/pve/tasks/{}/status", urlencode(&hidden)))
        .await;
    assert_eq!(
        first.errors(),
        json!({"upid": "no such task"}),
        "not visible right after dispatch"
    );
    sim.release("unseen").await;
    sim.task_ok(&hidden).await;
}

#[tokio::test]
async fn stats_and_request_log_redact_secrets() {
    let sim = start().await;
    sim.get("/version").await;
    sim.get("/version").await;
    sim.send(
        sim.client
            .post(sim.url("/access/ticket"))
            .form(&form(&[("username", "root@pam"), ("password", "pve-sim")])),
    )
    .await;
    sim.post(
        "/nodes/pve/qemu",
        &[("vmid", "102"), ("cipassword", "top-secret")],
    )
    .await;
    let upid = sim
        .get_q("/nodes/pve/tasks", &[("source", "all")])
        .await
        .data()[0]["upid"]
        .as_str()
        .unwrap()
        .to_owned();
    sim.get(&format!("/nodes/pve/tasks/{}/status", urlencode(&upid)))
        .await;

    let stats = sim.control(Method::GET, "/stats", None).await;
    assert_eq!(stats["requests"]["GET /version"]["count"], 2);
    assert_eq!(
        stats["requests"]["GET /nodes/{node}/tasks/{upid}/status"]["count"],
        1
    );
    assert_eq!(
        stats["requests"]["POST /nodes/{node}/qemu"]["status"]["200"],
        1
    );
    assert!(stats["status"]["200"].as_u64().unwrap() >= 5);

    let log = sim.control(Method::GET, "/requests", None).await;
    let text = log.to_string();
    assert!(
        !text.contains("top-secret") && !text.contains("pve-sim\""),
        "secrets never enter the log: {text}"
    );
    let entries = log["requests"].as_array().unwrap();
    let create = entries
        .iter()
        .find(|e| e["method"] == "POST" && e["route"] == "/nodes/{node}/qemu")
        .unwrap();
    assert_eq!(create["params"]["cipassword"], "**redacted**");
    assert_eq!(create["params"]["vmid"], "102");
    assert_eq!(create["user"], "root@pam!sim");
    assert_eq!(create["status"], 200);

    sim.control(Method::DELETE, "/requests", None).await;
    assert_eq!(sim.control(Method::GET, "/stats", None).await["total"], 0);
    assert_eq!(
        sim.control(Method::GET, "/requests", None).await["requests"],
        json!([])
    );
}

#[tokio::test]
async fn rust_handle_controls_the_same_state() {
    let sim = start().await;
    let rule: pve_sim::FaultRule = serde_json::from_value(
        json!({"path": "/version", "fault": "http-error", "status": 599, "count": 1}),
    )
    .unwrap();
    sim.handle.add_fault(rule).unwrap();
    let resp = sim.get("/version").await;
    assert_eq!(
        (resp.status, resp.reason.as_str()),
        (599, "Too many redirections")
    );
    assert_eq!(
        sim.handle.stats()["requests"]["GET /version"]["status"]["599"],
        1
    );
    let log = sim.handle.requests();
    assert_eq!(
        (log.len(), log[0].status, log[0].route.as_deref()),
        (1, 599, Some("/version"))
    );
    sim.handle.clear_requests();
    assert!(sim.handle.requests().is_empty());
    assert_eq!(
        sim.handle.control_url(),
        format!("{}/_sim", sim.handle.base_url())
    );
}

#[tokio::test]
async fn a_sequence_scripts_consecutive_answers() {
    let sim = start().await;
    let id = sim
        .add_fault(
            json!({"method": "GET", "path": "/version", "fault": "sequence", "steps": [
            {"fault": "http-error", "status": 503},
            {"fault": "reset"},
            {"fault": "pass"},
            {"fault": "http-error", "status": 596}]}),
        )
        .await;
    let first = sim.get("/version").await;
    assert_eq!(
        (first.status, first.reason.as_str()),
        (503, "Service Unavailable")
    );
    let listed = sim.control(Method::GET, "/faults", None).await;
    assert_eq!(listed["faults"][0]["id"], id);
    assert_eq!(listed["faults"][0]["next_step"], 1);
    assert!(
        sim.req(Method::GET, "/version").send().await.is_err(),
        "reset"
    );
    assert_eq!(sim.get("/version").await.status, 200, "pass");
    assert_eq!(sim.get("/version").await.status, 596);
    assert_eq!(sim.get("/version").await.status, 200, "used up");
    assert_eq!(
        sim.control(Method::GET, "/faults", None).await["faults"],
        json!([])
    );
}

#[tokio::test]
async fn rules_are_used_up_in_order_one_answer_per_request() {
    let sim = start().await;
    sim.add_fault(json!({"path": "/version", "fault": "http-error", "status": 503, "count": 1}))
        .await;
    sim.add_fault(json!({"path": "/version", "fault": "reset", "count": 1}))
        .await;
    assert_eq!(sim.get("/version").await.status, 503);
    assert!(sim.req(Method::GET, "/version").send().await.is_err());
    assert_eq!(sim.get("/version").await.status, 200);
    let stats = sim.control(Method::GET, "/stats", None).await;
    assert_eq!(
        stats["requests"]["GET /version"]["status"],
        json!({"0": 1, "200": 1, "503": 1})
    );
}

#[tokio::test]
async fn invalid_rules_are_refused() {
    let sim = start().await;
    for rule in [
        json!({"fault": "sequence", "steps": []}),
        json!({"fault": "sequence", "steps": [{"fault": "reset"}, {"fault": "task-fail"}]}),
        json!({"fault": "archive-error", "path": "/version"}),
        json!({"fault": "http-error", "status": 200}),
        json!({"fault": "reset", "probability": 2.0}),
    ] {
        let resp = sim
            .send(sim.client.post(sim.control_url("/faults")).json(&rule))
            .await;
        assert_eq!(resp.status, 400, "{rule}: {}", resp.body);
        assert!(resp.json()["error"].is_string());
    }
}

/// A task-starting call whose answer lost its UPID (a broken proxy, an old
/// bug): 200 `{"data":null}`, and the task runs all the same.
#[tokio::test]
async fn null_data_answers_without_the_upid_but_does_the_work() {
    let sim = start().await;
    sim.add_fault(
        json!({"method": "POST", "path": "/nodes/{node}/qemu", "fault": "null-data", "count": 1}),
    )
    .await;
    let resp = sim
        .post("/nodes/pve/qemu", &[("vmid", "150"), ("name", "lost")])
        .await;
    assert_eq!((resp.status, resp.json()), (200, json!({"data": null})));
    let config = sim
        .eventually("the VM created by the task", || async {
            let c = sim.config("150").await;
            c.get("lock").is_none().then_some(c)
        })
        .await;
    assert_eq!(config["name"], "lost");
    let tasks = sim
        .get_q("/nodes/pve/tasks", &[("source", "all"), ("vmid", "150")])
        .await
        .data();
    assert_eq!(tasks[0]["type"], "qmcreate");
}

#[tokio::test]
async fn task_table_has_exact_start_and_end_times() {
    let sim = start().await;
    sim.create_plain("100", &[]).await;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let upid = sim
        .post("/nodes/pve/qemu/100/status/start", &[])
        .await
        .upid();
    let listed = sim.control(Method::GET, "/tasks", None).await;
    let running = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["upid"] == upid.as_str())
        .cloned()
        .unwrap();
    assert_eq!(
        (&running["type"], &running["node"], &running["id"]),
        (&json!("qmstart"), &json!("pve"), &json!("100"))
    );
    assert!(running["ended"].is_null() && running["exitstatus"].is_null());
    sim.task_ok(&upid).await;
    let listed = sim.control(Method::GET, "/tasks", None).await;
    let done = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["upid"] == upid.as_str())
        .cloned()
        .unwrap();
    let started = done["started"].as_f64().unwrap();
    let ended = done["ended"].as_f64().unwrap();
    assert!(started >= before && ended > started, "{done}");
    assert_eq!(done["exitstatus"], "OK");
    // The UPID's start time is the same moment in whole seconds.
    let starttime = u64::from_str_radix(upid.split(':').nth(4).unwrap(), 16).unwrap() as f64;
    assert!(started >= starttime && started < starttime + 2.0, "{done}");
}
