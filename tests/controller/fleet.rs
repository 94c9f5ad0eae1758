//! Fleets: a ProxmoxImage with `template` gets a template ProxmoxVM per
//! node where its file is Ready, and VMs with `clone.image` are clones of
//! the template on their node.
//!
//! The real image controller runs: the image's downloads are held in the
//! simulator (a `task-held` fault) while the test looks at the clones
//! waiting for it, so the wait cannot pass unseen however fast or slow the
//! machine is.

use kube::Api;
use kube::api::DeleteParams;
use provider_proxmox::api::ProxmoxImage;
use serde_json::{Value, json};

use crate::reconcile::{self, DEADLINE, Env, condition, is_true, manifests};
use crate::support;

/// The simulator's hold on the image's downloads.
const HOLD: &str = "noble-download";
const URL: &str = "https://images.example/noble-server-cloudimg-amd64.qcow2";

fn images(env: &Env) -> Api<ProxmoxImage> {
    Api::namespaced(support::client(), env.ns.name())
}

/// Image `noble`: downloaded to `local` of each node, a linked-clone
/// template on local-lvm of each.
fn noble() -> Value {
    // The simulator's content of an unregistered URL has the URL text's digest.
    let checksum = support::sha256_hex(URL);
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": "noble"},
        "spec": {
            "forProvider": {
                "source": {"url": URL, "checksum": checksum, "checksumAlgorithm": "sha256"},
                "content": "import",
                "storage": "local",
                "nodes": ["pve1", "pve2"],
                "template": {"storage": "local-lvm", "linked": true},
            },
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

/// A VM cloning `noble`'s template (`full` as given), placed by the
/// provider.
fn clone_of_noble(name: &str, full: bool) -> Value {
    manifests::vm(
        name,
        json!({"clone": {"image": "noble", "full": full}, "memory": "1Gi"}),
    )
}

/// The image's templates status: node → (name, vmid, ready, linkable).
async fn templates(env: &Env) -> Vec<(String, String, Option<u32>, bool, bool)> {
    let image = images(env).get("noble").await.unwrap();
    let at = image.status.unwrap_or_default().at_provider;
    at.templates
        .into_iter()
        .map(|t| (t.node, t.name, t.vmid, t.ready, t.linkable))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_template_per_node_and_vms_cloned_from_it_linked_or_full() {
    // A resync of half an hour: only a trigger explains a waiting clone
    // going on.
    let options = reconcile::Options {
        nodes: vec!["pve1".into(), "pve2".into()],
        provider: json!({"resyncInterval": "30m"}),
        ..reconcile::Options::default()
    };
    let env = Env::start_with("fleet", options).await;
    // A clone of an image that does not exist waits for it.
    env.apply(&manifests::vm(
        "stray",
        json!({"clone": {"image": "missing", "full": false}, "memory": "1Gi"}),
    ))
    .await;
    // The image's downloads run, but do nothing until the test releases them.
    env.sim
        .fault(json!({"fault": "task-held", "task_type": "download", "hold": HOLD}))
        .await;
    env.apply(&noble()).await;
    // The clones come while the image downloads: they wait for the templates.
    for name in ["web-1", "web-2", "web-3"] {
        env.apply(&clone_of_noble(name, false)).await;
    }
    env.apply(&clone_of_noble("db", true)).await;
    let waiting = env.wait_synced_reason("web-1", "ImageNotReady").await;
    assert!(
        waiting.message.unwrap_or_default().contains("/noble"),
        "names the image"
    );
    env.wait_synced_reason("stray", "ImageNotFound").await;
    assert!(
        env.sim.vmids().await.iter().all(|v| *v == 9000),
        "nothing is created while the image downloads"
    );

    env.sim.release(HOLD).await;
    let ready = support::poll("both templates ready", DEADLINE, || async {
        let t = templates(&env).await;
        (t.len() == 2 && t.iter().all(|t| t.3))
            .then_some(t.clone())
            .ok_or_else(|| format!("{t:?}"))
    })
    .await;
    let mut template_of = std::collections::BTreeMap::new();
    for (node, name, vmid, _, linkable) in &ready {
        assert_eq!(name, &format!("noble-tpl-{node}"));
        assert!(linkable, "local-lvm is thin: {ready:?}");
        let child = env.vm(name).await;
        assert_eq!(
            child.metadata.labels.as_ref().unwrap()["proxmox.crossplane.io/image"],
            "noble"
        );
        let owner = &child.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("ProxmoxImage", Some(true), Some(true))
        );
        assert_eq!(child.spec.for_provider.node.as_deref(), Some(node.as_str()));
        template_of.insert(node.clone(), vmid.expect("a VMID"));
    }
    let image = images(&env).get("noble").await.unwrap();
    assert_eq!(
        image
            .status
            .unwrap()
            .at_provider
            .template_summary
            .as_deref(),
        Some("2/2 ready")
    );

    for name in ["web-1", "web-2", "web-3", "db"] {
        env.wait_ready(name).await;
    }
    let logs = reconcile::logs::text();
    let ns = env.ns.name();
    assert!(
        logs.lines().any(
            |l| l.contains("the image's templates changed; waking its clone")
                && l.contains(&format!("clone={ns}/web-1"))
        ),
        "woken by the image's status"
    );
    let applied = logs
        .lines()
        .filter(|l| {
            l.contains("creating the image's template") && l.contains(&format!("image={ns}/noble"))
        })
        .count();
    assert_eq!(applied, 2, "each template written once, not at every pass");
    // One import per node (the templates), none for the clones.
    let creates = env.sim.requests_to("POST", "/nodes/{node}/qemu").await;
    assert_eq!(creates.len(), 2, "{creates:?}");
    let clones = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/clone")
        .await;
    assert_eq!(clones.len(), 4, "one clone each: {clones:?}");
    let state = env.sim.state().await;
    let volumes = state["volumes"].as_array().cloned().unwrap_or_default();
    for (name, full) in [
        ("web-1", false),
        ("web-2", false),
        ("web-3", false),
        ("db", true),
    ] {
        let vm = env.vm(name).await;
        let vmid = env.vmid(name).await;
        let node = vm.status.unwrap().at_provider.node.unwrap();
        let template = template_of[&node];
        let sent = clones
            .iter()
            .find(|c| c["params"]["newid"].as_str() == Some(vmid.to_string().as_str()))
            .unwrap_or_else(|| panic!("{name} cloned: {clones:?}"));
        assert_eq!(
            sent["params"]["vmid"],
            template.to_string(),
            "{name}: its node's template"
        );
        assert_eq!(
            sent["params"]["full"],
            if full { "1" } else { "0" },
            "{name}"
        );
        assert!(
            sent["params"].get("target").is_none(),
            "{name}: on the template's node"
        );
        let disk = volumes
            .iter()
            .find(|v| {
                v["vmid"] == vmid && v["volid"].as_str().unwrap_or_default().contains("-disk-")
            })
            .unwrap_or_else(|| panic!("{name}'s disk: {volumes:?}"));
        let base = format!("base-{template}-disk-0");
        if full {
            assert!(disk.get("base").is_none(), "{name}: a full copy: {disk}");
        } else {
            assert_eq!(
                disk["base"], base,
                "{name}: a linked clone of its template: {disk}"
            );
        }
    }

    // The image deleted: held by the image controller's in-use guard, and
    // its templates wait for the ProxmoxVMs naming it.
    images(&env)
        .delete("noble", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["web-1", "web-2", "web-3"] {
        env.vms()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    for name in ["web-1", "web-2", "web-3"] {
        env.wait_gone(name).await;
    }
    // Each deletion woke the image's fleet pass; db still names the image.
    for (node, name, ..) in &ready {
        let child = env.vm(name).await;
        assert!(
            child.metadata.deletion_timestamp.is_none(),
            "{node}'s template stays while db clones the image"
        );
        assert!(condition(&child, "Ready").is_some_and(is_true));
    }
    assert!(
        images(&env).get_opt("noble").await.unwrap().is_some(),
        "the image stays while db clones it"
    );
    env.vms()
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    for (_, name, ..) in &ready {
        env.wait_gone(name).await;
    }
    let left = env.sim.vmids().await;
    for vmid in template_of.values() {
        assert!(!left.contains(vmid), "template {vmid} destroyed: {left:?}");
    }
    // Nothing uses the image any more: its files go, then the image.
    support::poll("image noble gone", DEADLINE, || async {
        match images(&env).get_opt("noble").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}
