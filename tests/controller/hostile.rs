//! Issue 31's hostile ProxmoxContainers that the API server cannot judge
//! (what the node has, what a Secret holds): each is a condition naming
//! the field, and nothing is sent to create it.

use serde_json::json;

use crate::reconcile::Env;
use crate::reconcile::containers::{container, ct_condition, debian};

/// Containers that do not fit the simulator's node `pve` (16 CPUs, 64 GiB,
/// bridge vmbr0) and a password Proxmox would answer 413: each says which
/// field and why, and no create reaches Proxmox. Before issue 31 each was
/// sent (and the password answered 413 with a message naming no field).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_that_do_not_fit_the_node_are_refused_naming_the_field() {
    let env = Env::start("ct-hostile").await;
    env.apply(&json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "huge"},
        "stringData": {"password": "p".repeat(700 * 1024)},
    }))
    .await;
    let rows = [
        (
            "memory-1ti",
            json!({"memory": "1Ti"}),
            "ExceedsNodeLimits",
            "spec.forProvider.memory 1 TiB is more than node pve's 64 GiB of memory",
        ),
        (
            "cores-64",
            json!({"cpu": {"cores": 64}}),
            "ExceedsNodeLimits",
            "spec.forProvider.cpu.cores 64 is more than node pve's 16 CPUs",
        ),
        (
            "bridge-missing",
            json!({"networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr9", "ip": "dhcp"}]}),
            "BridgeNotFound",
            "spec.forProvider.networks[0].bridge \"vmbr9\" is neither a bridge nor a VNet of node pve",
        ),
        (
            "password-700k",
            json!({"passwordSecretRef": {"name": "huge", "key": "password"}}),
            "InvalidSpec",
            "spec.forProvider.passwordSecretRef: the password in Secret huge key password has 716800 bytes",
        ),
    ];
    for (name, change, _, _) in &rows {
        env.apply(&container(name, debian(change.clone()))).await;
    }
    for (name, _, reason, message) in &rows {
        env.wait_container(name, reason, |ct| match ct_condition(ct, "Synced") {
            Some(c)
                if c.reason == *reason
                    && c.message.as_deref().is_some_and(|m| m.contains(message)) =>
            {
                Ok(())
            }
            other => Err(format!("Synced {other:?}")),
        })
        .await;
    }
    let creates = env.sim.requests_to("POST", "/nodes/{node}/lxc").await;
    assert!(creates.is_empty(), "nothing is created: {creates:?}");
}
