//! Creating VMs end to end: import, image download, clone, cloud-init.

use serde_json::json;

use crate::reconcile;
use crate::reconcile::{Env, condition, is_true, manifests};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_flow_reaches_ready_with_the_disk_imported_and_the_ip_reported() {
    let env = Env::start("import").await;
    let mut vm = manifests::vm("web", manifests::imported(json!({})));
    vm["spec"]["writeConnectionSecretToRef"] = json!({"name": "web-conn"});
    env.apply(&vm).await;

    let vm = ready_with_ip(&env, "web").await.1;
    let obj = env.vm("web").await;
    let status = obj.status.clone().unwrap();
    let vmid = env.vmid("web").await;
    assert_eq!(status.at_provider.vmid, Some(vmid));
    assert_eq!(status.at_provider.node.as_deref(), Some("pve"));
    assert!(status.at_provider.task.is_none(), "no task left in flight");
    assert!(vm.starts_with("192.0.2."), "the sim's DHCP address: {vm}");
    assert!(
        obj.metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&"finalizer.managedresource.crossplane.io".to_owned())
    );
    let annotations = obj.metadata.annotations.clone().unwrap();
    assert!(annotations.contains_key("crossplane.io/external-create-succeeded"));

    // On the sim: one create, with import-from; the disk grown to 8 GiB.
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert_eq!(
        creates[0]["params"]["scsi0"],
        format!("local-lvm:0,import-from={}", manifests::UBUNTU)
    );
    let config = env.sim.config(vmid).await;
    let disk = &config.disks["scsi0"];
    assert_eq!(disk.size, Some(8 << 30), "{disk:?}");
    assert!(
        config
            .description
            .as_deref()
            .unwrap_or_default()
            .contains(&format!("uid={}", obj.metadata.uid.clone().unwrap()))
    );
    assert_eq!(env.sim.power(vmid).await, "running");

    // The printer columns show it.
    let wide =
        support::kubectl_ok(&["get", "proxmoxvm", "web", "-n", env.ns.name(), "-o", "wide"]).await;
    let row = wide.lines().nth(1).unwrap();
    for want in ["True", &vmid.to_string(), "pve", "running", vm.as_str()] {
        assert!(row.contains(want), "{want:?} not in {row:?}\n{wide}");
    }

    // The connection Secret, owned by the resource.
    let secret = env.secret("web-conn").await.expect("the connection Secret");
    let data = secret.data.unwrap();
    assert_eq!(data["vmid"].0, vmid.to_string().into_bytes());
    assert_eq!(data["ipAddress"].0, vm.clone().into_bytes());
    assert_eq!(data["user"].0, b"ubuntu");
    let owner = &secret.metadata.owner_references.unwrap()[0];
    assert_eq!(owner.uid, obj.metadata.uid.clone().unwrap());

    // Core v1 events: one per task, when it ends, naming its UPID (a task
    // found running 15 s after its start is announced too: `TaskStarted`).
    // The start's end is said right after the status that shows it Ready.
    let events = env
        .wait_event("web", |e| {
            e.1 == "TaskSucceeded" && e.2.contains(":qmstart:")
        })
        .await;
    for task in [":qmcreate:", ":resize:", ":qmstart:"] {
        let said: Vec<_> = events
            .iter()
            .filter(|e| e.1 == "TaskSucceeded" && e.2.contains(task))
            .collect();
        assert_eq!(said.len(), 1, "{task} {events:?}");
        assert_eq!(said[0].3, 1, "said once: {events:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_is_downloaded_once_and_reused_by_a_second_vm() {
    let env = Env::start("image").await;
    let url = "https://images.example/noble-server-cloudimg-amd64.img";
    let checksum = support::sha256_hex(url); // the sim's content of an unregistered URL
    let disk = json!([{
        "slot": "scsi0", "storage": "local-lvm", "size": "8Gi",
        "image": {"url": url, "checksum": checksum, "checksumAlgorithm": "sha256"},
    }]);
    env.apply(&manifests::vm(
        "first",
        manifests::imported(json!({"disks": disk})),
    ))
    .await;
    env.wait_ready("first").await;
    env.apply(&manifests::vm(
        "second",
        manifests::imported(json!({"disks": disk})),
    ))
    .await;
    env.wait_ready("second").await;

    let downloads = env
        .sim
        .requests_to("POST", "/nodes/{node}/storage/{storage}/download-url")
        .await;
    assert_eq!(downloads.len(), 1, "{downloads:?}");
    let file = format!("noble-server-cloudimg-amd64-{}.qcow2", &checksum[..12]);
    assert_eq!(downloads[0]["params"]["filename"], file);
    assert_eq!(downloads[0]["params"]["content"], "import");
    assert_eq!(downloads[0]["params"]["checksum-algorithm"], "sha256");
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    assert_eq!(creates.len(), 2, "{creates:?}");
    for create in &creates {
        assert_eq!(
            create["params"]["scsi0"],
            format!("local-lvm:0,import-from=local:import/{file}")
        );
    }
    env.wait_event("first", |e| {
        e.1 == "TaskSucceeded" && e.2.starts_with("download ")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clone_of_template_9000_is_configured_grown_and_started() {
    let env = Env::start("clone").await;
    env.apply(&manifests::vm(
        "cloned",
        json!({
            "clone": {"templateVmid": 9000, "full": true},
            "memory": "4Gi",
            "cpu": {"cores": 4},
            "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "10Gi"}],
            "cloudInit": {"user": "ops", "ipConfigs": [{"interface": "net0", "ip": "dhcp"}]},
            "agent": {"enabled": true},
            "tags": ["cloned"],
        }),
    ))
    .await;
    let vm = env.wait_ready("cloned").await;
    let vmid = env.vmid("cloned").await;

    let clones = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/clone")
        .await;
    assert_eq!(clones.len(), 1, "{clones:?}");
    assert_eq!(clones[0]["params"]["vmid"], "9000");
    assert_eq!(clones[0]["params"]["newid"], vmid.to_string());
    assert_eq!(clones[0]["params"]["full"], "1");
    let config = env.sim.config(vmid).await;
    assert_eq!(config.memory, Some(4096));
    assert_eq!(config.cores, Some(4));
    assert_eq!(config.ciuser.as_deref(), Some("ops"));
    assert_eq!(config.disks["scsi0"].size, Some(10 << 30));
    assert!(config.tags.contains("cloned"));
    assert!(
        config
            .description
            .unwrap_or_default()
            .contains(&format!("uid={}", vm.metadata.uid.unwrap()))
    );
    assert_eq!(env.sim.power(vmid).await, "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_init_is_applied_and_the_password_never_shows() {
    const PASSWORD: &str = "Sup3r-s3cret-p4ssw0rd";
    let env = Env::start("cloudinit").await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "alice-password"},
        "stringData": {"password": PASSWORD},
    }))
    .await;
    let keys = [
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGV4YW1wbGUta2V5LWZvci1kb2N1bWVudGF0aW9u alice@laptop",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv/+ alice@desk",
    ];
    let mut vm = manifests::vm(
        "alice",
        manifests::imported(json!({
            "cloudInit": {
                "user": "alice",
                "passwordSecretRef": {"name": "alice-password", "key": "password"},
                "sshKeys": keys,
                "ipConfigs": [{"interface": "net0", "ip": "10.20.0.5/24", "gateway": "10.20.0.1"}],
                "nameservers": ["10.20.0.53", "9.9.9.9"],
                "searchDomain": "lab.example",
            },
        })),
    );
    vm["spec"]["writeConnectionSecretToRef"] = json!({"name": "alice-conn"});
    env.apply(&vm).await;
    let ip = env
        .wait_vm("alice", "the static address reported by the agent", |vm| {
            vm.status
                .as_ref()
                .and_then(|s| s.at_provider.ip_address.clone())
                .filter(|ip| ip == "10.20.0.5")
                .ok_or_else(|| "no address yet".into())
        })
        .await;
    assert_eq!(ip, "10.20.0.5");
    let vmid = env.vmid("alice").await;

    let config = env.sim.config(vmid).await;
    assert_eq!(config.ciuser.as_deref(), Some("alice"));
    assert_eq!(config.sshkeys, keys);
    assert_eq!(config.raw["ipconfig0"], "ip=10.20.0.5/24,gw=10.20.0.1");
    assert_eq!(config.nameserver.as_deref(), Some("10.20.0.53 9.9.9.9"));
    assert_eq!(config.searchdomain.as_deref(), Some("lab.example"));
    assert!(config.cipassword_set, "a password is set");
    // The keys went out strictly percent-encoded (a space is %20, `+` %2B).
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    let sent = creates[0]["params"]["sshkeys"].as_str().unwrap().to_owned();
    assert!(
        sent.contains("ssh-ed25519%20AAAA") && sent.contains("%2F%2B%20alice%40desk"),
        "{sent}"
    );

    // The password is nowhere but in its Secret and on Proxmox.
    let obj = env.vm("alice").await;
    let status = serde_json::to_string(&obj.status).unwrap();
    assert!(!status.contains(PASSWORD), "status: {status}");
    assert!(obj.status.unwrap().at_provider.password_version.is_some());
    let events = format!("{:?}", env.events("alice").await);
    assert!(!events.contains(PASSWORD), "events: {events}");
    let conn = format!("{:?}", env.secret("alice-conn").await.unwrap().data);
    assert!(!conn.contains(PASSWORD));
    let logs = reconcile::logs::text();
    assert!(logs.contains("CreateVm"), "the logs were captured");
    assert!(!logs.contains(PASSWORD), "the password is in the logs");
}

/// A template and a linked clone of it applied together, with a resync
/// interval of half an hour (nothing here waits that long, so only a
/// trigger explains what happens): the clone waits for the template's
/// ProxmoxVM without reporting an error, and is cloned once the
/// conversion ended, woken by that resource's status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_clone_applied_with_its_template_waits_and_is_cloned_once_it_is_converted() {
    let options = reconcile::Options {
        provider: json!({"resyncInterval": "30m"}),
        ..reconcile::Options::default()
    };
    let env = Env::start_with("clonewake", options).await;
    // Every version of the clone, for every Synced reason it ever shows.
    let (versions, watch) = watch_versions(&env, "web");

    // The conversion is held until the test has seen the clone wait: at
    // time scale 0.01 it could end before the clone's first pass.
    env.sim
        .fault(json!({"fault": "task-held", "hold": "convert", "task_type": "qmtemplate"}))
        .await;
    env.apply(&manifests::vm(
        "golden",
        manifests::imported(json!({"template": true, "powerState": "Stopped"})),
    ))
    .await;
    env.apply(&manifests::vm(
        "web",
        json!({"node": "pve", "clone": {"templateName": "golden", "full": false}, "memory": "1Gi"}),
    ))
    .await;
    let waiting = env.wait_synced_reason("web", "WaitingForTemplate").await;
    assert!(is_true(&waiting), "waiting is no failure: {waiting:?}");
    let message = waiting.message.unwrap_or_default();
    assert!(message.contains("/golden"), "{message}");
    env.sim.release("convert").await;
    env.wait_vm("golden", "converted and Ready", |vm| {
        let at = &vm.status.as_ref().ok_or("no status")?.at_provider;
        let ready = condition(vm, "Ready").is_some_and(is_true);
        (ready && at.task.is_none())
            .then_some(())
            .ok_or_else(|| "not converted and Ready yet".to_owned())
    })
    .await;
    env.wait_ready("web").await;
    watch.abort();

    let template = env.vmid("golden").await;
    let requests = env.sim.requests().await;
    let at = |route: &str| {
        requests
            .iter()
            .position(|r| r["method"] == "POST" && r["route"] == route)
            .unwrap_or_else(|| panic!("POST {route} was sent"))
    };
    assert!(
        at("/nodes/{node}/qemu/{vmid}/template") < at("/nodes/{node}/qemu/{vmid}/clone"),
        "cloned after the conversion"
    );
    let clones = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/clone")
        .await;
    assert_eq!(clones.len(), 1, "{clones:?}");
    assert_eq!(clones[0]["params"]["vmid"], template.to_string());
    assert_eq!(clones[0]["params"]["full"], "0");
    let reasons: Vec<String> = versions
        .lock()
        .unwrap()
        .iter()
        .filter_map(|vm| condition(vm, "Synced").map(|c| c.reason.clone()))
        .collect();
    assert!(
        reasons.iter().any(|r| r == "WaitingForTemplate"),
        "{reasons:?}"
    );
    assert!(
        !reasons.iter().any(|r| r == "TemplateNotFound"),
        "the clone never says its template is missing: {reasons:?}"
    );
    let woken = format!("clone={}/web", env.ns.name());
    assert!(
        reconcile::logs::text().lines().any(|l| l
            .contains("the template's resource changed; waking its clone")
            && l.contains(&woken)),
        "woken by the template's resource"
    );
}

