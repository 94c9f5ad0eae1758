//! Tasks: UPIDs, status, logs, the task list and its filters.

use serde_json::json;

use crate::common::*;
use pve_sim::upid::Upid;

#[tokio::test]
async fn upids_are_well_formed_and_tasks_end_ok() {
    let sim = start().await;
    let upid = sim
        .post("/nodes/pve/qemu", &[("vmid", "200"), ("memory", "1024")])
        .await
        .upid();
    let re = regex::Regex::new(
        r"^UPID:pve:[0-9A-F]{8}:[0-9A-F]{8,9}:[0-9A-F]{8}:qmcreate:200:root@pam!sim:$",
    )
    .unwrap();
    assert!(re.is_match(&upid), "{upid}");
    let parsed = Upid::parse(&upid).unwrap();
    let status = sim.wait_task(&upid).await;
    assert_eq!(status["exitstatus"], "OK");
    assert_eq!(status["upid"], upid.as_str());
    assert_eq!(status["type"], "qmcreate");
    assert_eq!(status["id"], "200");
    assert_eq!(status["node"], "pve");
    assert_eq!(status["pid"], json!(parsed.pid));
    assert_eq!(status["pstart"], json!(parsed.pstart));
    assert_eq!(status["starttime"], json!(parsed.starttime));
    assert_eq!(status["user"], "root@pam");
    assert_eq!(status["tokenid"], "sim");
    let log = sim.task_log(&upid).await;
    assert_eq!(log.last().map(String::as_str), Some("TASK OK"));
}

#[tokio::test]
async fn unknown_tasks_give_pve_answers() {
    let sim = start().await;
    let bad = sim.get("/nodes/pve/tasks/garbage/status").await;
    assert_eq!(bad.errors(), json!({"upid": "unable to parse worker upid"}));
    let unknown = "UPID:pve:000934AF:0D015579:68BF3A41:qmstart:100:root@pam:";
    let status = sim
        .get(&format!("/nodes/pve/tasks/{}/status", urlencode(unknown)))
        .await;
    assert_eq!(status.errors(), json!({"upid": "no such task"}));
    let log = sim
        .get(&format!("/nodes/pve/tasks/{}/log", urlencode(unknown)))
        .await;
    assert_eq!(
        log.json(),
        json!({"data": [{"n": 1, "t": "unable to open file - No such file or directory"}], "total": 1})
    );
    let bad_log = sim.get("/nodes/pve/tasks/garbage/log").await;
    assert_eq!(bad_log.errors()["upid"], "unable to parse worker upid");
    // The UPID's node must be the node asked.
    let upid = sim.post_ok("/nodes/pve/qemu", &[("vmid", "201")]).await;
    let other = upid.replace("UPID:pve:", "UPID:pve2:");
    assert_eq!(
        sim.get(&format!("/nodes/pve/tasks/{}/status", urlencode(&other)))
            .await
            .errors()["upid"],
        "no such task"
    );
}

#[tokio::test]
async fn task_log_paging_and_error_exit() {
    let sim = start().await;
    let upid = sim
        .post_ok(
            "/nodes/pve/qemu",
            &[
                ("vmid", "202"),
                ("scsi0", &format!("local-lvm:0,import-from={UBUNTU}")),
            ],
        )
        .await;
    let page = sim
        .get_q(
            &format!("/nodes/pve/tasks/{}/log", urlencode(&upid)),
            &[("start", "2"), ("limit", "3")],
        )
        .await;
    let body = page.json();
    let total = body["total"].as_u64().unwrap();
    assert!(total > 100, "imports log about once per percent: {total}");
    let lines = body["data"].as_array().unwrap();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["n"], 3);
    let default = sim
        .get(&format!("/nodes/pve/tasks/{}/log", urlencode(&upid)))
        .await
        .data();
    assert_eq!(
        default.as_array().unwrap().len(),
        50,
        "limit defaults to 50"
    );

    let start = sim
        .post("/nodes/pve/qemu/9000/status/start", &[])
        .await
        .upid();
    let status = sim.wait_task(&start).await;
    assert_eq!(
        status["exitstatus"],
        "you can't start a vm if it's a template"
    );
    assert_eq!(
        sim.task_log(&start).await.last().unwrap(),
        "TASK ERROR: you can't start a vm if it's a template"
    );
}

