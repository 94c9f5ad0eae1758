//! Safety under restarts, lost writes, foreign VMs and locks: never a
//! second VM, never a change to a VM that is not ours.

use provider_proxmox::api::vm::TaskAction;
use pve_client::vm::{CreateVm, VmParams};
use serde_json::json;

use crate::reconcile::{self, DEADLINE, Env, Options, brief, condition, is_true, manifests};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_killed_mid_import_finishes_without_a_second_vm() {
    let mut env = Env::start("restart").await;
    // The import runs until the test lets it end: the kill and the restart
    // happen while it is in flight, whatever the machine's load.
    env.sim
        .fault(json!({"fault": "task-held", "hold": "import", "task_type": "qmcreate"}))
        .await;
    let mut spec = manifests::imported(json!({}));
    spec.as_object_mut().unwrap().remove("node");
    spec["allowedNodes"] = json!(["pve"]);
    env.apply(&manifests::vm("web", spec)).await;
    env.wait_vm("web", "the import in flight", |vm| {
        vm.status
            .as_ref()
            .and_then(|s| s.at_provider.task.as_ref())
            .filter(|t| t.action == TaskAction::Create)
            .map(|_| ())
            .ok_or_else(|| "no create task yet".into())
    })
    .await;
    let vmid = env.vmid("web").await;
    env.kill_controller().await;
    assert_eq!(env.sim.count("POST", "/nodes/{node}/qemu").await, 1);

    let before = env.sim.requests().await.len();
    env.start_controller().await;
    looked_again(&env, before, "at the import task", |path| {
        path.starts_with("/nodes/pve/tasks")
    })
    .await;
    env.sim.release("import").await;
    env.wait_ready("web").await;
    assert_eq!(env.vmid("web").await, vmid, "the VMID is kept");
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    assert_eq!(creates.len(), 1, "exactly one create: {creates:?}");
    let asked = env.sim.requests_to("GET", "/cluster/nextid").await;
    assert!(
        asked.is_empty(),
        "VMIDs come from the provider's allocator, not nextid: {asked:?}"
    );
    assert_eq!(env.sim.vmids().await, vec![vmid, 9000]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_status_write_does_not_dispatch_the_create_again() {
    let mut env = Env::without_controller("loststatus", Options::default()).await;
    // The import runs until the test lets it end: the restarted controller
    // finds it running, whatever the machine's load.
    env.sim
        .fault(json!({"fault": "task-held", "hold": "import", "task_type": "qmcreate"}))
        .await;
    let restricted = reconcile::without_status_writes(&env, &["proxmoxvms"]).await;
    env.apply(&manifests::vm(
        "web",
        manifests::imported(json!({"vmid": 150})),
    ))
    .await;
    support::poll("the create to be sent", DEADLINE, || async {
        match env.sim.count("POST", "/nodes/{node}/qemu").await {
            0 => Err("no create yet".to_owned()),
            _ => Ok(()),
        }
    })
    .await;
    let vm = env.vm("web").await;
    assert!(
        vm.status.is_none(),
        "no status was written: {:?}",
        vm.status
    );
    let metrics = restricted.metrics.encode();
    assert!(
        metrics.contains("proxmox_provider_reconcile_errors_total{kind=\"kube_api\"}"),
        "status writes failed: {metrics}"
    );
    restricted.kill().await;

    let before = env.sim.requests().await.len();
    env.start_controller().await;
    looked_again(&env, before, "at VM 150", |path| path.contains("/qemu/150")).await;
    env.sim.release("import").await;
    env.wait_ready("web").await;
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    assert_eq!(creates.len(), 1, "exactly one create: {creates:?}");
    // The create found running is observed only once the VM is proven ours
    // (its owner marker readable); the creation is recorded from that.
    let vm = env.vm("web").await;
    assert!(
        vm.annotation(provider_proxmox::api::meta::EXTERNAL_CREATE_SUCCEEDED)
            .is_some(),
        "the creation was recorded from the owner marker"
    );
}

/// Waits until a request after the first `before` of the simulator's log
/// has a path `about` accepts: the restarted controller looked while the
/// held task still ran.
async fn looked_again(env: &Env, before: usize, what: &str, about: impl Fn(&str) -> bool) {
    support::poll(
        &format!("the new controller to look {what}"),
        DEADLINE,
        || async {
            let requests = env.sim.requests().await;
            requests[before..]
                .iter()
                .any(|r| r["path"].as_str().is_some_and(&about))
                .then_some(())
                .ok_or_else(|| format!("{} requests since", requests.len() - before))
        },
    )
    .await;
}

/// A VM made directly on Proxmox, without our owner marker.
async fn hand_made_vm(env: &Env, vmid: u32, start: bool) {
    let client = env.sim.client();
    let create = CreateVm {
        vmid,
        params: VmParams {
            name: Some(format!("handmade-{vmid}")),
            memory: Some(512),
            description: Some("made by hand".into()),
            ..VmParams::default()
        },
        ..CreateVm::default()
    };
    let upid = client.create_vm("pve", &create).await.unwrap();
    client.wait_task(&upid).await.unwrap();
    if start {
        let upid = client.start_vm("pve", vmid).await.unwrap();
        client.wait_task(&upid).await.unwrap();
    }
}

/// Waits until the controller has looked at VM `vmid` `n` more times.
async fn observed_again(env: &Env, vmid: u32, n: usize) {
    // Every look reads the VM's config (with its pending changes); an idle
    // VM's power state comes from the shared cluster view.
    let path = format!("/nodes/pve/qemu/{vmid}/pending");
    let count = || async {
        env.sim
            .requests()
            .await
            .iter()
            .filter(|r| r["path"] == path.as_str())
            .count()
    };
    let before = count().await;
    support::poll("the controller to look again", DEADLINE, || async {
        let now = count().await;
        (now >= before + n)
            .then_some(())
            .ok_or_else(|| format!("{now} looks"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_vm_is_never_modified_or_deleted() {
    let env = Env::start("foreign").await;
    hand_made_vm(&env, 170, false).await;
    let digest = env.sim.config(170).await.digest;
    let mut vm = manifests::vm("claim", manifests::imported(json!({})));
    vm["metadata"]["annotations"] = json!({"crossplane.io/external-name": "170"});
    env.apply(&vm).await;

    let synced = env.wait_synced_reason("claim", "NotOwned").await;
    let message = synced.message.unwrap_or_default();
    assert!(message.contains("VM 170"), "{message}");
    assert!(message.contains("left untouched"), "{message}");
    assert!(
        message.contains("managementPolicies"),
        "says how to observe: {message}"
    );
    let vm = env.vm("claim").await;
    assert_eq!(condition(&vm, "Ready").unwrap().reason, "Unavailable");
    observed_again(&env, 170, 2).await;
    assert!(
        env.sim.writes_to_vm(170).await.is_empty(),
        "no write to VM 170"
    );
    assert_eq!(env.sim.config(170).await.digest, digest, "config unchanged");

    env.vms()
        .delete("claim", &Default::default())
        .await
        .expect("delete");
    env.wait_gone("claim").await;
    assert!(env.sim.vmids().await.contains(&170), "VM 170 stays");
    assert!(env.sim.writes_to_vm(170).await.is_empty(), "never touched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_only_reports_an_existing_vm_and_never_changes_it() {
    let env = Env::start("observe").await;
    hand_made_vm(&env, 180, true).await;
    let before = env.sim.writes_to_vm(180).await.len();
    let mut vm = manifests::vm("seen", json!({}));
    vm["metadata"]["annotations"] = json!({"crossplane.io/external-name": "180"});
    vm["spec"]["managementPolicies"] = json!(["Observe"]);
    env.apply(&vm).await;

    let vm = env.wait_ready("seen").await;
    let at = vm.status.unwrap().at_provider;
    assert_eq!(at.vmid, Some(180));
    assert_eq!(at.node.as_deref(), Some("pve"));
    assert_eq!(
        at.state,
        Some(provider_proxmox::api::vm::ObservedState::Running)
    );
    observed_again(&env, 180, 2).await;
    assert_eq!(env.sim.writes_to_vm(180).await.len(), before, "only reads");
    assert_eq!(
        env.sim.config(180).await.memory,
        Some(512),
        "not resized to the spec's default"
    );

    env.vms()
        .delete("seen", &Default::default())
        .await
        .expect("delete");
    env.wait_gone("seen").await;
    assert!(env.sim.vmids().await.contains(&180));
    assert_eq!(env.sim.writes_to_vm(180).await.len(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_vm_is_waited_for_and_the_change_retried() {
    let env = Env::start("locked").await;
    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;
    // A backup holds the lock until the test ends it (a rule without a
    // count: with one, the retries could use it up before the test sees
    // VmLocked).
    let backup = env
        .sim
        .fault(json!({
            "method": "POST", "path": "/nodes/{node}/qemu/{vmid}/config",
            "fault": "http-error", "status": 500, "message": "VM is locked (backup)",
        }))
        .await;
    let edit = VmParams {
        cores: Some(1),
        ..VmParams::default()
    };
    env.sim.edit(vmid, edit).await;

    let locked = env.wait_synced_reason("web", "VmLocked").await;
    assert!(
        locked
            .message
            .unwrap_or_default()
            .contains("VM is locked (backup)"),
        "says what it waits for"
    );
    // Refused twice (retried after a refusal), then the backup ends.
    let route = "/nodes/{node}/qemu/{vmid}/config";
    support::poll("a second refused update", DEADLINE, || async {
        match env.sim.count("POST", route).await {
            n if n >= 2 => Ok(()),
            n => Err(format!("{n} updates")),
        }
    })
    .await;
    env.sim.remove_fault(backup).await;
    support::poll("the change to go through", DEADLINE, || async {
        match env.sim.config(vmid).await.cores {
            Some(2) => Ok(()),
            other => Err(format!("cores {other:?}")),
        }
    })
    .await;
    let updates = env.sim.requests_to("POST", route).await;
    let statuses: Vec<_> = updates.iter().map(|r| r["status"].clone()).collect();
    let (last, refused) = statuses.split_last().expect("updates");
    assert!(
        *last == 200 && refused.len() >= 2 && refused.iter().all(|s| *s == 500),
        "refused while locked (at least twice), then one applied: {updates:?}"
    );
    env.wait_ready("web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_owner_marker_in_the_notes_neither_claims_nor_hides_our_vm() {
    let env = Env::start("forged").await;
    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;
    let ours = env.sim.config(vmid).await.description.unwrap_or_default();
    assert!(ours.contains("uid="), "our marker: {ours:?}");
    // Someone puts another resource's marker above ours in the notes (and
    // changes a setting the spec manages).
    let forged = format!(
        "Managed by crossplane-provider-proxmox: ProxmoxVM other-team/db uid=0000-other\n{ours}"
    );
    let edit = VmParams {
        description: Some(forged.as_str().into()),
        cores: Some(1),
        ..VmParams::default()
    };
    env.sim.edit(vmid, edit).await;

    // Still ours: the drift is corrected, never NotOwned.
    support::poll("the drift to be corrected", DEADLINE, || async {
        match env.sim.config(vmid).await.cores {
            Some(2) => Ok(()),
            other => Err(format!("cores {other:?}")),
        }
    })
    .await;
    let vm = env.wait_ready("web").await;
    let synced = condition(&vm, "Synced").unwrap();
    assert!(is_true(synced) && synced.reason != "NotOwned", "{synced:?}");
    assert!(
        !env.events("web")
            .await
            .iter()
            .any(|(_, reason, _, _)| reason == "NotOwned"),
        "never reported as another's"
    );

    env.vms()
        .delete("web", &Default::default())
        .await
        .expect("delete");
    env.wait_gone("web").await;
    assert!(
        !env.sim.vmids().await.contains(&vmid),
        "our VM is destroyed with its resource, not orphaned"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_template_is_cloned_never_a_running_hand_made_vm() {
    let env = Env::start("notemplate").await;
    hand_made_vm(&env, 777, true).await;
    let writes = env.sim.writes_to_vm(777).await.len();
    env.apply(&manifests::vm(
        "copy",
        json!({
            "clone": {"templateVmid": 777},
            "cpu": {"cores": 1},
            "networks": [{"slot": "net0", "bridge": "vmbr0"}],
        }),
    ))
    .await;

    let synced = env.wait_synced_reason("copy", "NotATemplate").await;
    let message = synced.message.unwrap_or_default();
    assert!(message.contains("VM 777 is not a template"), "{message}");
    let clones = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/clone")
        .await;
    assert!(clones.is_empty(), "nothing cloned: {clones:?}");
    assert_eq!(env.sim.vmids().await, vec![777, 9000], "no VM created");
    assert_eq!(
        env.sim.writes_to_vm(777).await.len(),
        writes,
        "777 untouched"
    );
}

/// A provider config may allow clone sources beyond templates (here: a tag
/// and a VMID range, from the cluster's resource list): a hand-made VM
/// with the tag is cloned, one without it is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clone_policy_allows_named_vms_and_nothing_else() {
    let options = Options {
        provider: json!({"clonePolicy": {"allowNonTemplates": {
            "tags": ["golden"], "vmidRanges": [{"min": 790, "max": 799}],
        }}}),
        ..Options::default()
    };
    let env = Env::start_with("clonepolicy", options).await;
    let client = env.sim.client();
    for (vmid, tags) in [(778, vec!["golden"]), (777, vec!["db"])] {
        let create = CreateVm {
            vmid,
            params: VmParams {
                name: Some(format!("handmade-{vmid}")),
                memory: Some(512),
                tags: Some(pve_client::vm::Tags::new(tags)),
                ..VmParams::default()
            },
            ..CreateVm::default()
        };
        let upid = client.create_vm("pve", &create).await.unwrap();
        client.wait_task(&upid).await.unwrap();
    }
    let spec = |source: u32| {
        json!({
            "clone": {"templateVmid": source},
            "cpu": {"cores": 1},
            "networks": [{"slot": "net0", "bridge": "vmbr0"}],
        })
    };
    env.apply(&manifests::vm("tagged", spec(778))).await;
    env.apply(&manifests::vm("other", spec(777))).await;
    env.wait_ready("tagged").await;
    let synced = env.wait_synced_reason("other", "NotATemplate").await;
    let message = synced.message.unwrap_or_default();
    assert!(
        message.contains("clonePolicy.allowNonTemplates"),
        "{message}"
    );
    let clones = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/clone")
        .await;
    assert_eq!(clones.len(), 1, "only 778 cloned: {clones:?}");
    assert!(clones[0].to_string().contains("/778/clone"), "{clones:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_secret_is_written_only_when_it_is_the_resources_own() {
    let env = Env::start("connsecret").await;
    let with_secret = |name: &str, secret: &str| {
        let mut vm = manifests::vm(name, manifests::imported(json!({})));
        vm["spec"]["writeConnectionSecretToRef"] = json!({"name": secret});
        vm
    };
    env.apply(&with_secret("alpha", "alpha-conn")).await;
    env.wait_ready("alpha").await;
    let alpha = env.vm("alpha").await;
    let alpha_uid = alpha.metadata.uid.clone().unwrap();
    let alpha_vmid = env.vmid("alpha").await.to_string();
    support::poll("alpha's connection Secret", DEADLINE, || async {
        match env.secret("alpha-conn").await.and_then(|s| s.data) {
            Some(data) if data.contains_key("vmid") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db-password"},
        "type": "Opaque",
        "stringData": {"password": "not-for-the-provider"},
    }))
    .await;
    let unrelated = env.secret("db-password").await.unwrap();

    // Another resource's Secret, and one nobody's resource made.
    env.apply(&with_secret("beta", "alpha-conn")).await;
    env.apply(&with_secret("gamma", "db-password")).await;
    for (name, secret) in [("beta", "alpha-conn"), ("gamma", "db-password")] {
        let synced = env
            .wait_synced_reason(name, "ConnectionSecretConflict")
            .await;
        let message = synced.message.unwrap_or_default();
        assert!(
            message.contains(&format!("connection Secret {secret}")),
            "{name}: {message}"
        );
        // The VM itself is created and runs as requested.
        env.wait_vm(name, "Ready", |vm| {
            condition(vm, "Ready")
                .filter(|c| is_true(c))
                .map(|_| ())
                .ok_or_else(|| brief(vm))
        })
        .await;
    }
    let beta = env.vm("beta").await;
    let beta_message = condition(&beta, "Synced").unwrap().message.clone();
    assert!(
        beta_message
            .unwrap_or_default()
            .contains(&format!("belongs to ProxmoxVM alpha (uid {alpha_uid})")),
        "names the owner"
    );

    let conn = env.secret("alpha-conn").await.unwrap();
    let owners: Vec<_> = conn
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect();
    assert_eq!(owners, [alpha_uid], "still alpha's alone");
    assert_eq!(
        conn.data.unwrap()["vmid"].0,
        alpha_vmid.as_bytes(),
        "alpha's data"
    );
    let after = env.secret("db-password").await.unwrap();
    assert_eq!(
        after.data, unrelated.data,
        "the unrelated Secret is unchanged"
    );
    assert_eq!(after.metadata.owner_references, None);
    assert_eq!(
        after.metadata.resource_version, unrelated.metadata.resource_version,
        "never written"
    );
}