/// A VM's creation writes the resource only as often as what changed is
/// worth (issue 36): every version the watch shows from the apply until it
/// is Ready with its address, by what changed. The metadata: the VMID with
/// the finalizer in one patch, the creation recorded in another. The status
/// (the spec names the node: nothing to place): each task (create, resize,
/// start: its UPID before anything else is sent, the last one's end in the
/// same write), Ready and the agent's address; no write only rewords a
/// message or moves a progress figure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_is_created_in_a_handful_of_kubernetes_writes() {
    use provider_proxmox::reconcile::managed::status::Change;
    use provider_proxmox::reconcile::vm::pass::status::change;

    let env = Env::start("writes").await;
    let (versions, watch) = watch_versions(&env, "web");
    env.apply(&manifests::vm("web", manifests::imported(json!({}))))
        .await;
    let last = ready_with_ip(&env, "web").await.0;
    support::poll(
        "the watch to show that version",
        reconcile::DEADLINE,
        || {
            let seen = versions
                .lock()
                .unwrap()
                .iter()
                .any(|vm| vm.metadata.resource_version == last);
            async move { seen.then_some(()).ok_or_else(|| "not yet".to_owned()) }
        },
    )
    .await;
    watch.abort();

    let versions = versions.lock().unwrap().clone();
    let (mut metadata, mut status) = (0, vec![]);
    for pair in versions.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        if before.metadata.resource_version == after.metadata.resource_version {
            continue;
        }
        if (&before.metadata.annotations, &before.metadata.finalizers)
            != (&after.metadata.annotations, &after.metadata.finalizers)
        {
            metadata += 1;
        }
        if before.status != after.status {
            status.push(change(
                before.status.as_ref(),
                after.status.as_ref().unwrap(),
            ));
        }
    }
    assert_eq!(metadata, 2, "the VMID with the finalizer, the creation");
    assert!(
        !status
            .iter()
            .any(|c| matches!(c, Change::Wording | Change::Progress(_))),
        "{status:?}"
    );
    // The create, the resize (with the create's end), the start (with the
    // resize's), Ready (the start's end); then the address.
    let records = status.iter().filter(|c| **c == Change::Record).count();
    assert_eq!(records, 4, "{status:?}");
    assert!(status.len() <= 5, "{status:?}");
}