#[tokio::test]
async fn task_list_filters() {
    // The start is held running (a `task-held` fault) for the whole test.
    let sim = start().await;
    sim.add_fault(json!({"fault": "task-held", "hold": "start", "task_type": "qmstart"}))
        .await;
    sim.create_plain("210", &[]).await;
    sim.create_plain("211", &[]).await;
    let running = sim
        .post("/nodes/pve/qemu/210/status/start", &[])
        .await
        .upid();

    let archive = sim.get("/nodes/pve/tasks").await.data();
    let archived: Vec<&str> = archive
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["upid"].as_str().unwrap())
        .collect();
    assert!(
        !archived.contains(&running.as_str()),
        "the default source 'archive' lists finished tasks only"
    );
    assert_eq!(archived.len(), 2);
    assert!(archive[0]["endtime"].is_u64() && archive[0]["status"] == "OK");

    let active = sim
        .get_q("/nodes/pve/tasks", &[("source", "active")])
        .await
        .data();
    assert_eq!(active.as_array().unwrap().len(), 1);
    assert_eq!(active[0]["upid"], running.as_str());
    assert_eq!(active[0]["status"], "RUNNING");

    let all = sim
        .get_q("/nodes/pve/tasks", &[("source", "all")])
        .await
        .data();
    assert_eq!(all.as_array().unwrap().len(), 3);
    let by_vm = sim
        .get_q("/nodes/pve/tasks", &[("source", "all"), ("vmid", "211")])
        .await
        .data();
    assert_eq!(by_vm.as_array().unwrap().len(), 1);
    assert_eq!(by_vm[0]["id"], "211");
    let by_type = sim
        .get_q(
            "/nodes/pve/tasks",
            &[("source", "all"), ("typefilter", "qmstart")],
        )
        .await
        .data();
    assert_eq!(by_type.as_array().unwrap().len(), 1);
    let limited = sim
        .get_q("/nodes/pve/tasks", &[("source", "all"), ("limit", "1")])
        .await
        .data();
    assert_eq!(limited.as_array().unwrap().len(), 1);
    let bad = sim
        .get_q("/nodes/pve/tasks", &[("source", "everything")])
        .await;
    assert!(
        bad.errors()["source"]
            .as_str()
            .unwrap()
            .contains("enumeration 'archive, active, all'")
    );
}

fn upids(list: &serde_json::Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| t["upid"].as_str().unwrap().to_owned())
        .collect()
}

/// PVE moves a stopped task from the active list to the archive only in an
/// archival pass (`active_workers`): when its daemon reaps it, when another
/// task starts on the node, on pvestatd's cycle. Until then the active list
/// still says `RUNNING`, while the status says `stopped`.
#[tokio::test]
async fn stopped_tasks_are_listed_running_until_an_archival_pass() {
    let sim =
        start_with(|c| c.durations.task_archive = std::time::Duration::from_secs(1_000_000)).await;
    let first = sim.post("/nodes/pve/qemu", &[("vmid", "220")]).await.upid();
    assert_eq!(sim.wait_task(&first).await["status"], "stopped");

    let active = sim
        .get_q("/nodes/pve/tasks", &[("source", "active")])
        .await
        .json();
    assert_eq!(active["total"], 1);
    let entry = &active["data"][0];
    assert_eq!(entry["upid"], first.as_str());
    assert_eq!(entry["status"], "RUNNING", "no pass has seen it stop");
    assert!(entry.get("endtime").is_none(), "{entry}");
    assert_eq!(entry["saved"], "0");
    assert_eq!(
        (entry["user"].as_str(), entry["tokenid"].as_str()),
        (Some("root@pam"), Some("sim")),
        "the token is split off as in the status"
    );
    let archive = sim.get("/nodes/pve/tasks").await.json();
    assert_eq!(archive, json!({"data": [], "total": 0}));

    // Starting a task runs a pass: the stopped one moves to the archive.
    let second = sim.post("/nodes/pve/qemu", &[("vmid", "221")]).await.upid();
    let archive = sim.get("/nodes/pve/tasks").await.data();
    assert_eq!(upids(&archive), std::slice::from_ref(&first));
    assert_eq!(archive[0]["status"], "OK");
    assert!(archive[0]["endtime"].as_u64().unwrap() >= archive[0]["starttime"].as_u64().unwrap());
    assert!(archive[0].get("saved").is_none());
    let active = sim
        .get_q("/nodes/pve/tasks", &[("source", "active")])
        .await
        .data();
    assert_eq!(upids(&active), std::slice::from_ref(&second));
    // `all`: the active part first, then the archive.
    let all = sim
        .get_q("/nodes/pve/tasks", &[("source", "all")])
        .await
        .data();
    assert_eq!(upids(&all), [second, first]);
}

