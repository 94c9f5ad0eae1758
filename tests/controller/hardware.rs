//! Firmware, console, devices, protection and templates end to end: what
//! the spec declares lands on the VM (read back from the simulator),
//! changes for the next start show in pendingChanges, OVMF without an EFI
//! disk is a warning, protection is cleared only to delete, and a template
//! built by one resource is cloned by another and not destroyed while its
//! linked clone exists. A mapped device missing on the VM's node fails
//! the start as in Proxmox, and the retry succeeds once it is mapped; a
//! delete meanwhile does not wait out the retry's backoff.

use crate::reconcile::{DEADLINE, Env, condition, manifests};
use crate::support;

use kube::api::DeleteParams;
use pve_client::vm::{Startup, VmParams};
use pve_sim::{SimConfig, Simulator, state::file::StateFile};
use serde_json::{Value, json};

/// A Windows-11-like VM with every device kind, from the seeded image.
fn windows_like() -> Value {
    manifests::imported(json!({
        "bios": "OVMF",
        "efiDisk": {"storage": "local-lvm", "preEnrolledKeys": true},
        "machine": {"type": "q35"},
        "tpmState": {"storage": "local-lvm", "version": "v2.0"},
        "osType": "win11",
        "serialPorts": [{"slot": "serial0"}],
        "vga": {"type": "serial0"},
        "pciDevices": [{"slot": "hostpci0", "mapping": "gpu", "pcie": true}],
        "usbDevices": [{"slot": "usb0", "mapping": "token"}],
        "rng": {"source": "/dev/urandom"},
        "hotplug": ["network", "disk", "usb"],
        "balloon": {"minimum": "1Gi"},
        "cpu": {"cores": 2, "type": "host", "flags": ["+aes"], "numa": true},
        "onBoot": true,
        "startup": {"order": 1, "up": 30},
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firmware_console_and_devices_are_created_and_kept() {
    let env = Env::start("hwcreate").await;
    // Mapped devices are looked up on the node when the VM starts.
    env.sim
        .create_mapping("pci", "gpu", &["node=pve,path=0000:01:00.0,id=10de:2204"])
        .await;
    env.sim
        .create_mapping("usb", "token", &["node=pve,id=1050:0407"])
        .await;
    let vmid = env.create_ready("win", windows_like()).await;
    let raw = env.sim.config(vmid).await.raw;
    let get = |k: &str| raw.get(k).map(String::as_str).unwrap_or_default();
    assert_eq!(get("bios"), "ovmf");
    assert!(
        get("efidisk0").starts_with("local-lvm:vm-") && get("efidisk0").contains("efitype=4m"),
        "{raw:?}"
    );
    assert!(get("efidisk0").contains("pre-enrolled-keys=1"));
    assert!(get("tpmstate0").contains("version=v2.0"));
    assert_eq!(
        get("machine"),
        "pc-q35-9.2+pve1",
        "Proxmox pinned the Windows guest's machine; the spec (no version) accepts it"
    );
    assert_eq!((get("serial0"), get("vga")), ("socket", "serial0"));
    assert_eq!(get("hostpci0"), "mapping=gpu,pcie=1");
    assert_eq!(get("usb0"), "mapping=token");
    assert_eq!(get("rng0"), "/dev/urandom");
    assert_eq!((get("balloon"), get("numa")), ("1024", "1"));
    assert_eq!(get("cpu"), "host,flags=+aes");
    assert_eq!((get("onboot"), get("startup")), ("1", "order=1,up=30"));
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    assert_eq!(creates.len(), 1, "the volumes come with the create");
    assert_eq!(
        creates[0]["params"]["efidisk0"],
        "local-lvm:1,efitype=4m,pre-enrolled-keys=1"
    );
    let vm = env.vm("win").await;
    assert!(
        condition(&vm, "Warning").is_none(),
        "an EFI disk is declared"
    );

    // Someone changes the start order in Proxmox: corrected.
    let edit = VmParams {
        startup: Some(Startup {
            order: Some(9),
            ..Startup::default()
        }),
        ..VmParams::default()
    };
    env.sim.edit(vmid, edit).await;
    support::poll("the startup order to be corrected", DEADLINE, || async {
        let startup = env.sim.config(vmid).await.raw.get("startup").cloned();
        (startup.as_deref() == Some("order=1,up=30"))
            .then_some(())
            .ok_or(format!("startup {startup:?}"))
    })
    .await;

    // A second serial port on the running VM waits for its next start.
    env.patch_vm(
        "win",
        json!({"spec": {"forProvider": {"serialPorts": [{"slot": "serial0"}, {"slot": "serial1"}]}}}),
    )
    .await;
    let vm = env
        .wait_vm("win", "serial1 pending", |vm| {
            let pending = &vm.status.as_ref().unwrap().at_provider.pending_changes;
            pending
                .contains(&"serial1".to_owned())
                .then_some(vm.clone())
                .ok_or_else(|| format!("pending {pending:?}"))
        })
        .await;
    let synced = condition(&vm, "Synced").unwrap();
    assert!(
        synced
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("serial1 take effect at the VM's next reboot"),
        "{synced:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_without_the_mapping_on_its_node_is_reported_until_it_exists() {
    let env = Env::start("hwmap").await;
    let spec = manifests::imported(json!({
        "machine": {"type": "q35"},
        "pciDevices": [{"slot": "hostpci0", "mapping": "gpu", "pcie": true}],
    }));
    env.apply(&manifests::vm("gpu", spec)).await;
    let failed = env.wait_synced_reason("gpu", "TaskFailed").await;
    assert!(
        failed
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("PCI device mapping not found for 'gpu'"),
        "{failed:?}"
    );
    // The administrator maps the GPU on this node: the retry starts the VM.
    env.sim
        .create_mapping("pci", "gpu", &["node=pve,path=0000:01:00.0,id=10de:2204"])
        .await;
    let vmid = env.vmid("gpu").await;
    env.wait_ready("gpu").await;
    assert_eq!(env.sim.power(vmid).await, "running");
}

/// A delete wins over the retry of a start that keeps failing: the VM goes
/// at once, not after the start's backoff (issue 20, item 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_does_not_wait_out_the_backoff_of_a_failing_start() {
    let env = Env::start("hwdel").await;
    let spec = manifests::imported(json!({
        "machine": {"type": "q35"},
        "pciDevices": [{"slot": "hostpci0", "mapping": "gpu", "pcie": true}],
    }));
    env.apply(&manifests::vm("gpu", spec)).await;
    // The second failure: the next retry is 20 s away, the one after 40 s.
    let (failures, said) = env
        .wait_vm("gpu", "the start to have failed twice", |vm| {
            let failure = vm
                .status
                .as_ref()
                .and_then(|s| s.at_provider.last_failure.as_ref());
            failure
                .filter(|f| f.count >= 2)
                .and_then(|f| Some((f.count, condition(vm, "Synced")?.message.clone()?)))
                .ok_or_else(|| format!("last failure: {failure:?}"))
        })
        .await;
    // The backoff the resource announced: "retrying in 20s".
    let backoff = crate::reconcile::announced_backoff(&said);
    let vmid = env.vmid("gpu").await;
    env.vms()
        .delete("gpu", &DeleteParams::default())
        .await
        .expect("delete");
    env.wait_gone("gpu").await;
    assert!(
        !env.sim.vmids().await.contains(&vmid),
        "VM {vmid} destroyed"
    );
    // Judged on the simulator's history, not on how fast the test saw it
    // go: the destroy came before the retry of the start was due (from the
    // end of the last failed start), and no start came in between.
    let tasks = env.sim.tasks().await;
    let id = vmid.to_string();
    let starts: Vec<&Value> = tasks
        .iter()
        .filter(|t| t["type"] == "qmstart" && t["id"] == id.as_str())
        .collect();
    let failed_at = starts
        .iter()
        .filter_map(|t| t["ended"].as_f64())
        .reduce(f64::max)
        .unwrap_or_else(|| panic!("failed starts: {tasks:?}"));
    assert_eq!(
        starts.len(),
        failures as usize,
        "no start after the failures seen: {starts:?}"
    );
    let destroys = env
        .sim
        .requests_to("DELETE", "/nodes/{node}/qemu/{vmid}")
        .await;
    let destroyed_at = destroys
        .first()
        .and_then(|r| r["time"].as_f64())
        .unwrap_or_else(|| panic!("a destroy: {destroys:?}"));
    assert!(
        destroyed_at < failed_at + backoff,
        "destroyed {:.1} s after the last failed start, not before its {backoff} s backoff ran out",
        destroyed_at - failed_at
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ovmf_without_an_efi_disk_is_a_warning_until_one_is_declared() {
    let env = Env::start("hwwarn").await;
    let spec = manifests::imported(json!({"bios": "OVMF", "powerState": "Stopped"}));
    env.apply(&manifests::vm("uefi", spec)).await;
    let warning = env
        .wait_vm("uefi", "a Warning", |vm| {
            condition(vm, "Warning")
                .cloned()
                .ok_or_else(|| "no Warning yet".to_owned())
        })
        .await;
    assert_eq!(warning.reason, "NoEfiDisk");
    assert!(
        warning
            .message
            .unwrap_or_default()
            .contains("temporary copy of the EFI variables"),
    );
    env.wait_ready("uefi").await;
    let vmid = env.vmid("uefi").await;
    assert!(
        !env.sim.config(vmid).await.raw.contains_key("efidisk0"),
        "no EFI disk added silently"
    );

    env.patch_vm(
        "uefi",
        json!({"spec": {"forProvider": {"efiDisk": {"storage": "local-lvm"}}}}),
    )
    .await;
    env.wait_vm("uefi", "the Warning gone", |vm| {
        condition(vm, "Warning")
            .is_none()
            .then_some(())
            .ok_or_else(|| "still warned".to_owned())
    })
    .await;
    support::poll("the EFI disk to be added", DEADLINE, || async {
        let efi = env.sim.config(vmid).await.raw.get("efidisk0").cloned();
        efi.filter(|e| e.contains("efitype=4m"))
            .ok_or("no efidisk0 yet".to_owned())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protection_is_cleared_only_to_delete_the_vm() {
    let env = Env::start("hwprot").await;
    let vmid = env
        .create_ready("safe", manifests::imported(json!({"protection": true})))
        .await;
    assert_eq!(
        env.sim
            .config(vmid)
            .await
            .raw
            .get("protection")
            .map(String::as_str),
        Some("1")
    );
    env.vms()
        .delete("safe", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_gone("safe").await;
    assert!(!env.sim.vmids().await.contains(&vmid), "destroyed");
    let configures = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/config")
        .await;
    let cleared = configures
        .iter()
        .filter(|r| r["params"]["delete"] == "protection")
        .count();
    assert_eq!(cleared, 1, "{configures:?}");
    env.wait_event("safe", |(_, reason, _, _)| reason == "ClearingProtection")
        .await;
}

/// A simulator whose `dirimg` directory storage holds VM images: PVE
/// names linked clones there after their base, and will not destroy a
/// base they use.
async fn directory_storage_sim() -> pve_sim::SimHandle {
    let state = StateFile::parse(
        "storages:
  - {id: local-lvm, type: lvmthin, content: [images, rootdir], size: 100G}
  - {id: dirimg, type: dir, path: /srv/images, content: [images], size: 100G}
guests: []
",
    )
    .unwrap();
    Simulator::start(SimConfig {
        time_scale: 0.01,
        state: Some(state),
        ..SimConfig::default()
    })
    .await
    .unwrap()
}

/// A ProxmoxVM on ProviderConfig `dir`.
fn on_dir(name: &str, for_provider: Value) -> Value {
    let mut vm = manifests::vm(name, for_provider);
    vm["spec"]["providerConfigRef"]["name"] = json!("dir");
    vm
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_is_built_cloned_and_kept_while_its_clone_exists() {
    let env = Env::start("hwtmpl").await;
    let dir = directory_storage_sim().await;
    let mut config = manifests::provider_config(&env.sim, &json!({}));
    config["metadata"]["name"] = json!("dir");
    config["spec"]["endpoint"] = json!(dir.base_url());
    config["spec"]["tls"]["fingerprint"] = json!(dir.fingerprint());
    env.apply(&config).await;

    let golden = json!({
        "node": "pve",
        "memory": "1Gi",
        "disks": [{"slot": "scsi0", "storage": "dirimg", "size": "1Gi"}],
        "serialPorts": [{"slot": "serial0"}],
        "vga": {"type": "serial0"},
        "template": true,
        "powerState": "Stopped",
    });
    env.apply(&on_dir("golden", golden)).await;
    let template = env
        .wait_vm("golden", "converted", |vm| {
            let at = &vm.status.as_ref().ok_or("no status")?.at_provider;
            let ready = condition(vm, "Ready").is_some_and(crate::reconcile::is_true);
            match (at.vmid, ready, &at.task) {
                (Some(vmid), true, None) => Ok(vmid),
                _ => Err("not converted and Ready yet".to_owned()),
            }
        })
        .await;
    let client = {
        let mut c = pve_client::ClientConfig::new(
            &dir.base_url(),
            pve_client::Credentials::token_from_str(pve_sim::DEFAULT_API_TOKEN).unwrap(),
        )
        .unwrap();
        c.tls.pinned_fingerprints = vec![dir.fingerprint().parse().unwrap()];
        pve_client::Client::new(c).unwrap()
    };
    support::poll("VM to be a template", DEADLINE, || async {
        let c = client
            .vm_config("pve", template)
            .await
            .map_err(|e| e.to_string())?;
        c.template
            .then_some(c)
            .ok_or("not a template yet".to_owned())
    })
    .await;

    let clone = json!({
        "node": "pve",
        "clone": {"templateName": "golden", "full": false},
        "powerState": "Stopped",
    });
    env.apply(&on_dir("web", clone)).await;
    env.wait_ready("web").await;
    let clone_vmid = env.vmid("web").await;
    let disk = client.vm_config("pve", clone_vmid).await.unwrap().raw["scsi0"].clone();
    assert!(
        disk.starts_with(&format!("dirimg:{template}/base-{template}-disk-0.qcow2/")),
        "a linked clone of the base: {disk}"
    );

    // The template's resource goes first: held, said once, not retried.
    env.vms()
        .delete("golden", &DeleteParams::default())
        .await
        .unwrap();
    let held = env.wait_synced_reason("golden", "TemplateInUse").await;
    assert!(
        held.message
            .unwrap_or_default()
            .contains(&format!("VM {clone_vmid}")),
    );
    assert!(client.vm_config("pve", template).await.is_ok(), "kept");
    let events = env
        .wait_event("golden", |(_, reason, _, _)| reason == "TemplateInUse")
        .await;
    let warned: i32 = events
        .iter()
        .filter(|(_, reason, _, _)| reason == "TemplateInUse")
        .map(|(_, _, _, count)| count)
        .sum();
    assert_eq!(warned, 1, "{events:?}");

    // Once the clone is gone, the template goes too.
    env.vms()
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_gone("web").await;
    env.wait_gone("golden").await;
    let destroys = destroy_requests(&dir, template).await;
    assert_eq!(
        destroys, 1,
        "the template was destroyed once, never blindly"
    );
}

/// How many `DELETE .../qemu/{vmid}` the simulator saw for `vmid`.
async fn destroy_requests(sim: &pve_sim::SimHandle, vmid: u32) -> usize {
    let ca = reqwest::Certificate::from_pem(sim.ca_pem().as_bytes()).unwrap();
    let http = reqwest::Client::builder()
        .tls_certs_only([ca])
        .build()
        .unwrap();
    let log: Value = http
        .get(format!("{}/_sim/requests", sim.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let path = format!("/nodes/pve/qemu/{vmid}");
    log["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["method"] == "DELETE" && r["path"].as_str() == Some(path.as_str()))
        .count()
}
