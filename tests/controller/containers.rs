//! ProxmoxContainers end to end: from a template volume and from an OCI
//! image to Ready, drift corrected, no second container after a lost
//! status write, and a deletion that purges.

use std::collections::BTreeMap;

use pve_client::lxc::ContainerUpdate;
use serde_json::json;

use crate::reconcile::containers::{DEBIAN, container, debian};
use crate::reconcile::{Controller, DEADLINE, Env, Options};
use crate::support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_from_a_template_volume_becomes_ready_drift_is_corrected_and_delete_purges() {
    let env = Env::start("ct").await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "app-root"},
        "stringData": {"password": "s3cret-pass"},
    }))
    .await;
    let mut app = container(
        "app",
        debian(json!({
            "hostname": "app",
            "mountPoints": [{"slot": "mp0", "storage": "local-lvm", "size": "2Gi", "path": "/data"}],
            "features": {"nesting": true},
            "startOnBoot": true,
            "passwordSecretRef": {"name": "app-root", "key": "password"},
            "networks": [
                {"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "10.30.0.5/24", "gateway": "10.30.0.1"},
                {"slot": "net1", "name": "eth1", "bridge": "vmbr0", "ip": "dhcp"},
            ],
        })),
    );
    app["spec"]["writeConnectionSecretToRef"] = json!({"name": "app-conn"});
    env.apply(&app).await;
    let vmid = env.wait_container_ready("app").await;
    let ct = env.container("app").await;
    // The connection Secret, owned by the resource, with its static
    // address; deleted by hand, it is written again.
    let conn = env.secret("app-conn").await.expect("the connection Secret");
    let data = conn.data.clone().unwrap();
    let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
    assert_eq!(
        (
            text("vmid"),
            text("node"),
            text("hostname"),
            text("ipAddresses")
        ),
        (
            vmid.to_string(),
            "pve".into(),
            "app".into(),
            "10.30.0.5".into()
        )
    );
    let owner = &conn.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(owner.uid.clone())),
        ("ProxmoxContainer", ct.metadata.uid.clone())
    );
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(support::client(), env.ns.name());
    secrets
        .delete("app-conn", &Default::default())
        .await
        .unwrap();
    support::poll("the connection Secret written again", DEADLINE, || async {
        match env.secret("app-conn").await {
            Some(s) if s.metadata.uid != conn.metadata.uid => Ok(()),
            other => Err(format!("{:?}", other.map(|s| s.metadata.uid))),
        }
    })
    .await;
    let status = ct.status.clone().unwrap();
    assert_eq!(status.at_provider.vmid, Some(vmid));
    assert_eq!(status.at_provider.node.as_deref(), Some("pve"));
    assert!(status.at_provider.task.is_none(), "no task left in flight");

    // On the sim: one create from the template, with the owner marker.
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert_eq!(creates[0]["params"]["ostemplate"], DEBIAN);
    assert_eq!(creates[0]["params"]["unprivileged"], "1");
    // The password went with the create (the sim's log redacts it), and
    // nowhere else.
    assert_eq!(creates[0]["params"]["password"], "**redacted**");
    let written = serde_json::to_string(&ct).unwrap();
    assert!(!written.contains("s3cret-pass"), "{written}");
    let client = env.sim.client();
    let config = client.container_config("pve", vmid).await.unwrap();
    let uid = ct.metadata.uid.clone().unwrap();
    assert!(
        config
            .get("description")
            .unwrap_or_default()
            .contains(&format!("uid={uid}")),
        "{config:?}"
    );
    assert!(
        config.get("mp0").unwrap().contains("mp=/data"),
        "{config:?}"
    );
    assert!(config.get("mp0").unwrap().contains("size=2G"), "{config:?}");
    assert_eq!(config.get("features"), Some("nesting=1"));
    assert_eq!(config.get("onboot"), Some("1"));
    assert!(
        client
            .container_status("pve", vmid)
            .await
            .unwrap()
            .is_running()
    );
    // Core v1 events for the tasks started and finished (the start's end
    // may be told by the pass after the one that wrote Ready).
    for (reason, task) in [
        ("TaskStarted", ":vzcreate:"),
        ("TaskSucceeded", ":vzstart:"),
    ] {
        crate::reconcile::wait_event_in(env.ns.name(), "app", |e| {
            e.1 == reason && e.2.contains(task)
        })
        .await;
    }

    // The printer columns show it.
    let table = support::kubectl_ok(&["get", "proxmoxcontainer", "app", "-n", env.ns.name()]).await;
    let row = table.lines().nth(1).unwrap();
    for want in [&vmid.to_string(), "pve", "running", "True"] {
        assert!(row.contains(want), "{want:?} not in {row:?}\n{table}");
    }

    // Drift behind the provider's back is corrected; the MAC stays.
    let mac_before = config.get("net0").unwrap().to_owned();
    client
        .update_container_config(
            "pve",
            vmid,
            &ContainerUpdate {
                set: BTreeMap::from([
                    ("memory".to_owned(), "2048".to_owned()),
                    ("cores".to_owned(), "4".to_owned()),
                ]),
                ..ContainerUpdate::default()
            },
        )
        .await
        .unwrap();
    support::poll("the drift corrected", DEADLINE, || async {
        let c = client.container_config("pve", vmid).await.unwrap();
        match (c.get("memory"), c.get("cores")) {
            (Some("512"), Some("1")) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let config = client.container_config("pve", vmid).await.unwrap();
    assert_eq!(config.get("net0"), Some(mac_before.as_str()));

    // A spec change is applied, and powerState: Stopped shuts it down.
    env.patch_container(
        "app",
        json!({"spec": {"forProvider": {"cpu": {"cores": 2}, "powerState": "Stopped"}}}),
    )
    .await;
    support::poll("cores 2, stopped", DEADLINE, || async {
        let c = client.container_config("pve", vmid).await.unwrap();
        let running = client
            .container_status("pve", vmid)
            .await
            .unwrap()
            .is_running();
        match (c.get("cores"), running) {
            (Some("2"), false) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // Deleting the resource destroys the container with purge.
    env.containers()
        .delete("app", &Default::default())
        .await
        .unwrap();
    env.wait_container_gone("app").await;
    let destroys = env
        .sim
        .requests_to("DELETE", "/nodes/{node}/lxc/{vmid}")
        .await;
    assert_eq!(destroys.len(), 1, "{destroys:?}");
    assert_eq!(destroys[0]["params"]["purge"], "1");
    assert_eq!(destroys[0]["params"]["destroy-unreferenced-disks"], "1");
    let gone = client.container_config("pve", vmid).await;
    assert!(gone.is_err(), "the container is gone: {gone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_from_one_oci_image_pull_it_once_and_become_ready() {
    let env = Env::start("ctoci").await;
    let oci = json!({"template": {"oci": {"reference": "docker.io/library/alpine:3.20", "storage": "local"}}});
    env.apply(&container("first", debian(oci.clone()))).await;
    env.wait_container_ready("first").await;
    env.apply(&container("second", debian(oci))).await;
    env.wait_container_ready("second").await;

    let pulls = env
        .sim
        .requests_to("POST", "/nodes/{node}/storage/{storage}/oci-registry-pull")
        .await;
    assert_eq!(pulls.len(), 1, "one pull for both: {pulls:?}");
    assert_eq!(
        pulls[0]["params"]["reference"],
        "docker.io/library/alpine:3.20"
    );
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert_eq!(creates.len(), 2, "{creates:?}");
    // The reference's last part and a hash of the whole reference.
    let volume = pulls[0]["params"]["filename"]
        .as_str()
        .map(|f| format!("local:vztmpl/{}.tar", f.replace(':', "_")))
        .unwrap_or_default();
    assert!(
        volume.starts_with("local:vztmpl/alpine_3.20-")
            && volume.len() == "local:vztmpl/alpine_3.20-".len() + 16,
        "{volume}"
    );
    for create in &creates {
        assert_eq!(create["params"]["ostemplate"], volume.as_str());
    }
    let ct = env.container("first").await;
    assert_eq!(
        ct.status.unwrap().at_provider.template_volume.as_deref(),
        Some(volume.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_status_write_does_not_create_a_second_container() {
    // 0.2: the create takes about 20 s, so the second controller finds it
    // running (locked, in the node's task list, in no status).
    let options = Options {
        time_scale: 0.2,
        ..Options::default()
    };
    let mut env = Env::without_controller("ctlost", options).await;
    // A controller that may do everything but write the status of
    // containers: the UPID of the create is never recorded.
    env.apply(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "no-status"},
        "rules": [
            {"apiGroups": ["proxmox.m.crossplane.io"], "resources": ["proxmoxvms", "proxmoxcontainers"],
             "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": ["proxmox.m.crossplane.io"], "resources": ["providerconfigs"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["secrets", "configmaps"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        ],
    }))
    .await;
    let account = support::service_account_kubeconfig(
        env.ns.name(),
        "no-status",
        support::Grant::Role("no-status"),
    )
    .await;
    let restricted = Controller::start(account.client(), env.settings()).await;
    // No vmid in the spec: the VMID is allocated and must be recorded
    // before the create, or the next pass would allocate another.
    env.apply(&container("app", debian(json!({})))).await;
    support::poll("the create to be sent", DEADLINE, || async {
        match env.sim.count("POST", "/nodes/{node}/lxc").await {
            0 => Err("no create yet".to_owned()),
            _ => Ok(()),
        }
    })
    .await;
    let ct = env.container("app").await;
    assert!(
        ct.status.is_none(),
        "no status was written: {:?}",
        ct.status
    );
    restricted.kill().await;

    env.start_controller().await;
    let vmid = env.wait_container_ready("app").await;
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert_eq!(creates.len(), 1, "exactly one create: {creates:?}");
    assert_eq!(creates[0]["params"]["vmid"], vmid.to_string());
    let containers: Vec<u32> = env
        .sim
        .client()
        .cluster_resources(None)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.kind == "lxc")
        .filter_map(|r| r.vmid.map(|v| v as u32))
        .collect();
    assert_eq!(containers, [vmid], "one container on Proxmox");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_are_accepted_and_mistakes_refused_with_what_is_wrong() {
    let env = Env::without_controller("ctschema", Options::default()).await;
    let ns = env.ns.name();
    for example in ["examples/ct-debian.yaml", "examples/ct-oci.yaml"] {
        support::apply_dry_run_server(support::repo_root().join(example).as_path(), Some(ns)).await;
    }
    let base = debian(json!({}));
    let with = |change: serde_json::Value| {
        let mut fp = base.clone();
        for (k, v) in change.as_object().unwrap() {
            fp[k] = v.clone();
        }
        serde_json::to_string(&container("bad", fp)).unwrap()
    };
    let cases = [
        (
            with(json!({"template": {}})),
            "template needs exactly one of volume, oci and image",
        ),
        (
            with(json!({"template": {"volume": DEBIAN,
                "oci": {"reference": "docker.io/library/alpine:3.20"}}})),
            "template needs exactly one of volume, oci and image",
        ),
        (
            with(json!({"template": {"oci": {"reference": "docker.io/library/alpine"}}})),
            "reference must name an image with a tag",
        ),
        (
            with(json!({"template": {"volume": "local:iso/debian.iso"}})),
            "volume must be a container template volume",
        ),
        (
            with(
                json!({"mountPoints": [{"slot": "mp256", "storage": "local-lvm", "size": "1Gi", "path": "/a"}]}),
            ),
            "slot must be mp0 ... mp255",
        ),
        (
            with(json!({"networks": [{"slot": "eth0", "name": "eth0", "bridge": "vmbr0"}]})),
            "slot must be net0 ... net31",
        ),
        (
            with(json!({"networks": [
                {"slot": "net0", "name": "eth0", "bridge": "vmbr0"},
                {"slot": "net0", "name": "eth1", "bridge": "vmbr0"}]})),
            "each network slot may appear only once",
        ),
        (
            with(
                json!({"networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr0",
                "ip": "dhcp", "gateway": "10.0.0.1"}]}),
            ),
            "gateway needs a static ip",
        ),
        (
            with(json!({"memory": "8Mi"})),
            "memory must be at least 16Mi",
        ),
        (
            with(json!({"rootfs": {"storage": "local-lvm", "size": "100Mi"}})),
            "rootfs.size must be at least 1Gi",
        ),
        (
            with(
                json!({"description": "Managed by crossplane-provider-proxmox: ProxmoxContainer x/y uid=z"}),
            ),
            "description cannot contain the provider's owner marker",
        ),
    ];
    for (manifest, expected) in cases {
        let message = support::apply_expect_rejected(manifest.as_str(), Some(ns)).await;
        assert!(
            message.contains(expected),
            "expected the server to say {expected:?}, it said:\n{message}"
        );
    }
}

/// At rest, between its full looks, a container costs no request of its
/// own: the shared cluster view shows whether it is as its last full look
/// found it. Its memory changed by hand shows there, and is corrected at
/// once, with no full look due for a day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_rest_a_container_is_read_only_through_the_shared_view_which_shows_drift_at_once() {
    let options = Options {
        provider: json!({"fullLookInterval": "24h"}),
        ..Options::default()
    };
    let env = Env::start_with("ct-coarse", options).await;
    env.apply(&container("app", debian(json!({"hostname": "app"}))))
        .await;
    let vmid = env.wait_container_ready("app").await;
    env.wait_coarse_looks(&[
        "/nodes/{node}/lxc/{vmid}/config",
        "/nodes/{node}/lxc/{vmid}/status/current",
    ])
    .await;
    let client = env.sim.client();
    client
        .update_container_config(
            "pve",
            vmid,
            &ContainerUpdate {
                set: BTreeMap::from([("memory".to_owned(), "2048".to_owned())]),
                ..ContainerUpdate::default()
            },
        )
        .await
        .unwrap();
    support::poll("the memory put back", DEADLINE, || async {
        let c = client.container_config("pve", vmid).await.unwrap();
        (c.get("memory") == Some("512"))
            .then_some(())
            .ok_or_else(|| format!("memory {:?}", c.get("memory")))
    })
    .await;
}