#[tokio::test]
async fn stopped_tasks_are_archived_by_themselves_after_the_reap_delay() {
    let sim = start().await;
    let upid = sim.post("/nodes/pve/qemu", &[("vmid", "222")]).await.upid();
    let archived = sim
        .eventually("the task in the archive", || async {
            let list = sim.get("/nodes/pve/tasks").await.data();
            list.as_array()
                .unwrap()
                .iter()
                .find(|t| t["upid"] == upid.as_str())
                .cloned()
        })
        .await;
    assert_eq!(archived["status"], "OK");
    let active = sim
        .get_q("/nodes/pve/tasks", &[("source", "active")])
        .await
        .data();
    assert_eq!(active, json!([]));
}

/// The only way a stopped task shows its exit status in the active list:
/// the pass could not write the index, so the task is not `saved`.
#[tokio::test]
async fn an_unwritable_index_keeps_stopped_tasks_in_the_active_list() {
    let sim = start().await;
    let rule = sim.add_fault(json!({"fault": "archive-error"})).await;
    let upid = sim.post("/nodes/pve/qemu", &[("vmid", "223")]).await.upid();
    let listed = sim
        .eventually("the exit status in the active list", || async {
            let list = sim
                .get_q("/nodes/pve/tasks", &[("source", "active")])
                .await
                .data();
            list.as_array()
                .unwrap()
                .iter()
                .find(|t| t["upid"] == upid.as_str() && t["status"] != "RUNNING")
                .cloned()
        })
        .await;
    assert_eq!(listed["status"], "OK");
    assert_eq!(listed["saved"], "0");
    let endtime = listed["endtime"].as_u64().expect("an endtime");
    assert_eq!(sim.get("/nodes/pve/tasks").await.data(), json!([]));

    // Once the index can be written again, the next pass (pvestatd's cycle
    // at the latest) archives it with the end it recorded.
    sim.control(reqwest::Method::DELETE, &format!("/faults/{rule}"), None)
        .await;
    let archived = sim
        .eventually("the task in the archive", || async {
            let list = sim.get("/nodes/pve/tasks").await.data();
            list.as_array().unwrap().first().cloned()
        })
        .await;
    assert_eq!(archived["upid"], upid.as_str());
    assert_eq!(archived["endtime"], endtime);
}

#[tokio::test]
async fn task_list_paging_and_status_filters_follow_pve() {
    // The start is held running (a `task-held` fault) for the whole test.
    let sim = start().await;
    sim.add_fault(json!({"fault": "task-held", "hold": "start", "task_type": "qmstart"}))
        .await;
    sim.create_plain("230", &[]).await;
    sim.add_fault(
        json!({"fault": "task-warnings", "task_type": "qmcreate", "warnings": 1, "count": 1}),
    )
    .await;
    let warned = sim.post("/nodes/pve/qemu", &[("vmid", "231")]).await.upid();
    assert_eq!(sim.wait_task(&warned).await["exitstatus"], "WARNINGS: 1");
    let running = sim
        .post("/nodes/pve/qemu/230/status/start", &[])
        .await
        .upid();

    let all = sim
        .get_q("/nodes/pve/tasks", &[("source", "all")])
        .await
        .json();
    assert_eq!(all["total"], 3);
    // `errors=1` hides only OK tasks: warnings and running ones stay, and
    // it overrides `statusfilter`.
    let errors = sim
        .get_q(
            "/nodes/pve/tasks",
            &[("source", "all"), ("errors", "1"), ("statusfilter", "ok")],
        )
        .await
        .data();
    let statuses: Vec<&str> = errors
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["RUNNING", "WARNINGS: 1"]);
    assert_eq!(errors[0]["upid"], running.as_str());
    let unknown = sim
        .get_q(
            "/nodes/pve/tasks",
            &[("source", "all"), ("statusfilter", "unknown")],
        )
        .await
        .data();
    assert_eq!(upids(&unknown), [running]);
    // `limit=0` lists nothing but still counts.
    let none = sim
        .get_q("/nodes/pve/tasks", &[("source", "all"), ("limit", "0")])
        .await
        .json();
    assert_eq!(none, json!({"data": [], "total": 3}));
    let paged = sim
        .get_q(
            "/nodes/pve/tasks",
            &[("source", "all"), ("start", "1"), ("limit", "1")],
        )
        .await
        .json();
    assert_eq!(
        (
            paged["data"].as_array().unwrap().len(),
            paged["total"].as_u64()
        ),
        (1, Some(3))
    );
    // `userfilter` matches the user without the token name, ignoring case.
    for (filter, n) in [("ROOT@pam", 3), ("sim", 0)] {
        let by_user = sim
            .get_q(
                "/nodes/pve/tasks",
                &[("source", "all"), ("userfilter", filter)],
            )
            .await
            .json();
        assert_eq!(by_user["total"], n, "userfilter={filter}");
    }
}
