//! Crossplane's import flow, end to end: a guest made by hand is observed
//! (`["Observe"]` and its VMID as the external name), its
//! `status.atProvider` copied into `spec.forProvider`, and the resource
//! switched to `["*"]`: refused (`NotOwned`) until it carries
//! `proxmox.crossplane.io/adopt: "true"`, then taken over with one config
//! write (the owner marker) and nothing else, and managed from then on. A
//! guest carrying another resource's marker is never taken over. The bulk
//! import's manifests, applied, only observe.

use std::collections::BTreeMap;

use provider_proxmox::api::ConditionStatus;
use pve_client::lxc::{ContainerNet, ContainerVolume, CreateContainer};
use pve_client::vm::{CreateVm, Drive, DriveKey, Nic, NicModel, VmParams};
use serde_json::{Value, json};

use crate::reconcile::containers::{DEBIAN, container, ct_brief, ct_condition};
use crate::reconcile::{DEADLINE, Env, brief, condition, manifests};
use crate::support;

const ADOPT: &str = "proxmox.crossplane.io/adopt";

/// A VM made by hand: a disk, a NIC, notes, running.
async fn legacy_vm(env: &Env, vmid: u32, notes: &str) {
    let client = env.sim.client();
    let create = CreateVm {
        vmid,
        params: VmParams {
            name: Some(format!("legacy-{vmid}")),
            memory: Some(1024),
            cores: Some(2),
            description: Some(notes.into()),
            disks: BTreeMap::from([(
                "scsi0".parse::<DriveKey>().unwrap(),
                Drive::alloc("local-lvm", 2),
            )]),
            nets: BTreeMap::from([(0, Nic::new(NicModel::Virtio, "vmbr0"))]),
            ..VmParams::default()
        },
        ..CreateVm::default()
    };
    let upid = client.create_vm("pve", &create).await.unwrap();
    client.wait_task(&upid).await.unwrap();
    let upid = client.start_vm("pve", vmid).await.unwrap();
    client.wait_task(&upid).await.unwrap();
}

/// The fields of `status.atProvider` that `spec.forProvider` has.
fn copied(at_provider: &Value, keys: &[&str]) -> Value {
    let mut spec = serde_json::Map::new();
    for key in keys {
        if let Some(v) = at_provider.get(*key) {
            spec.insert((*key).to_owned(), v.clone());
        }
    }
    Value::Object(spec)
}

const VM_KEYS: &[&str] = &[
    "node",
    "name",
    "cpu",
    "memory",
    "disks",
    "networks",
    "cloudInit",
    "agent",
    "powerState",
    "tags",
    "description",
    "onBoot",
    "scsiController",
];

/// Writes to a VM after the `since`th request.
async fn writes_since(env: &Env, vmid: u32, since: usize) -> Vec<Value> {
    let prefix = format!("/nodes/pve/qemu/{vmid}");
    env.sim.requests().await[since..]
        .iter()
        .filter(|r| r["method"] != "GET")
        .filter(|r| r["path"].as_str().is_some_and(|p| p.starts_with(&prefix)))
        .cloned()
        .collect()
}

