//! ProxmoxImages: downloaded once per storage, named by VMs, deleted once
//! nothing refers to them; never downloaded twice across a lost status
//! write.

use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use provider_proxmox::api::ProxmoxImage;
use provider_proxmox::api::image::LocationPhase;
use serde_json::{Value, json};

use pve_sim::SimConfig;

use crate::reconcile::{DEADLINE, Env, Options, Sim, manifests, wait_event_in};
use crate::support;

const DOWNLOAD: &str = "/nodes/{node}/storage/{storage}/download-url";
const DELETE: &str = "/nodes/{node}/storage/{storage}/content/{volume}";

fn image(name: &str, url: &str) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": name},
        "spec": {
            "forProvider": {
                "source": {"url": url, "checksum": support::sha256_hex(url), "checksumAlgorithm": "sha256"},
                "content": "import",
                "storage": "local",
            },
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

fn images(env: &Env) -> Api<ProxmoxImage> {
    Api::namespaced(support::client(), env.ns.name())
}

fn condition(image: &ProxmoxImage, type_: &str) -> Option<(String, String)> {
    image
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (format!("{:?}", c.status), c.reason.clone()))
}

async fn wait_image<T>(
    env: &Env,
    name: &str,
    what: &str,
    check: impl Fn(Option<&ProxmoxImage>) -> Result<T, String>,
) -> T {
    let api = images(env);
    support::poll(&format!("ProxmoxImage {name}: {what}"), DEADLINE, || {
        let api = api.clone();
        let check = &check;
        async move {
            let image = api.get_opt(name).await.map_err(|e| format!("GET: {e}"))?;
            check(image.as_ref()).map_err(|why| {
                format!(
                    "{why}; status: {:?}",
                    image.as_ref().and_then(|i| i.status.clone())
                )
            })
        }
    })
    .await
}

async fn wait_image_ready(env: &Env, name: &str) -> ProxmoxImage {
    wait_image(env, name, "Ready", |image| match image {
        Some(i) if condition(i, "Ready").is_some_and(|c| c.0 == "True") => Ok(i.clone()),
        _ => Err("not Ready".into()),
    })
    .await
}

async fn wait_image_gone(env: &Env, name: &str) {
    wait_image(env, name, "gone", |i| match i {
        None => Ok(()),
        Some(_) => Err("still there".into()),
    })
    .await;
}

async fn wait_one_user(env: &Env, name: &str) {
    wait_image(env, name, "one user", |i| {
        i.and_then(|i| i.status.as_ref()?.at_provider.users)
            .filter(|u| *u == 1)
            .ok_or_else(|| "not 1 user".to_owned())
    })
    .await;
}

/// The volume is on neither node's `local` storage.
async fn assert_gone(env: &Env, content: &str, volume: &str) {
    let client = env.sim.client();
    for node in ["pve", "pve2"] {
        let listed = client
            .storage_content(node, "local", Some(content))
            .await
            .unwrap();
        assert!(
            listed.iter().all(|c| c.volid != volume),
            "{volume} still on {node}: {listed:?}"
        );
    }
}

