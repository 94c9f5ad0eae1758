//! Many VMs at once, none naming its VMID: Proxmox's next free ID is not a
//! reservation, so concurrent passes are handed the same VMID. Every
//! resource must still end with a VM of its own, and no VM may be created
//! twice or left behind.

use std::collections::BTreeSet;

use futures::future::join_all;
use kube::ResourceExt;
use serde_json::json;

use crate::reconcile::{Env, manifests};

const VMS: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_without_a_vmid_get_one_vm_each() {
    let env = Env::start("concurrent").await;
    let names: Vec<String> = (0..VMS).map(|i| format!("web-{i}")).collect();
    for name in &names {
        let mut spec = manifests::imported(json!({}));
        spec.as_object_mut().unwrap().remove("node");
        spec["allowedNodes"] = json!(["pve"]);
        env.apply(&manifests::vm(name, spec)).await;
    }
    join_all(names.iter().map(|name| env.wait_ready(name))).await;

    let mut vmids = BTreeSet::new();
    for name in &names {
        let vm = env.vm(name).await;
        let vmid = env.vmid(name).await;
        assert!(vmids.insert(vmid), "VMID {vmid} given to two resources");
        // The VM behind the VMID is this resource's own: its owner marker
        // holds this resource's UID.
        let config = env.sim.config(vmid).await;
        let description = config.description.clone().unwrap_or_default();
        assert!(
            description.contains(&vm.uid().unwrap()),
            "VM {vmid} of {name} carries its owner marker: {description:?}"
        );
    }

    let mut expected: Vec<u32> = vmids.iter().copied().collect();
    expected.push(9000);
    expected.sort_unstable();
    assert_eq!(
        env.sim.vmids().await,
        expected,
        "one VM per resource, nothing left behind"
    );
    // Creates refused because the VMID was taken meanwhile are fine; a
    // create task started twice for one resource is not.
    let started: Vec<_> = env
        .sim
        .requests_to("POST", "/nodes/{node}/qemu")
        .await
        .into_iter()
        .filter(|r| r["status"] == 200)
        .collect();
    assert_eq!(
        started.len(),
        VMS,
        "exactly one create task per resource: {started:#?}"
    );
}
