//! High availability on the real control plane: the VM is registered with
//! HA and kept on its nodes (a node-affinity rule on PVE 9, a group on PVE
//! 8), a move by HA's load balancer is followed quietly, and deleting the
//! resource removes it from HA.

use crate::reconcile::{DEADLINE, Env, Options, Sim, condition, is_true, manifests};
use crate::support;
use pve_client::ha_nodes;
use pve_sim::SimConfig;
use serde_json::json;

/// An environment whose pve-sim has nodes `pve` and `pve2` and runs PVE
/// `version`.
async fn env_on(prefix: &str, version: u8) -> Env {
    let mut env = Env::without_controller(prefix, Options::default()).await;
    env.sim = Sim::start_with(SimConfig {
        time_scale: 0.01,
        nodes: vec!["pve".into(), "pve2".into()],
        pve_version: version,
        ..SimConfig::default()
    })
    .await;
    env.apply(&manifests::provider_config(&env.sim, &json!({})))
        .await;
    env.start_controller().await;
    env
}

fn ha_spec() -> serde_json::Value {
    manifests::imported(json!({
        "allowedNodes": ["pve", "pve2"],
        "ha": {"state": "started", "nodeAffinity": {"strict": true}},
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pve9_registers_a_rule_follows_the_balancer_and_unregisters_on_delete() {
    let env = env_on("ha9", 9).await;
    let vmid = env.create_ready("web", ha_spec()).await;
    let sid = format!("vm:{vmid}");
    let client = env.sim.client();
    support::poll("the VM in HA with its rule", DEADLINE, || async {
        let resources = client.ha_resources().await.unwrap();
        let rules = client.ha_rules().await.unwrap();
        let registered = resources
            .iter()
            .any(|r| r.sid == sid && r.state.as_deref() == Some("started"));
        let rule = rules
            .iter()
            .find(|r| r.rule == format!("crossplane-vm-{vmid}"));
        match rule {
            Some(r)
                if registered
                    && r.kind == "node-affinity"
                    && r.strict
                    && r.resources.as_deref() == Some(sid.as_str())
                    && ha_nodes(r.nodes.as_deref().unwrap_or_default()) == ["pve", "pve2"] =>
            {
                Ok(())
            }
            _ => Err(format!("resources {resources:?}, rules {rules:?}")),
        }
    })
    .await;
    env.wait_ready("web").await;
    let posts = |route: &'static str| {
        let sim = &env.sim;
        async move { sim.count("POST", route).await }
    };
    assert_eq!(posts("/cluster/ha/resources").await, 1, "registered once");
    assert_eq!(posts("/cluster/ha/rules").await, 1, "one rule");

    // The load balancer moves it to another allowed node: followed, quiet.
    env.sim.balance(vmid, "pve2").await;
    let vm = env
        .wait_vm("web", "followed to pve2", |vm| {
            let at = &vm.status.as_ref().ok_or("no status")?.at_provider;
            let synced = condition(vm, "Synced").ok_or("no Synced")?;
            (at.node.as_deref() == Some("pve2") && synced.reason == "ReconcileSuccess")
                .then(|| vm.clone())
                .ok_or_else(|| format!("node {:?}, Synced {}", at.node, synced.reason))
        })
        .await;
    assert!(condition(&vm, "Ready").is_some_and(is_true));
    assert_eq!(
        env.sim
            .count("POST", "/nodes/{node}/qemu/{vmid}/migrate")
            .await,
        0,
        "not moved back"
    );
    let warnings: Vec<_> = env
        .events("web")
        .await
        .into_iter()
        .filter(|(kind, ..)| kind == "Warning")
        .collect();
    assert!(warnings.is_empty(), "no warnings: {warnings:?}");

    env.vms().delete("web", &Default::default()).await.unwrap();
    env.wait_gone("web").await;
    assert!(!env.sim.vmids().await.contains(&vmid));
    assert!(client.ha_resources().await.unwrap().is_empty());
    assert!(client.ha_rules().await.unwrap().is_empty());
    let removals = env
        .sim
        .requests_to("DELETE", "/cluster/ha/resources/{sid}")
        .await;
    assert_eq!(removals.len(), 1, "removed from HA before it was stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pve8_keeps_the_vm_on_its_nodes_with_a_group() {
    let env = env_on("ha8", 8).await;
    let vmid = env.create_ready("web", ha_spec()).await;
    let client = env.sim.client();
    let group = format!("crossplane-vm-{vmid}");
    support::poll("the VM in HA with its group", DEADLINE, || async {
        let resources = client.ha_resources().await.unwrap();
        let groups = client.ha_groups().await.unwrap();
        let bound = resources
            .iter()
            .any(|r| r.sid == format!("vm:{vmid}") && r.group.as_deref() == Some(group.as_str()));
        let grouped = groups.iter().any(|g| {
            g.group == group
                && g.restricted
                && ha_nodes(g.nodes.as_deref().unwrap_or_default()) == ["pve", "pve2"]
        });
        (bound && grouped)
            .then_some(())
            .ok_or(format!("resources {resources:?}, groups {groups:?}"))
    })
    .await;
    assert_eq!(env.sim.count("POST", "/cluster/ha/rules").await, 0);

    // Narrowing allowedNodes narrows the group.
    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"allowedNodes": ["pve"]}}}),
    )
    .await;
    support::poll("the group narrowed", DEADLINE, || async {
        let groups = client.ha_groups().await.unwrap();
        groups
            .iter()
            .find(|g| g.group == group)
            .filter(|g| ha_nodes(g.nodes.as_deref().unwrap_or_default()) == ["pve"])
            .map(|_| ())
            .ok_or(format!("{groups:?}"))
    })
    .await;

    env.vms().delete("web", &Default::default()).await.unwrap();
    env.wait_gone("web").await;
    assert!(client.ha_resources().await.unwrap().is_empty());
    assert!(
        client.ha_groups().await.unwrap().is_empty(),
        "the group went too"
    );
}