/// Every version of the ProxmoxVM `name` the watch shows from now on, until
/// the task returned is aborted.
fn watch_versions(env: &Env, name: &str) -> (Versions, tokio::task::JoinHandle<()>) {
    let versions = Versions::default();
    let seen = std::sync::Arc::clone(&versions);
    let events = kube::runtime::watcher(
        env.vms(),
        kube::runtime::watcher::Config::default().fields(&format!("metadata.name={name}")),
    );
    let watch = tokio::spawn(async move {
        use futures::StreamExt;
        let mut events = std::pin::pin!(kube::runtime::WatchStreamExt::applied_objects(events));
        while let Some(event) = events.next().await {
            if let Ok(vm) = event {
                seen.lock().unwrap().push(vm);
            }
        }
    });
    (versions, watch)
}

type Versions = std::sync::Arc<std::sync::Mutex<Vec<provider_proxmox::api::ProxmoxVM>>>;

/// Waits for the ProxmoxVM `name` to be Ready with an IP address: the
/// resourceVersion that shows it, and the address.
async fn ready_with_ip(env: &Env, name: &str) -> (Option<String>, String) {
    env.wait_vm(name, "Ready with an IP address", |vm| {
        let ready = condition(vm, "Ready").is_some_and(is_true);
        let ip = vm
            .status
            .as_ref()
            .and_then(|s| s.at_provider.ip_address.clone());
        match (ready, ip) {
            (true, Some(ip)) => Ok((vm.metadata.resource_version.clone(), ip)),
            _ => Err("not Ready with an IP yet".into()),
        }
    })
    .await
}
