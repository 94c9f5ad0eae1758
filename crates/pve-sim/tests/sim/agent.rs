//! The guest agent's common commands: errors until the guest has booted,
//! then answers from the simulated guest (files, exec).

use serde_json::json;

use crate::common::start;

#[tokio::test]
async fn agent_commands_answer_once_the_guest_is_up() {
    let sim = start().await;
    sim.create_plain("100", &[("agent", "1"), ("ostype", "l26")])
        .await;
    let base = "/nodes/pve/qemu/100/agent";
    let stopped = sim.post(&format!("{base}/ping"), &[]).await;
    assert_eq!(stopped.reason, "VM 100 is not running");
    sim.power("100", "start").await;
    let booting = sim.get(&format!("{base}/get-osinfo")).await;
    assert_eq!(booting.reason, "QEMU guest agent is not running");
    sim.eventually("agent up", || async {
        (sim.post(&format!("{base}/ping"), &[]).await.status == 200).then_some(())
    })
    .await;
    assert_eq!(
        sim.post(&format!("{base}/ping"), &[]).await.data(),
        json!({"result": {}})
    );
    let os = sim.get(&format!("{base}/get-osinfo")).await.data();
    assert_eq!(os["result"]["id"], "ubuntu");
    let host = sim.get(&format!("{base}/get-host-name")).await.data();
    assert_eq!(host["result"]["host-name"], "plain");
    let info = sim.get(&format!("{base}/info")).await.data();
    assert!(
        info["result"]["supported_commands"]
            .as_array()
            .unwrap()
            .len()
            > 10
    );
    let legacy = sim.post(base, &[("command", "get-host-name")]).await.data();
    assert_eq!(legacy, host);

    // file-write, then file-read and exec see the file.
    sim.post(
        &format!("{base}/file-write"),
        &[("file", "/etc/motd"), ("content", "hello\n")],
    )
    .await
    .data();
    let read = sim
        .get_q(&format!("{base}/file-read"), &[("file", "/etc/motd")])
        .await
        .data();
    assert_eq!(read["content"], "hello\n");
    assert_eq!(read["bytes-read"], 6);
    let missing = sim
        .get_q(&format!("{base}/file-read"), &[("file", "/nope")])
        .await;
    assert_eq!(missing.status, 500);
    assert!(
        missing.reason.contains("No such file or directory"),
        "{}",
        missing.reason
    );

    // exec with a form (repeated keys) and with JSON (an array).
    let pid = sim
        .send(
            sim.req(reqwest::Method::POST, &format!("{base}/exec"))
                .body("command=cat&command=/etc/motd")
                .header("Content-Type", "application/x-www-form-urlencoded"),
        )
        .await
        .data()["pid"]
        .clone();
    let status = sim
        .get_q(&format!("{base}/exec-status"), &[("pid", &pid.to_string())])
        .await
        .data();
    assert_eq!(status["exited"], 1);
    assert_eq!(status["exitcode"], 0);
    assert_eq!(status["out-data"], "hello\n");
    let pid = sim
        .send(
            sim.req(reqwest::Method::POST, &format!("{base}/exec"))
                .json(&json!({"command": ["cat", "/missing"]})),
        )
        .await
        .data()["pid"]
        .clone();
    let status = sim
        .get_q(&format!("{base}/exec-status"), &[("pid", &pid.to_string())])
        .await
        .data();
    assert_eq!(status["exitcode"], 1);
    assert_eq!(
        status["err-data"],
        "cat: /missing: No such file or directory\n"
    );
    let unknown = sim
        .get_q(&format!("{base}/exec-status"), &[("pid", "4")])
        .await;
    assert_eq!(
        unknown.reason,
        "VM 100 qmp command 'guest-exec-status' failed - Invalid parameter 'pid'"
    );
}