fn named_disk_vm(name: &str, image: &str) -> Value {
    manifests::vm(
        name,
        manifests::imported(json!({
            "disks": [{"slot": "scsi0", "storage": "local-lvm", "size": "8Gi",
                       "image": {"name": image}}],
        })),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_is_downloaded_once_per_node_named_by_a_vm_and_deleted_after_it() {
    let options = Options {
        nodes: vec!["pve".into(), "pve2".into()],
        ..Options::default()
    };
    let env = Env::start_with("images", options).await;
    // A VM naming an image that does not exist yet waits for it.
    env.apply(&named_disk_vm("web", "noble")).await;
    env.wait_synced_reason("web", "ImageNotFound").await;

    // The downloads are held until the test has seen the VM wait for them
    // (unheld, they may end before the VM looks again).
    env.sim
        .fault(json!({"fault": "task-held", "hold": "download", "task_type": "download"}))
        .await;
    let url = "https://images.example/noble-server-cloudimg-amd64.img";
    env.apply(&image("noble", url)).await;
    let waiting = env.wait_synced_reason("web", "ImageNotReady").await;
    assert!(
        waiting
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("noble"),
        "{waiting:?}"
    );
    env.sim.release("download").await;
    let ready = wait_image_ready(&env, "noble").await;
    let at = ready.status.clone().unwrap().at_provider;
    assert_eq!(at.summary.as_deref(), Some("2/2 ready"), "{at:?}");
    assert_eq!(at.locations.len(), 2);
    for l in &at.locations {
        assert_eq!(l.phase, LocationPhase::Ready, "{l:?}");
        assert_eq!(l.size, Some(600 << 20), "{l:?}");
        assert!(l.task.is_none(), "{l:?}");
    }
    let volume = at.volume.clone().expect("the volume");
    assert!(
        volume.starts_with("local:import/noble-server-cloudimg-amd64-"),
        "{volume}"
    );
    assert!(volume.ends_with(".qcow2"), "{volume}");
    let row = support::kubectl_ok(&["get", "proxmoximage", "noble", "-n", env.ns.name()]).await;
    let row = row.lines().nth(1).unwrap_or_default().to_owned();
    for want in ["True", "import", "2/2 ready"] {
        assert!(row.contains(want), "{want:?} not in {row:?}");
    }

    // Once per node, never again.
    let downloads = env.sim.requests_to("POST", DOWNLOAD).await;
    let mut nodes: Vec<String> = downloads
        .iter()
        .map(|r| r["path"].as_str().unwrap_or_default().to_owned())
        .collect();
    nodes.sort();
    assert_eq!(downloads.len(), 2, "{downloads:?}");
    assert_ne!(nodes[0], nodes[1], "one per node: {nodes:?}");

    // The VM imports the image's volume.
    env.wait_ready("web").await;
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert_eq!(
        creates[0]["params"]["scsi0"],
        format!("local-lvm:0,import-from={volume}")
    );
    wait_one_user(&env, "noble").await;

    // Deleted while the VM names it: it waits, and says why.
    images(&env)
        .delete("noble", &DeleteParams::default())
        .await
        .unwrap();
    wait_image(&env, "noble", "ImageInUse", |i| {
        match i.and_then(|i| condition(i, "Synced")) {
            Some((s, r)) if s == "False" && r == "ImageInUse" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    wait_event_in(env.ns.name(), "noble", |e| {
        e.0 == "Warning" && e.1 == "ImageInUse" && e.2.contains("web")
    })
    .await;
    assert_eq!(
        env.sim.count("DELETE", DELETE).await,
        0,
        "nothing deleted while in use"
    );

    // The VM gone, the files go, then the image.
    env.vms()
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_gone("web").await;
    wait_image_gone(&env, "noble").await;
    let deletes = env.sim.requests_to("DELETE", DELETE).await;
    assert_eq!(deletes.len(), 2, "one per node: {deletes:?}");
    assert_gone(&env, "import", &volume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_status_write_after_a_download_does_not_download_again() {
    let mut env = Env::start("imglost").await;
    // The download runs until the test lets it end: the restarted
    // controller finds it running (or ended), whatever the machine's load.
    env.sim
        .fault(json!({"fault": "task-held", "hold": "download", "task_type": "download"}))
        .await;
    env.apply(&image("noble", "https://images.example/noble.qcow2"))
        .await;
    let task = wait_image(&env, "noble", "its download recorded", |i| {
        i.and_then(|i| {
            i.status
                .as_ref()?
                .at_provider
                .locations
                .first()?
                .task
                .clone()
        })
        .ok_or_else(|| "no task recorded".to_owned())
    })
    .await;
    env.kill_controller().await;
    // The status as a write lost after the dispatch leaves it: the intent
    // written down before sending (`sending`, the pass's time, which the
    // task's startedAt is), the UPID not.
    let lost = json!({"status": {"atProvider": {"locations": [{
        "node": "pve", "storage": "local", "phase": "Downloading",
        "sending": task.started_at,
    }]}}});
    images(&env)
        .patch_status("noble", &PatchParams::default(), &Patch::Merge(&lost))
        .await
        .unwrap();

    let before = env.sim.requests().await.len();
    env.start_controller().await;
    support::poll(
        "the new controller to read the download's log",
        DEADLINE,
        || async {
            let requests = env.sim.requests().await;
            requests[before..]
                .iter()
                .any(|r| r["method"] == "GET" && r["route"] == "/nodes/{node}/tasks/{upid}/log")
                .then_some(())
                .ok_or_else(|| format!("{} requests since", requests.len() - before))
        },
    )
    .await;
    env.sim.release("download").await;
    let ready = wait_image_ready(&env, "noble").await;
    let downloads = env.sim.requests_to("POST", DOWNLOAD).await;
    assert_eq!(downloads.len(), 1, "exactly one download: {downloads:?}");
    let at = ready.status.unwrap().at_provider;
    assert_eq!(at.summary.as_deref(), Some("1/1 ready"), "{at:?}");
    assert_eq!(
        at.locations[0].made,
        [at.volume.clone().unwrap()],
        "its own: {at:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_iso_image_named_by_a_disk_is_refused() {
    let env = Env::start("imgiso").await;
    let mut iso = image("seed", "https://images.example/seed.iso");
    iso["spec"]["forProvider"]["content"] = json!("iso");
    env.apply(&iso).await;
    env.apply(&named_disk_vm("web", "seed")).await;
    let c = env.wait_synced_reason("web", "InvalidSpec").await;
    assert!(
        c.message
            .as_deref()
            .unwrap_or_default()
            .contains("content iso"),
        "{c:?}"
    );
    assert_eq!(env.sim.count("POST", "/nodes/{node}/qemu").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_storage_gets_one_download_for_every_node() {
    let mut env = Env::without_controller("imgshared", Options::default()).await;
    env.sim = Sim::start_with(SimConfig {
        time_scale: 0.01,
        state: Some(
            serde_json::from_value(json!({
                "nodes": [{"name": "pve"}, {"name": "pve2"}],
                "storages": [
                    {"id": "local", "type": "dir", "content": ["iso", "vztmpl", "import", "snippets"], "size": "100G"},
                    {"id": "local-lvm", "type": "lvmthin", "content": ["images", "rootdir"], "size": "400G"},
                    {"id": "nfs", "type": "dir", "path": "/mnt/pve/nfs", "content": ["import"],
                     "size": "1T", "shared": true, "nodes": ["pve", "pve2"]},
                ],
            }))
            .expect("a state file"),
        ),
        ..SimConfig::default()
    })
    .await;
    env.apply(&manifests::provider_config(&env.sim, &json!({})))
        .await;
    env.start_controller().await;
    let mut shared = image("noble", "https://images.example/noble.qcow2");
    shared["spec"]["forProvider"]["storage"] = json!("nfs");
    env.apply(&shared).await;
    let ready = wait_image_ready(&env, "noble").await;
    let at = ready.status.unwrap().at_provider;
    assert_eq!(at.locations.len(), 1, "{at:?}");
    assert!(at.locations[0].shared, "{at:?}");
    assert_eq!(at.summary.as_deref(), Some("1/1 ready"));
    assert_eq!(env.sim.count("POST", DOWNLOAD).await, 1);
    // A VM on the other node imports it from there.
    let mut vm = named_disk_vm("web", "noble");
    vm["spec"]["forProvider"]["node"] = json!("pve2");
    env.apply(&vm).await;
    env.wait_ready("web").await;
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    assert_eq!(creates[0]["params"]["node"], "pve2", "{creates:?}");
    assert_eq!(
        creates[0]["params"]["scsi0"],
        format!("local-lvm:0,import-from={}", at.volume.unwrap())
    );
    assert_eq!(
        env.sim.count("POST", DOWNLOAD).await,
        1,
        "still one download"
    );
}

const PULL: &str = "/nodes/{node}/storage/{storage}/oci-registry-pull";

fn oci_image(name: &str, reference: &str) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": name},
        "spec": {
            "forProvider": {"source": {"oci": reference}, "content": "vztmpl", "storage": "local"},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_image_is_pulled_once_per_node_and_its_file_deleted_with_it() {
    let options = Options {
        nodes: vec!["pve".into(), "pve2".into()],
        ..Options::default()
    };
    let env = Env::start_with("imgoci", options).await;
    env.apply(&oci_image("alpine", "docker.io/library/alpine:3.20"))
        .await;
    let ready = wait_image_ready(&env, "alpine").await;
    let at = ready.status.clone().unwrap().at_provider;
    assert_eq!(at.summary.as_deref(), Some("2/2 ready"), "{at:?}");
    let volume = at.volume.clone().expect("the volume");
    assert!(
        volume.starts_with("local:vztmpl/alpine_3.20-") && volume.ends_with(".tar"),
        "{volume}"
    );
    let pulls = env.sim.requests_to("POST", PULL).await;
    let mut nodes: Vec<String> = pulls
        .iter()
        .map(|r| r["path"].as_str().unwrap_or_default().to_owned())
        .collect();
    nodes.sort();
    assert_eq!(pulls.len(), 2, "one pull per node: {pulls:?}");
    assert_ne!(nodes[0], nodes[1], "one per node: {nodes:?}");
    assert_eq!(
        pulls[0]["params"]["reference"],
        "docker.io/library/alpine:3.20"
    );
    assert_eq!(env.sim.count("POST", DOWNLOAD).await, 0);

    images(&env)
        .delete("alpine", &DeleteParams::default())
        .await
        .unwrap();
    wait_image_gone(&env, "alpine").await;
    assert_eq!(env.sim.count("DELETE", DELETE).await, 2, "one per node");
    assert_gone(&env, "vztmpl", &volume).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oci_image_on_pve_8_says_it_needs_9_1_and_pulls_nothing() {
    let mut env = Env::without_controller("imgoci8", Options::default()).await;
    env.sim = Sim::start_with(SimConfig {
        time_scale: 0.01,
        pve_version: 8,
        ..SimConfig::default()
    })
    .await;
    env.apply(&manifests::provider_config(&env.sim, &json!({})))
        .await;
    env.start_controller().await;
    env.apply(&oci_image("alpine", "docker.io/library/alpine:3.20"))
        .await;
    let message = wait_image(&env, "alpine", "OciNeedsPve91", |i| {
        let c = i
            .and_then(|i| i.status.as_ref())
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Synced"));
        match c {
            Some(c) if c.reason == "OciNeedsPve91" => Ok(c.message.clone().unwrap_or_default()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(message.contains("8.4"), "{message}");
    assert_eq!(env.sim.count("POST", PULL).await, 0);
}

/// A ProxmoxContainer naming an OCI ProxmoxImage (`template.image`): the
/// image brings its file to the container's node, the container is created
/// from its volume, holds the image while it exists, and once it is gone
/// the image deletes its files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_from_an_oci_image_holds_it_until_the_container_is_gone() {
    use crate::reconcile::containers::{container, ct_condition, debian};
    // A 30-minute resync: only the wakers explain the container going on
    // once the image is ready, and the image going on once the container
    // is gone.
    let options = Options {
        nodes: vec!["pve".into(), "pve2".into()],
        provider: json!({"resyncInterval": "30m"}),
        ..Options::default()
    };
    let env = Env::start_with("imgct", options).await;
    let ct = |name: &str| {
        let mut fp = debian(json!({"template": {"image": {"name": "alpine"}}}));
        fp["node"] = json!("pve2");
        container(name, fp)
    };
    env.apply(&ct("app")).await;
    env.wait_container("app", "ImageNotFound", |ct| {
        match ct_condition(ct, "Synced").map(|c| c.reason.as_str()) {
            Some("ImageNotFound") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let mut img = oci_image("alpine", "docker.io/library/alpine:3.20");
    img["spec"]["forProvider"]["nodes"] = json!(["pve"]);
    env.apply(&img).await;
    env.wait_container_ready("app").await;
    let created = env.container("app").await;
    let image = images(&env).get("alpine").await.unwrap();
    let at = image.status.clone().unwrap().at_provider;
    let volume = at.volume.clone().expect("the volume");
    let nodes: Vec<&str> = at.locations.iter().map(|l| l.node.as_str()).collect();
    assert_eq!(nodes, ["pve", "pve2"], "the container's node added: {at:?}");
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert_eq!(creates[0]["params"]["ostemplate"], volume.as_str());
    assert_eq!(
        created.status.unwrap().at_provider.node.as_deref(),
        Some("pve2")
    );
    assert_eq!(env.sim.count("POST", PULL).await, 2, "one pull per node");
    wait_one_user(&env, "alpine").await;

    images(&env)
        .delete("alpine", &DeleteParams::default())
        .await
        .unwrap();
    let message = wait_image(&env, "alpine", "ImageInUse", |i| {
        let c = i
            .and_then(|i| i.status.as_ref())
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Synced"));
        match c {
            Some(c) if c.reason == "ImageInUse" => Ok(c.message.clone().unwrap_or_default()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        message.contains("ProxmoxContainer(s) refer to it: app"),
        "{message}"
    );
    assert_eq!(
        env.sim.count("DELETE", DELETE).await,
        0,
        "nothing deleted while in use"
    );

    env.containers()
        .delete("app", &DeleteParams::default())
        .await
        .unwrap();
    wait_image_gone(&env, "alpine").await;
    assert_gone(&env, "vztmpl", &volume).await;
}

/// The image's Synced condition once its reason is `reason`.
async fn wait_image_synced(env: &Env, name: &str, reason: &str) -> (String, String) {
    wait_image(env, name, &format!("Synced {reason}"), |i| {
        let c = i
            .and_then(|i| i.status.as_ref())
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Synced"));
        match c {
            Some(c) if c.reason == reason => {
                Ok((c.reason.clone(), c.message.clone().unwrap_or_default()))
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// `volume` is on `local` of the one node (`pve`).
async fn assert_there(env: &Env, volume: &str) {
    let client = env.sim.client();
    for node in ["pve"] {
        let listed = client
            .storage_content(node, "local", Some("import"))
            .await
            .unwrap();
        assert!(
            listed.iter().any(|c| c.volid == volume),
            "{volume} not on {node}: {listed:?}"
        );
    }
}

/// Issue 31's poisoning case: team-b's image naming team-a's file (another
/// URL and checksum) was Ready on team-a's bytes, and deleting it deleted
/// team-a's file. Now it is `NotOwned`, naming the file and the field, and
/// its deletion leaves the file to team-a.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_images_file_of_the_same_name_is_not_taken_over_or_deleted() {
    let env = Env::start("imgpoison").await;
    let mut a = image("team-a", "https://images.example/team-a/noble.qcow2");
    a["spec"]["forProvider"]["filename"] = json!("noble.qcow2");
    env.apply(&a).await;
    let ready = wait_image_ready(&env, "team-a").await;
    let volume = ready.status.unwrap().at_provider.volume.unwrap();
    assert_eq!(volume, "local:import/noble.qcow2");
    let downloads = env.sim.count("POST", DOWNLOAD).await;
    // Applied at once, most often in the very second team-a's download
    // started: team-b never sent anything, so no task is its own.
    let mut b = image("team-b", "https://images.example/team-b/evil.qcow2");
    b["spec"]["forProvider"]["filename"] = json!("noble.qcow2");
    env.apply(&b).await;
    let (_, message) = wait_image_synced(&env, "team-b", "NotOwned").await;
    assert!(
        message.contains(&volume) && message.contains("spec.forProvider.filename"),
        "names the file and the field: {message}"
    );
    team_b_leaves_team_as_file(&env, &volume, downloads).await;
}

/// team-b (naming team-a's file) is not Ready, has downloaded nothing over
/// it (`downloads` in all), and its deletion deletes nothing: the file is
/// there and team-a Ready on it.
async fn team_b_leaves_team_as_file(env: &Env, volume: &str, downloads: usize) {
    let b_now = images(env).get("team-b").await.unwrap();
    let at = b_now.status.clone().unwrap().at_provider;
    assert!(
        at.locations
            .iter()
            .all(|l| l.made.is_empty() && l.task.is_none()),
        "nothing of team-a's taken: {at:?}"
    );
    assert_eq!(
        condition(&b_now, "Ready").map(|c| c.0),
        Some("False".into()),
        "not Ready on team-a's bytes: {:?}",
        b_now.status
    );
    assert_eq!(
        env.sim.count("POST", DOWNLOAD).await,
        downloads,
        "nothing downloaded over team-a's file"
    );
    images(env)
        .delete("team-b", &DeleteParams::default())
        .await
        .unwrap();
    wait_image_gone(env, "team-b").await;
    assert_eq!(env.sim.count("DELETE", DELETE).await, 0, "nothing deleted");
    assert_there(env, volume).await;
    let a_now = images(env).get("team-a").await.unwrap();
    assert_eq!(condition(&a_now, "Ready").map(|c| c.0), Some("True".into()));
}

/// Issue 31's same-second case: team-b's image of team-a's file name,
/// applied right after team-a's download was sent (while it runs), does not
/// take that download as its own (before, any download of the file by the
/// provider's user started since a little before the image existed was),
/// nor sends a second one racing it to the file; once team-a's is done it
/// is `NotOwned` on the file, and its deletion deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_applied_right_after_anothers_download_of_its_file_does_not_take_it() {
    let env = Env::start("imgsamesec").await;
    env.sim
        .fault(json!({"fault": "task-held", "hold": "download", "task_type": "download"}))
        .await;
    let mut a = image("team-a", "https://images.example/team-a/noble.qcow2");
    a["spec"]["forProvider"]["filename"] = json!("noble.qcow2");
    env.apply(&a).await;
    support::poll("team-a's download to be sent", DEADLINE, || async {
        match env.sim.count("POST", DOWNLOAD).await {
            0 => Err("no download yet".to_owned()),
            _ => Ok(()),
        }
    })
    .await;
    let mut b = image("team-b", "https://images.example/team-b/evil.qcow2");
    b["spec"]["forProvider"]["filename"] = json!("noble.qcow2");
    env.apply(&b).await;
    let volume = "local:import/noble.qcow2";
    let (_, message) = wait_image_synced(&env, "team-b", "NotOwned").await;
    assert!(
        message.contains(volume) && message.contains("spec.forProvider.filename"),
        "names the file and the field: {message}"
    );
    assert_eq!(
        env.sim.count("POST", DOWNLOAD).await,
        1,
        "no second download racing team-a's"
    );

    env.sim.release("download").await;
    wait_image_ready(&env, "team-a").await;
    let (_, message) = wait_image(&env, "team-b", "NotOwned on the file", |i| {
        let c = i
            .and_then(|i| i.status.as_ref())
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Synced"));
        match c {
            Some(c)
                if c.reason == "NotOwned"
                    && c.message
                        .as_deref()
                        .is_some_and(|m| m.contains("already exists")) =>
            {
                Ok((c.reason.clone(), c.message.clone().unwrap_or_default()))
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(message.contains(volume), "{message}");
    team_b_leaves_team_as_file(&env, volume, 1).await;
}

/// An image whose file name is a seeded import volume other VMs use: a
/// condition, never Ready on it, and deleting the image leaves the volume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_named_after_a_seeded_volume_is_a_condition_and_leaves_it() {
    let env = Env::start("imgseeded").await;
    let seeded = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2";
    let mut img = image("squat", "https://images.example/other.qcow2");
    img["spec"]["forProvider"]["filename"] = json!("ubuntu-24.04-server-cloudimg-amd64.qcow2");
    env.apply(&img).await;
    let (_, message) = wait_image_synced(&env, "squat", "NotOwned").await;
    assert!(
        message.contains(seeded) && message.contains("spec.forProvider.filename"),
        "{message}"
    );
    assert_eq!(env.sim.count("POST", DOWNLOAD).await, 0);
    images(&env)
        .delete("squat", &DeleteParams::default())
        .await
        .unwrap();
    wait_image_gone(&env, "squat").await;
    assert_eq!(env.sim.count("DELETE", DELETE).await, 0, "nothing deleted");
    assert_there(&env, seeded).await;
}
