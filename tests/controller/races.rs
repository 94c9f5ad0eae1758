//! Races of issue 9 on the real API server: VMIDs handed out together,
//! taken by hand, placement restricted to other nodes, clones racing
//! imports, a Proxmox that fails while it is observed. Each checks the end
//! state on the simulator itself: every VM on a node its spec allows, one
//! VM per resource, nothing of anyone else's touched.

use std::collections::BTreeSet;

use futures::future::join_all;
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::reconcile;
use crate::reconcile::{Env, Options, condition, manifests};
use crate::support;

fn three_nodes() -> Options {
    Options {
        nodes: vec!["pve".into(), "pve2".into(), "pve3".into()],
        ..Options::default()
    }
}

/// An imported VM without `node` or `vmid`, with `extra` merged in.
fn floating(extra: Value) -> Value {
    let mut spec = manifests::imported(extra);
    spec.as_object_mut().unwrap().remove("node");
    spec
}

/// Every named resource is Ready on an allowed node with a VM of its own,
/// and the VMs on the simulator are exactly these plus `others`.
async fn one_vm_each_on_allowed_nodes(env: &Env, allowed: &[(&str, &[&str])], others: &[u32]) {
    join_all(allowed.iter().map(|(name, _)| env.wait_ready(name))).await;
    let placement = env.sim.placement().await;
    let mut ours = BTreeSet::new();
    for (name, nodes) in allowed {
        let vm = env.vm(name).await;
        let vmid = env.vmid(name).await;
        assert!(ours.insert(vmid), "VMID {vmid} given to two resources");
        let node = &placement[&vmid];
        assert!(
            nodes.contains(&node.as_str()),
            "{name}: VM {vmid} is on {node}, allowed {nodes:?}"
        );
        let description = env.sim.config(vmid).await.description.unwrap_or_default();
        assert!(
            description.contains(&vm.uid().unwrap()),
            "{name}: VM {vmid} carries its owner marker"
        );
    }
    let mut expected: BTreeSet<u32> = ours;
    expected.extend(others);
    expected.insert(9000);
    assert_eq!(
        placement.keys().copied().collect::<BTreeSet<_>>(),
        expected,
        "one VM per resource, nothing else made or destroyed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_vms_without_vmid_at_once_one_restricted_to_another_node() {
    let env = Env::start_with("race-restricted", three_nodes()).await;
    env.apply(&manifests::vm("free", floating(json!({})))).await;
    env.apply(&manifests::vm(
        "pinned",
        floating(json!({"allowedNodes": ["pve2"]})),
    ))
    .await;
    one_vm_each_on_allowed_nodes(
        &env,
        &[("free", &["pve", "pve2", "pve3"]), ("pinned", &["pve2"])],
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vmid_taken_by_hand_before_the_create_is_given_up_not_borrowed() {
    // The image download comes between recording the VMID and the create;
    // it is held while a person creates a VM with that VMID on another
    // node (unheld, the create could come first).
    let env = Env::start_with("race-taken", three_nodes()).await;
    env.sim
        .fault(json!({"fault": "task-held", "hold": "download", "task_type": "download"}))
        .await;
    // The sim's content of an unregistered URL hashes to the URL's SHA-256.
    let url = "https://images.example/race-server-cloudimg-amd64.img";
    let checksum = support::sha256_hex(url);
    let spec = json!({
        "node": "pve3",
        "memory": "1Gi",
        "disks": [{
            "slot": "scsi0", "storage": "local-lvm",
            "image": {"url": url, "checksum": checksum, "checksumAlgorithm": "sha256"},
        }],
    });
    env.apply(&manifests::vm("web", spec)).await;
    let taken: u32 = env
        .wait_vm("web", "a recorded VMID", |vm| {
            vm.external_name()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| "no VMID yet".into())
        })
        .await;
    env.sim.create_by_hand("pve", taken).await;
    env.sim.release("download").await;
    one_vm_each_on_allowed_nodes(&env, &[("web", &["pve3"])], &[taken]).await;
    let vmid = env.vmid("web").await;
    assert_ne!(vmid, taken, "another VMID was allocated");
    assert_eq!(
        env.sim.writes_to_vm(taken).await,
        Vec::<Value>::new(),
        "the hand-made VM was never touched"
    );
    env.wait_event("web", |(t, reason, _, _)| {
        t == "Warning" && reason == "VmidTaken"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_without_vmid_or_node_race_imports_and_each_gets_one_vm() {
    let env = Env::start_with("race-clones", three_nodes()).await;
    let mut names = vec![];
    for i in 0..4 {
        let name = format!("clone-{i}");
        let spec = json!({
            "memory": "1Gi",
            "clone": {"templateVmid": 9000, "full": i % 2 == 0},
        });
        env.apply(&manifests::vm(&name, spec)).await;
        names.push(name);
    }
    for i in 0..4 {
        let name = format!("import-{i}");
        env.apply(&manifests::vm(&name, floating(json!({})))).await;
        names.push(name);
    }
    let any: &[&str] = &["pve", "pve2", "pve3"];
    let allowed: Vec<(&str, &[&str])> = names
        .iter()
        .map(|n| {
            // Clones of a template on local storage stay on its node.
            let nodes: &[&str] = if n.starts_with("clone") {
                &["pve"]
            } else {
                any
            };
            (n.as_str(), nodes)
        })
        .collect();
    one_vm_each_on_allowed_nodes(&env, &allowed, &[]).await;
    let clones = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu/{vmid}/clone")
        .await;
    assert!(
        clones
            .iter()
            .all(|r| !r["params"].to_string().contains("target")),
        "no clone was sent to another node: {clones:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_while_observing_is_reported_as_such_and_retried() {
    let env = Env::start("race-500").await;
    let vmid = env
        .create_ready("web", manifests::imported(json!({})))
        .await;
    let _ = vmid;
    // Every read of the VM's pending config fails until the test has seen
    // the error reported (a rule without a count holds it there; with a
    // count, the retries could use it up before the test looks).
    let failing = env
        .sim
        .fault(json!({
            "method": "GET",
            "path": "/nodes/{node}/qemu/{vmid}/pending",
            "fault": "http-error",
            "status": 500,
        }))
        .await;
    // Make the controller look now.
    env.patch_vm("web", json!({"metadata": {"labels": {"poke": "1"}}}))
        .await;
    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"tags": ["test", "poked"]}}}),
    )
    .await;
    let synced = env.wait_synced_reason("web", "ReconcileError").await;
    let message = synced.message.clone().unwrap_or_default();
    assert!(
        message.starts_with(&format!("cannot observe VM {vmid} on Proxmox")),
        "{message}"
    );
    assert!(!message.contains("provider config"), "{message}");
    // Proxmox answers again: it recovers on its own and carries out the
    // change.
    env.sim.remove_fault(failing).await;
    env.wait_vm("web", "the poked tag applied", |vm| {
        let synced = condition(vm, "Synced").ok_or("no Synced")?;
        (reconcile::is_true(synced) && synced.reason == "ReconcileSuccess")
            .then_some(())
            .ok_or_else(|| "not yet".to_owned())
    })
    .await;
    let config = env.sim.config(vmid).await;
    let tags = config.raw.get("tags").cloned().unwrap_or_default();
    assert!(tags.contains("poked"), "{tags}");
}
