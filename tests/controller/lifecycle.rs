//! A VM after creation: drift corrected, power state enforced, deleted or
//! orphaned.

use pve_client::vm::{Tags, VmParams};
use serde_json::json;

use crate::reconcile::{DEADLINE, Env, Options, condition, is_true, manifests};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_made_behind_the_providers_back_is_corrected() {
    let env = Env::start("drift").await;
    let spec = manifests::imported(json!({"tags": ["web", "Prod"]}));
    let vmid = env.create_ready("web", spec).await;

    // Someone edits the VM in the Proxmox GUI.
    let edit = VmParams {
        cores: Some(1),
        memory: Some(512),
        tags: Some(Tags::parse("hacked")),
        ..VmParams::default()
    };
    env.sim.edit(vmid, edit).await;
    assert_eq!(env.sim.config(vmid).await.cores, Some(1));

    support::poll("the drift to be corrected", DEADLINE, || async {
        let c = env.sim.config(vmid).await;
        let tags = c.tags.normalized().into_iter().collect::<Vec<_>>();
        if c.cores == Some(2) && c.memory == Some(2048) && tags == ["prod", "web"] {
            Ok(())
        } else {
            Err(format!(
                "cores {:?} memory {:?} tags {tags:?}",
                c.cores, c.memory
            ))
        }
    })
    .await;
    let configures = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/config")
        .await;
    assert_eq!(configures.len(), 1, "one correction: {configures:?}");
    let sent = &configures[0]["params"];
    assert_eq!(sent["cores"], "2");
    assert_eq!(sent["memory"], "2048");
    assert!(
        sent["digest"].is_string(),
        "sent with the digest it was computed from"
    );
    env.wait_ready("web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_power_state_is_enforced_both_ways() {
    let env = Env::start("power").await;
    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;
    assert_eq!(env.sim.power(vmid).await, "running");

    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"powerState": "Stopped"}}}),
    )
    .await;
    let stopped = |vm: &provider_proxmox::api::ProxmoxVM| {
        let state = vm.status.as_ref().and_then(|s| s.at_provider.state);
        let ready = condition(vm, "Ready").is_some_and(is_true);
        (ready && state == Some(provider_proxmox::api::vm::ObservedState::Stopped))
            .then_some(())
            .ok_or_else(|| "not stopped and Ready yet".to_owned())
    };
    env.wait_vm("web", "stopped and Ready", stopped).await;
    assert_eq!(env.sim.power(vmid).await, "stopped");
    let shutdowns = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown")
        .await;
    assert_eq!(shutdowns.len(), 1, "a graceful shutdown: {shutdowns:?}");

    // Started behind our back: stopped again.
    let upid = env.sim.client().start_vm("pve", vmid).await.unwrap();
    env.sim.client().wait_task(&upid).await.unwrap();
    env.sim.wait_power(vmid, "stopped").await;

    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"powerState": "Running"}}}),
    )
    .await;
    env.wait_vm("web", "running", |vm| {
        (vm.status.as_ref().and_then(|s| s.at_provider.state)
            == Some(provider_proxmox::api::vm::ObservedState::Running))
        .then_some(())
        .ok_or_else(|| "not running".into())
    })
    .await;
    // The status may still hold the observation of the start behind our
    // back, so the VM itself is waited for, not read once.
    env.sim.wait_power(vmid, "running").await;
    env.wait_ready("web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_destroys_the_vm_then_releases_the_resource() {
    let env = Env::start("delete").await;
    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;
    assert!(env.sim.vmids().await.contains(&vmid));

    env.vms()
        .delete("web", &Default::default())
        .await
        .expect("delete");
    env.wait_gone("web").await;
    assert!(!env.sim.vmids().await.contains(&vmid), "VM {vmid} is gone");
    let destroys = env
        .sim
        .requests_to("DELETE", "/nodes/{node}/qemu/{vmid}")
        .await;
    assert_eq!(destroys.len(), 1, "{destroys:?}");
    assert_eq!(destroys[0]["params"]["purge"], "1");
    let shutdowns = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown")
        .await;
    assert_eq!(shutdowns.len(), 1, "shut down before the destroy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_delete_policy_the_vm_is_orphaned() {
    let env = Env::start("orphan").await;
    let mut vm = manifests::vm("kept", manifests::imported(json!({})));
    vm["spec"]["managementPolicies"] = json!(["Observe", "Create", "Update", "LateInitialize"]);
    env.apply(&vm).await;
    env.wait_ready("kept").await;
    let vmid = env.vmid("kept").await;

    env.vms()
        .delete("kept", &Default::default())
        .await
        .expect("delete");
    env.wait_gone("kept").await;
    assert!(env.sim.vmids().await.contains(&vmid), "VM {vmid} stays");
    assert_eq!(env.sim.power(vmid).await, "running");
    assert!(
        env.sim.writes_to_vm(vmid).await.iter().all(|r| {
            let path = r["route"].as_str().unwrap_or_default();
            !path.ends_with("/shutdown") && !path.ends_with("/stop") && r["method"] != "DELETE"
        }),
        "nothing stopped or destroyed it"
    );
    env.wait_event("kept", |e| e.1 == "Orphaned").await;
}

/// At rest, between its full looks, an up-to-date VM costs no request of
/// its own: the cluster view its config's VMs share shows whether it is as
/// its last full look found it. A change that view shows (the memory of a
/// stopped VM, here; a running VM's memory changed by hand is pending until
/// it restarts, and the view shows the running value) is looked at in full
/// and corrected at once, with no full look due for a day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_rest_a_vm_is_read_only_through_the_shared_view_which_shows_drift_at_once() {
    let options = Options {
        provider: json!({"fullLookInterval": "24h"}),
        ..Options::default()
    };
    let env = Env::start_with("coarse", options).await;
    let vmid = env
        .create_ready("web", manifests::imported(json!({"powerState": "Stopped"})))
        .await;
    env.wait_coarse_looks(&[
        "/nodes/{node}/qemu/{vmid}/config",
        "/nodes/{node}/qemu/{vmid}/pending",
        "/nodes/{node}/qemu/{vmid}/status/current",
    ])
    .await;

    env.sim
        .edit(
            vmid,
            VmParams {
                memory: Some(512),
                ..VmParams::default()
            },
        )
        .await;
    support::poll("the memory put back", DEADLINE, || async {
        let memory = env.sim.config(vmid).await.memory;
        (memory == Some(2048))
            .then_some(())
            .ok_or_else(|| format!("memory {memory:?}"))
    })
    .await;
    env.wait_ready("web").await;
}