/// The config keys a write set (not the digest it was based on).
fn written_keys(write: &Value) -> Vec<&String> {
    write["params"]
        .as_object()
        .map(|p| {
            p.keys()
                .filter(|k| !["digest", "node", "vmid"].contains(&k.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observed_vm_is_taken_over_with_the_opt_in_and_left_as_it_was() {
    let env = Env::start("adoptvm").await;
    legacy_vm(&env, 190, "built by hand in 2019").await;
    let mut vm = manifests::vm("legacy", json!({}));
    vm["metadata"]["annotations"] = json!({"crossplane.io/external-name": "190"});
    vm["spec"]["managementPolicies"] = json!(["Observe"]);
    env.apply(&vm).await;

    // 1. Observe: atProvider shows the configuration in forProvider's shape.
    let seen = env.wait_ready("legacy").await;
    let at = serde_json::to_value(&seen.status.as_ref().unwrap().at_provider).unwrap();
    assert_eq!(at["name"], "legacy-190", "{at}");
    assert_eq!(at["cpu"]["cores"], 2, "{at}");
    assert_eq!(at["memory"], "1Gi", "{at}");
    assert_eq!(at["disks"][0]["slot"], "scsi0", "{at}");
    assert_eq!(at["disks"][0]["size"], "2Gi", "{at}");
    assert_eq!(at["networks"][0]["bridge"], "vmbr0", "{at}");
    assert_eq!(at["description"], "built by hand in 2019", "{at}");
    assert_eq!(at["powerState"], "Running", "{at}");
    let before = env.sim.config(190).await;

    // 2. Copy into forProvider and switch to "*", without the opt-in.
    let for_provider = copied(&at, VM_KEYS);
    env.patch_vm(
        "legacy",
        json!({"spec": {"forProvider": for_provider, "managementPolicies": ["*"]}}),
    )
    .await;
    let refused = env.wait_synced_reason("legacy", "NotOwned").await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains(ADOPT),
        "says how to take it over: {message}"
    );
    let start = env.sim.requests().await.len();

    // 3. The opt-in: taken over with one write, the marker.
    env.patch_vm(
        "legacy",
        json!({"metadata": {"annotations": {ADOPT: "true"}}}),
    )
    .await;
    env.wait_vm("legacy", "taken over and Ready", |vm| {
        let ready = condition(vm, "Ready").is_some_and(|c| c.status == ConditionStatus::True);
        let synced = condition(vm, "Synced").is_some_and(|c| c.reason == "ReconcileSuccess");
        let recorded = vm
            .annotation(provider_proxmox::api::meta::EXTERNAL_CREATE_SUCCEEDED)
            .is_some();
        (ready && synced && recorded)
            .then_some(())
            .ok_or_else(|| brief(vm))
    })
    .await;
    let after = env.sim.config(190).await;
    let description = after.description.clone().unwrap_or_default();
    assert!(
        description.starts_with("built by hand in 2019\n\n"),
        "the notes are kept: {description:?}"
    );
    assert!(
        description.contains("Managed by crossplane-provider-proxmox: ProxmoxVM"),
        "{description:?}"
    );
    let unchanged = |c: &pve_client::vm::VmConfig| {
        (
            c.name.clone(),
            c.memory,
            c.cores,
            c.disks.clone(),
            c.nets.clone(),
            c.onboot,
        )
    };
    assert_eq!(
        unchanged(&after),
        unchanged(&before),
        "nothing else changed"
    );
    let writes = writes_since(&env, 190, start).await;
    let keys: Vec<Vec<&String>> = writes.iter().map(written_keys).collect();
    assert_eq!(writes.len(), 1, "one write, the marker: {writes:?}");
    assert_eq!(writes[0]["route"], "/nodes/{node}/qemu/{vmid}/config");
    assert_eq!(keys, [vec!["description"]], "{writes:?}");
    assert_eq!(env.sim.power(190).await, "running");

    // 4. From now on it is managed as if created here: a change is applied.
    env.patch_vm(
        "legacy",
        json!({"spec": {"forProvider": {"cpu": {"cores": 3}}}}),
    )
    .await;
    support::poll("cores 3 applied", DEADLINE, || async {
        match env.sim.config(190).await.cores {
            Some(3) => Ok(()),
            other => Err(format!("cores {other:?}")),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_carrying_another_resources_marker_is_never_taken_over() {
    let env = Env::start("adoptforeign").await;
    let marker = "Managed by crossplane-provider-proxmox: ProxmoxVM other/db uid=0b5e1d9c";
    legacy_vm(&env, 191, &format!("their notes\n\n{marker}")).await;
    let start = env.sim.requests().await.len();
    let mut vm = manifests::vm("grab", json!({}));
    vm["metadata"]["annotations"] = json!({"crossplane.io/external-name": "191", ADOPT: "true"});
    env.apply(&vm).await;

    let refused = env.wait_synced_reason("grab", "NotOwned").await;
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains("ProxmoxVM other/db uid=0b5e1d9c"),
        "names the marker's owner: {message}"
    );
    assert!(message.contains("never takes over"), "{message}");
    // Looked at again (a resync), still nothing written.
    env.patch_vm(
        "grab",
        json!({"metadata": {"annotations": {"crossplane.io/reconcile-requested-at": "1"}}}),
    )
    .await;
    env.wait_vm("grab", "the request handled", |vm| {
        let handled = vm
            .status
            .as_ref()
            .and_then(|s| s.last_handled_reconcile_at.as_deref())
            == Some("1");
        handled.then_some(()).ok_or_else(|| brief(vm))
    })
    .await;
    assert!(
        writes_since(&env, 191, start).await.is_empty(),
        "VM 191 untouched"
    );
    let description = env.sim.config(191).await.description.unwrap_or_default();
    assert!(description.ends_with(marker), "{description:?}");
}

/// A container made by hand: Debian, 2 cores, 1 GiB, eth0 by DHCP, notes,
/// running.
async fn legacy_container(env: &Env, vmid: u32) {
    let client = env.sim.client();
    let create = CreateContainer {
        vmid,
        ostemplate: DEBIAN.into(),
        rootfs: Some(ContainerVolume {
            storage: "local-lvm".into(),
            size_gib: 4,
            path: None,
        }),
        hostname: Some("cache".into()),
        cores: Some(2),
        memory: Some(1024),
        swap: Some(512),
        unprivileged: true,
        nets: BTreeMap::from([(
            0,
            ContainerNet {
                name: "eth0".into(),
                bridge: Some("vmbr0".into()),
                ip: Some("dhcp".into()),
                ..ContainerNet::default()
            },
        )]),
        description: Some("hand made cache".into()),
        ..CreateContainer::default()
    };
    let upid = client.create_container("pve", &create).await.unwrap();
    client.wait_task(&upid).await.unwrap();
    let upid = client.start_container("pve", vmid).await.unwrap();
    client.wait_task(&upid).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observed_container_is_taken_over_with_the_opt_in_and_left_as_it_was() {
    let env = Env::start("adoptct").await;
    legacy_container(&env, 290).await;
    let client = env.sim.client();
    let mut ct = container(
        "cache",
        json!({"template": {"volume": DEBIAN}, "rootfs": {"storage": "local-lvm", "size": "4Gi"}}),
    );
    ct["metadata"]["annotations"] = json!({"crossplane.io/external-name": "290"});
    ct["spec"]["managementPolicies"] = json!(["Observe"]);
    env.apply(&ct).await;
    env.wait_container_ready("cache").await;
    let seen = env.container("cache").await;
    let at = serde_json::to_value(&seen.status.as_ref().unwrap().at_provider).unwrap();
    assert_eq!(at["hostname"], "cache", "{at}");
    assert_eq!(at["cpu"]["cores"], 2, "{at}");
    assert_eq!(at["memory"], "1Gi", "{at}");
    assert_eq!(at["rootfs"]["size"], "4Gi", "{at}");
    assert_eq!(at["networks"][0]["name"], "eth0", "{at}");
    assert_eq!(at["description"], "hand made cache", "{at}");

    let mut for_provider = copied(
        &at,
        &[
            "node",
            "hostname",
            "cpu",
            "memory",
            "swap",
            "rootfs",
            "networks",
            "unprivileged",
            "features",
            "startOnBoot",
            "powerState",
            "tags",
            "description",
        ],
    );
    for_provider["template"] = json!({"volume": DEBIAN});
    let start = env.sim.requests().await.len();
    env.patch_container(
        "cache",
        json!({
            "metadata": {"annotations": {ADOPT: "true"}},
            "spec": {"forProvider": for_provider, "managementPolicies": ["*"]},
        }),
    )
    .await;
    env.wait_container("cache", "taken over and Ready", |ct| {
        let described = taken_over(ct);
        let ready = ct_condition(ct, "Ready").is_some_and(|c| c.status == ConditionStatus::True);
        (ready && described)
            .then_some(())
            .ok_or_else(|| ct_brief(ct))
    })
    .await;
    let config = client.container_config("pve", 290).await.unwrap();
    let description = config.get("description").unwrap_or_default().to_owned();
    assert!(
        description.starts_with("hand made cache\n\n")
            && description.contains("Managed by crossplane-provider-proxmox: ProxmoxContainer"),
        "{description:?}"
    );
    let writes: Vec<Value> = env.sim.requests().await[start..]
        .iter()
        .filter(|r| r["method"] != "GET")
        .filter(|r| r["path"].as_str().is_some_and(|p| p.contains("/lxc/290")))
        .cloned()
        .collect();
    assert_eq!(writes.len(), 1, "one write, the marker: {writes:?}");
    assert_eq!(written_keys(&writes[0]), ["description"], "{writes:?}");
}

/// Whether the container's status says it is ours (Synced on a pass
/// after the marker was written).
/// Synced after the takeover: on the spec that asked for it (the status
/// written before the patch, while only observing, says Synced too).
fn taken_over(ct: &provider_proxmox::api::ProxmoxContainer) -> bool {
    ct_condition(ct, "Synced").is_some_and(|c| {
        c.status == ConditionStatus::True
            && c.observed_generation.is_some()
            && c.observed_generation == ct.metadata.generation
            && !c
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("taking over")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_import_subcommands_manifests_apply_and_only_observe() {
    let env = Env::start("bulkimport").await;
    legacy_vm(&env, 192, "one").await;
    legacy_vm(&env, 193, "two").await;
    // Another cluster's (or resource's) VM: its marker says so.
    legacy_vm(
        &env,
        196,
        "Managed by crossplane-provider-proxmox: ProxmoxVM elsewhere/db uid=0f0f",
    )
    .await;
    let dir = support::cluster()
        .scratch
        .join(format!("import-{}", env.ns.name()));
    // The subcommand as a user runs it: the provider config and its
    // Secret read with the kubeconfig, the manifests written as files.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxmox-provider"))
        .args(["import", "--provider-config", "pve"])
        .args(["--provider-config-kind", "provider-config"])
        .args(["--namespace", env.ns.name()])
        .args(["--node", "pve", "--kinds", "vms", "--name", "legacy-*"])
        .arg("--kubeconfig")
        .arg(&support::cluster().kubeconfig)
        .arg("--output-dir")
        .arg(&dir)
        .output()
        .await
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("pve-sim-secret"), "never a secret: {said}");
    assert!(
        said.contains(
            "left out guest 196 (legacy-196): already managed by ProxmoxVM elsewhere/db uid=0f0f"
        ),
        "{said}"
    );
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["proxmoxvm-legacy-192.yaml", "proxmoxvm-legacy-193.yaml"],
        "the seeded template and the managed VM are left out"
    );
    let start = env.sim.requests().await.len();
    for file in &files {
        let yaml = std::fs::read_to_string(dir.join(file)).unwrap();
        let object: Value = serde_saphyr::from_str(&yaml).unwrap();
        assert_eq!(
            object["spec"]["managementPolicies"],
            json!(["Observe"]),
            "{yaml}"
        );
        env.apply(&object).await;
    }
    for name in ["legacy-192", "legacy-193"] {
        let vm = env.wait_ready(name).await;
        let at = serde_json::to_value(&vm.status.as_ref().unwrap().at_provider).unwrap();
        assert_eq!(at["cpu"]["cores"], 2, "{name}: {at}");
    }
    for vmid in [192, 193] {
        assert!(
            writes_since(&env, vmid, start).await.is_empty(),
            "VM {vmid} unchanged"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_initialize_fills_the_spec_and_the_takeover_changes_nothing_else() {
    let env = Env::start("lateinit").await;
    legacy_vm(&env, 194, "filled in for me").await;
    let mut vm = manifests::vm("filled", json!({"cpu": {"cores": 2}, "memory": "1Gi"}));
    vm["metadata"]["annotations"] = json!({"crossplane.io/external-name": "194"});
    vm["spec"]["managementPolicies"] = json!(["Observe", "LateInitialize"]);
    env.apply(&vm).await;

    let filled = env
        .wait_vm("filled", "unset fields filled", |vm| {
            let fp = &vm.spec.for_provider;
            (fp.description.is_some() && !fp.disks.is_empty() && !fp.networks.is_empty())
                .then(|| vm.clone())
                .ok_or_else(|| brief(vm))
        })
        .await;
    let fp = &filled.spec.for_provider;
    assert_eq!(fp.name.as_deref(), Some("legacy-194"));
    assert_eq!(fp.description.as_deref(), Some("filled in for me"));
    assert_eq!(fp.disks[0].size.as_ref().map(|q| q.0.as_str()), Some("2Gi"));
    assert_eq!(fp.networks[0].bridge, "vmbr0");
    filled_by_late_init(&filled.metadata);
    env.wait_ready("filled").await;

    let start = env.sim.requests().await.len();
    env.patch_vm(
        "filled",
        json!({
            "metadata": {"annotations": {ADOPT: "true"}},
            "spec": {"managementPolicies": ["*"]},
        }),
    )
    .await;
    env.wait_vm("filled", "taken over and Ready", |vm| {
        let ready = condition(vm, "Ready").is_some_and(|c| c.status == ConditionStatus::True);
        let recorded = vm
            .annotation(provider_proxmox::api::meta::EXTERNAL_CREATE_SUCCEEDED)
            .is_some();
        (ready && recorded).then_some(()).ok_or_else(|| brief(vm))
    })
    .await;
    let writes = writes_since(&env, 194, start).await;
    let keys: Vec<Vec<&String>> = writes.iter().map(written_keys).collect();
    assert_eq!(keys, [vec!["description"]], "only the marker: {writes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_initialize_fills_a_containers_spec() {
    let env = Env::start("lateinitct").await;
    legacy_container(&env, 291).await;
    let mut ct = container(
        "filled",
        json!({"template": {"volume": DEBIAN}, "rootfs": {"storage": "local-lvm", "size": "4Gi"}}),
    );
    ct["metadata"]["annotations"] = json!({"crossplane.io/external-name": "291"});
    ct["spec"]["managementPolicies"] = json!(["Observe", "LateInitialize"]);
    env.apply(&ct).await;
    let filled = env
        .wait_container("filled", "unset fields filled", |ct| {
            let fp = &ct.spec.for_provider;
            (fp.hostname.is_some() && fp.description.is_some() && !fp.networks.is_empty())
                .then(|| ct.clone())
                .ok_or_else(|| ct_brief(ct))
        })
        .await;
    let fp = &filled.spec.for_provider;
    assert_eq!(fp.hostname.as_deref(), Some("cache"));
    assert_eq!(fp.description.as_deref(), Some("hand made cache"));
    assert_eq!(fp.networks[0].bridge, "vmbr0");
    filled_by_late_init(&filled.metadata);
    env.wait_container_ready("filled").await;
}

/// The spec fields were written by late initialisation's own field manager.
fn filled_by_late_init(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    let managers: Vec<&str> = meta
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert!(
        managers.contains(&provider_proxmox::api::managed::LATE_INIT_MANAGER),
        "written by its own field manager: {managers:?}"
    );
}
