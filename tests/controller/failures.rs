//! What goes wrong, said clearly: a corrupt image, a task past its
//! deadline, a missing provider config, manifests the API server refuses.

use provider_proxmox::api::vm::TaskAction;
use serde_json::json;

use crate::reconcile::{Env, Options, condition, manifests, schema};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_image_fails_with_the_exit_status_and_leaves_no_vm() {
    let env = Env::start("corrupt").await;
    let spec = manifests::imported(json!({
        "vmid": 190,
        "disks": [{"slot": "scsi0", "storage": "local-lvm", "importFrom": "local:import/corrupt.qcow2"}],
    }));
    env.apply(&manifests::vm("bad", spec)).await;

    let failed = env.wait_synced_reason("bad", "TaskFailed").await;
    let message = failed.message.unwrap_or_default();
    assert!(
        message.contains("cannot import from 'local:import/corrupt.qcow2'")
            && message.contains("exit code 1"),
        "the PVE exit status: {message}"
    );
    assert!(
        message.contains("retrying in"),
        "says what happens next: {message}"
    );
    let vm = env.vm("bad").await;
    let failure = vm
        .status
        .as_ref()
        .unwrap()
        .at_provider
        .last_failure
        .clone()
        .unwrap();
    assert_eq!(failure.action, TaskAction::Create);
    assert_eq!(condition(&vm, "Ready").unwrap().reason, "Creating");
    assert!(!env.sim.vmids().await.contains(&190), "no leftover VM");
    // A warning event with the log tail.
    env.wait_event("bad", |e| {
        e.0 == "Warning" && e.1 == "TaskFailed" && e.2.contains("qemu-img")
    })
    .await;
    let metrics = env.controller.as_ref().unwrap().metrics.encode();
    assert!(
        metrics.contains("proxmox_provider_reconcile_errors_total{kind=\"TaskFailed\"}"),
        "failed passes are counted by reason: {metrics}"
    );
    // The retry waits for its backoff: no second create in the meantime.
    // Judged on the simulator's history (when the failed task ended, when
    // each create arrived), not on a count read at some moment: a busy
    // machine may read it after the backoff, when a retry is due.
    let tasks = env.sim.tasks().await;
    let ended = tasks
        .iter()
        .filter(|t| t["type"] == "qmcreate" && t["id"] == "190")
        .filter_map(|t| t["ended"].as_f64())
        .reduce(f64::min)
        .unwrap_or_else(|| panic!("the failed create task ended: {tasks:?}"));
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    // The backoff the resource announced: "retrying in 10s".
    let backoff = crate::reconcile::announced_backoff(&message);
    assert!(
        creates[1..]
            .iter()
            .all(|r| r["time"].as_f64().is_some_and(|t| t >= ended + backoff)),
        "a retry within {backoff} s of the failure at {ended}: {creates:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_deadline_reports_timeout_and_is_still_observed() {
    // The deadline is 10 s; the import is held running until the test has
    // seen it reported past it (unheld, it could end first).
    let options = Options {
        provider: json!({"tasks": {"timeout": "10s"}}),
        ..Options::default()
    };
    let env = Env::start_with("timeout", options).await;
    env.sim
        .fault(json!({"fault": "task-held", "hold": "import", "task_type": "qmcreate"}))
        .await;
    env.apply(&manifests::vm("slow", manifests::imported(json!({}))))
        .await;
    let timeout = env.wait_synced_reason("slow", "TaskTimeout").await;
    let message = timeout.message.unwrap_or_default();
    assert!(message.contains("past its deadline"), "{message}");
    assert!(message.contains("still waiting"), "{message}");
    let vm = env.vm("slow").await;
    let task = vm.status.unwrap().at_provider.task.unwrap();
    assert_eq!(
        task.action,
        TaskAction::Create,
        "the task is still recorded"
    );

    env.sim.release("import").await;
    env.wait_ready("slow").await;
    assert_eq!(env.sim.count("POST", "/nodes/{node}/qemu").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_provider_config_is_reported_then_picked_up() {
    let env = Env::start("noconfig").await;
    let mut vm = manifests::vm("web", manifests::imported(json!({})));
    vm["spec"]["providerConfigRef"] = json!({"kind": "ProviderConfig", "name": "later"});
    env.apply(&vm).await;
    let missing = env
        .wait_synced_reason("web", "ProviderConfigNotFound")
        .await;
    assert!(
        missing
            .message
            .unwrap_or_default()
            .contains("ProviderConfig \"later\" not found"),
        "names the config"
    );
    assert!(
        env.sim
            .requests_to("POST", "/nodes/{node}/qemu")
            .await
            .is_empty()
    );

    // Creating the config requeues the VM through the config watch.
    let mut config = manifests::provider_config(&env.sim, &json!({}));
    config["metadata"]["name"] = json!("later");
    env.apply(&config).await;
    env.wait_ready("web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_manifests_are_refused_by_the_api_server() {
    let _strict = schema::strict().await;
    support::install_crds(support::repo_root().join("crds")).await;
    let ns = support::namespace("invalid").await;
    let image = json!({"url": "https://images.example/a.qcow2", "checksum": "ab".repeat(32),
                       "checksumAlgorithm": "sha256"});
    let cases = [
        (
            json!({"disks": [{"slot": "scsi0", "storage": "local-lvm",
                              "importFrom": manifests::UBUNTU, "image": image}]}),
            None,
            "a disk takes one source",
        ),
        (
            json!({"vmid": 5}),
            None,
            "should be greater than or equal to 100",
        ),
        (
            json!({"memory": "lots"}),
            None,
            "positive Kubernetes quantity",
        ),
        (
            json!({"clone": {"templateVmid": 9000},
                   "disks": [{"slot": "scsi0", "storage": "local-lvm", "importFrom": manifests::UBUNTU}]}),
            None,
            "a cloned VM gets its disks from the template",
        ),
        (
            json!({}),
            Some(json!(["*", "Observe"])),
            "cannot be combined",
        ),
        (
            json!({}),
            Some(json!(["Create", "Delete"])),
            "must include Observe",
        ),
        (
            json!({"powerState": "Sleeping"}),
            None,
            "Unsupported value: \"Sleeping\"",
        ),
    ];
    for (i, (for_provider, policies, want)) in cases.into_iter().enumerate() {
        let mut vm = manifests::vm(&format!("bad-{i}"), for_provider);
        if let Some(p) = policies {
            vm["spec"]["managementPolicies"] = p;
        }
        let text = serde_json::to_string(&vm).unwrap();
        let message = support::apply_expect_rejected(text.as_str(), Some(ns.name())).await;
        assert!(
            message.contains(want),
            "case {i}: {want:?} not in {message}"
        );
    }
}
