//! ProxmoxSDNZones and ProxmoxVNets on the real control plane and pve-sim:
//! two VNets (one with a subnet) applied before their zone wait for it,
//! and all three are written pending and applied by exactly one
//! `PUT /cluster/sdn` (one `reloadnetworkall` task); a change is pending,
//! then applied by one more; a VNet a VM is on is not deleted while the VM
//! names it; deleting them waits for the deletion to be applied.

use provider_proxmox::api::sdn::ApplyState;
use provider_proxmox::api::{ProxmoxSDNZone, ProxmoxVNet};
use provider_proxmox::reconcile::sdn::vnet::vnet_id;
use provider_proxmox::reconcile::sdn::zone::zone_id;
use serde_json::{Value, json};

use crate::firewall::{delete, wait, wait_gone, wait_ready};
use crate::reconcile::{DEADLINE, Env, manifests};
use crate::support;

const APPLY: (&str, &str) = ("PUT", "/cluster/sdn");

fn zone(name: &str) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxSDNZone",
        "metadata": {"name": name},
        "spec": {
            "forProvider": {"type": "vlan", "bridge": "vmbr0", "mtu": 1500},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

fn vnet(name: &str, tag: u32, subnets: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxVNet",
        "metadata": {"name": name},
        "spec": {
            "forProvider": {"zoneRef": {"name": "lan"}, "tag": tag, "alias": "test net",
                "subnets": subnets},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

fn web_subnet(gateway: &str) -> Value {
    json!([{"cidr": "10.10.0.0/24", "gateway": gateway, "snat": true,
        "dhcpRanges": [{"start": "10.10.0.100", "end": "10.10.0.200"}]}])
}

async fn applies(env: &Env) -> usize {
    env.sim.count(APPLY.0, APPLY.1).await
}

/// The `reloadnetworkall` tasks pve-sim ran.
async fn reload_tasks(env: &Env) -> usize {
    let filter = pve_client::TaskListFilter {
        source: Some("all".into()),
        typefilter: Some("reloadnetworkall".into()),
        ..Default::default()
    };
    let tasks = env.sim.client().list_tasks("pve", &filter).await.unwrap();
    tasks
        .iter()
        .filter(|t| t.task_type.as_deref() == Some("reloadnetworkall"))
        .count()
}

/// The VNet's `type_` condition says `text` in its message (else the
/// condition as it is).
fn says(v: &ProxmoxVNet, type_: &str, text: &str) -> Result<(), String> {
    let condition = v
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_));
    condition
        .and_then(|c| c.message.as_deref())
        .filter(|m| m.contains(text))
        .map(|_| ())
        .ok_or_else(|| format!("{condition:?}"))
}

fn state_of_vnet(v: &ProxmoxVNet) -> Option<ApplyState> {
    v.status.as_ref().and_then(|s| s.at_provider.state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_objects_are_one_apply_a_change_another_and_a_used_vnet_waits() {
    let env = Env::start("sdn").await;
    let ns = env.ns.name().to_owned();
    let (zid, web, db) = (zone_id(&ns, "lan"), vnet_id(&ns, "web"), vnet_id(&ns, "db"));

    // The VNets first, as a GitOps tool may apply them: they wait for
    // their zone (nothing sent), and are woken when it is written, so
    // that all three join one apply.
    env.apply(&vnet("web", 10, web_subnet("10.10.0.1"))).await;
    env.apply(&vnet("db", 20, json!([]))).await;
    wait(&ns, "db", "waits for its zone", |v: &ProxmoxVNet| {
        says(v, "Synced", "no ProxmoxSDNZone lan")
    })
    .await;
    env.apply(&zone("lan")).await;
    let z: ProxmoxSDNZone = wait_ready(&ns, "lan").await;
    let w: ProxmoxVNet = wait_ready(&ns, "web").await;
    let d: ProxmoxVNet = wait_ready(&ns, "db").await;
    let at = z.status.unwrap().at_provider;
    assert_eq!(
        (at.id.as_deref(), at.state),
        (Some(zid.as_str()), Some(ApplyState::Applied))
    );
    let at = w.status.unwrap().at_provider;
    assert_eq!(at.id.as_deref(), Some(web.as_str()));
    assert_eq!(
        (at.zone.as_deref(), at.subnets),
        (Some(zid.as_str()), Some(1))
    );
    assert_eq!(at.state, Some(ApplyState::Applied));
    assert_eq!(state_of_vnet(&d), Some(ApplyState::Applied));
    assert_eq!(applies(&env).await, 1, "three objects, one apply");
    assert_eq!(reload_tasks(&env).await, 1, "one reloadnetworkall task");
    assert_eq!(
        env.sim.count("POST", "/cluster/sdn/vnets").await,
        2,
        "no VNet create sent before its zone was written"
    );
    let client = env.sim.client();
    let vnets = client.sdn_vnets().await.unwrap();
    let running = |id: &str| vnets.iter().any(|v| v.id == id && v.state.is_none());
    assert!(running(&web) && running(&db), "{vnets:?}");

    // A change: written pending, then applied by one more apply (held
    // in pve-sim until the status said so).
    let hold = env
        .sim
        .fault(json!({"fault": "task-held", "task_type": "reloadnetworkall", "hold": "reload"}))
        .await;
    env.apply(&vnet("web", 10, web_subnet("10.10.0.254"))).await;
    let held: ProxmoxVNet = wait(&ns, "web", "applying", |v: &ProxmoxVNet| {
        let current =
            v.status.as_ref().and_then(|s| s.observed_generation) == v.metadata.generation;
        match state_of_vnet(v) {
            Some(ApplyState::Applying) if current => Ok(v.clone()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let status = held.status.unwrap();
    assert!(
        status
            .at_provider
            .apply_task
            .as_deref()
            .is_some_and(|t| t.contains(":reloadnetworkall:")),
        "{:?}",
        status.at_provider
    );
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        ready.status,
        provider_proxmox::api::ConditionStatus::False,
        "{ready:?}"
    );
    let requests = env.sim.requests().await;
    let at = |method: &str, route: &str| {
        requests
            .iter()
            .rposition(|r| r["method"] == method && r["route"] == route)
            .unwrap()
    };
    assert!(
        at("PUT", "/cluster/sdn/vnets/{vnet}/subnets/{subnet}") < at(APPLY.0, APPLY.1),
        "written pending, then applied"
    );
    env.sim.remove_fault(hold).await;
    env.sim.release("reload").await;
    let _: ProxmoxVNet = wait(&ns, "web", "applied", |v: &ProxmoxVNet| {
        let current =
            v.status.as_ref().and_then(|s| s.observed_generation) == v.metadata.generation;
        match state_of_vnet(v) {
            Some(ApplyState::Applied) if current => Ok(v.clone()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let subnets = client.sdn_subnets(&web).await.unwrap();
    assert_eq!(subnets.len(), 1);
    assert_eq!(subnets[0].text("gateway").as_deref(), Some("10.10.0.254"));
    assert_eq!(subnets[0].state, None, "applied");
    assert_eq!(applies(&env).await, 2, "one more apply for the change");

    // A VM on the db VNet holds its deletion, naming the VM.
    let mut fp = manifests::imported(json!({}));
    fp["networks"] = json!([{"slot": "net0", "bridge": db}]);
    env.apply(&manifests::vm("app", fp)).await;
    env.wait_ready("app").await;
    delete::<ProxmoxVNet>(&ns, "db").await;
    wait(&ns, "db", "held by its VM", |v: &ProxmoxVNet| {
        says(v, "Ready", "ProxmoxVM app")
    })
    .await;
    assert!(
        client
            .sdn_vnets()
            .await
            .unwrap()
            .iter()
            .any(|v| v.id == db && v.state.is_none())
    );

    // The VM goes: the VNet goes, its deletion applied.
    delete::<provider_proxmox::api::ProxmoxVM>(&ns, "app").await;
    env.wait_gone("app").await;
    wait_gone::<ProxmoxVNet>(&ns, "db").await;
    support::poll("db deleted and applied", DEADLINE, || async {
        let vnets = client.sdn_vnets().await.map_err(|e| e.to_string())?;
        (!vnets.iter().any(|v| v.id == db))
            .then_some(())
            .ok_or_else(|| format!("{vnets:?}"))
    })
    .await;

    // The rest: the zone waits for its VNet, then both go.
    delete::<ProxmoxSDNZone>(&ns, "lan").await;
    delete::<ProxmoxVNet>(&ns, "web").await;
    wait_gone::<ProxmoxVNet>(&ns, "web").await;
    wait_gone::<ProxmoxSDNZone>(&ns, "lan").await;
    let zones = client.sdn_zones().await.unwrap();
    assert!(!zones.iter().any(|z| z.id == zid), "{zones:?}");
}

/// A zone and a VNet in it, Ready (the RBAC tests' workload: every grant
/// of the SDN kinds used).
pub async fn workload(env: &Env) {
    env.apply(&zone("lan")).await;
    env.apply(&vnet("web", 10, web_subnet("10.10.0.1"))).await;
    let _: ProxmoxSDNZone = wait_ready(env.ns.name(), "lan").await;
    let _: ProxmoxVNet = wait_ready(env.ns.name(), "web").await;
}

/// Deletes [`workload`]'s zone and VNet and waits until they are gone.
pub async fn remove(env: &Env) {
    delete::<ProxmoxVNet>(env.ns.name(), "web").await;
    delete::<ProxmoxSDNZone>(env.ns.name(), "lan").await;
    wait_gone::<ProxmoxVNet>(env.ns.name(), "web").await;
    wait_gone::<ProxmoxSDNZone>(env.ns.name(), "lan").await;
}
