//! ProxmoxPool on the real API server and pve-sim (issue 33, item 1): a
//! pool is made with its comment and access, the VM naming it shows in its
//! members, a comment changed on Proxmox is set back, an access entry
//! Proxmox refuses is a condition naming the field (not a loop), the
//! deletion waits while the pool holds a guest and completes after, and
//! another namespace's resource with the same pool ID never touches it.

use kube::Api;
use kube::api::DeleteParams;
use provider_proxmox::api::ProxmoxPool;
use provider_proxmox::api::condition::Condition;
use provider_proxmox::reconcile::Settings;
use pve_client::{AclEntry, AclSubject};
use serde_json::{Value, json};

use crate::reconcile::{Controller, DEADLINE, Env, containers, manifests};
use crate::support;

/// A ProxmoxPool using the namespace's ProviderConfig `pve`.
pub fn pool(name: &str, for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxPool",
        "metadata": {"name": name},
        "spec": {
            "forProvider": for_provider,
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

fn condition<'a>(pool: &'a ProxmoxPool, type_: &str) -> Option<&'a Condition> {
    pool.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Polls the ProxmoxPool `name` of `namespace` until `check` accepts it.
pub async fn wait_pool<T>(
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(&ProxmoxPool) -> Result<T, String>,
) -> T {
    let pools: Api<ProxmoxPool> = Api::namespaced(support::client(), namespace);
    support::poll(&format!("ProxmoxPool {name}: {what}"), DEADLINE, || {
        let pools = pools.clone();
        let check = &check;
        async move {
            let pool = pools.get(name).await.map_err(|e| format!("GET: {e}"))?;
            check(&pool).map_err(|why| format!("{why}; status: {:?}", pool.status))
        }
    })
    .await
}

/// Waits until the pool says `reason` on Synced and returns its message.
pub async fn wait_synced(namespace: &str, name: &str, reason: &str) -> String {
    wait_pool(
        namespace,
        name,
        &format!("Synced {reason}"),
        |p| match condition(p, "Synced") {
            Some(c) if c.reason == reason => Ok(c.message.clone().unwrap_or_default()),
            other => Err(format!("Synced {other:?}")),
        },
    )
    .await
}

/// Waits for Ready=True, `Available`.
pub async fn wait_ready(namespace: &str, name: &str) -> ProxmoxPool {
    wait_pool(namespace, name, "Ready", |p| match condition(p, "Ready") {
        Some(c) if c.reason == "Available" => Ok(p.clone()),
        other => Err(format!("Ready {other:?}")),
    })
    .await
}

fn root_auditor() -> AclEntry {
    AclEntry {
        path: "/pool/team".into(),
        subject: AclSubject::User("root@pam".into()),
        role: "PVEAuditor".into(),
        propagate: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_its_access_shows_its_members_is_corrected_and_waits_for_them_to_go() {
    let env = Env::start("pools").await;
    let ns = env.ns.name().to_owned();
    let proxmox = env.sim.client();
    env.apply(&pool(
        "team",
        json!({
            "poolId": "team",
            "comment": "Team A",
            "access": [{"role": "PVEAuditor", "user": "root@pam"}],
        }),
    ))
    .await;
    let ready = wait_ready(&ns, "team").await;
    let at = &ready.status.as_ref().unwrap().at_provider;
    assert_eq!(at.pool_id.as_deref(), Some("team"));
    assert_eq!(at.comment.as_deref(), Some("Team A"));
    assert_eq!(at.access.len(), 1, "{at:?}");
    let made = proxmox
        .pool("team")
        .await
        .unwrap()
        .expect("the pool exists");
    let comment = made.comment.unwrap_or_default();
    assert!(comment.starts_with("Team A\n"), "{comment:?}");
    assert!(
        comment.contains(&format!("ProxmoxPool {ns}/team uid=")),
        "the owner marker: {comment:?}"
    );
    let acl = proxmox.acl().await.unwrap();
    assert!(acl.contains(&root_auditor()), "{acl:?}");

    // A VM naming the pool is one of its members once created.
    let vmid = env
        .create_ready(
            "web",
            json!({"node": "pve", "memory": "1Gi", "pool": "team"}),
        )
        .await;
    wait_pool(&ns, "team", "the VM a member", |p| {
        let at = &p.status.as_ref().ok_or("no status")?.at_provider;
        match at.members.as_slice() {
            [m] if m.vmid == vmid && m.kind == "qemu" && m.name.as_deref() == Some("web") => Ok(()),
            other => Err(format!("members {other:?}")),
        }
    })
    .await;

    // Drift on Proxmox: the comment edited (its marker line kept, as a
    // person editing the text would) is set back at the resync interval.
    let marker = comment.lines().last().unwrap();
    proxmox
        .set_pool_comment("team", &format!("hand edited\n\n{marker}"))
        .await
        .unwrap();
    support::poll("the comment set back", DEADLINE, || async {
        let seen = proxmox.pool("team").await.map_err(|e| e.to_string())?;
        match seen.and_then(|p| p.comment) {
            Some(c) if c == comment => Ok(()),
            other => Err(format!("comment {other:?}")),
        }
    })
    .await;
    // An entry removed on Proxmox is granted again.
    proxmox.revoke(&root_auditor()).await.unwrap();
    support::poll("the entry granted again", DEADLINE, || async {
        let acl = proxmox.acl().await.map_err(|e| e.to_string())?;
        acl.contains(&root_auditor())
            .then_some(())
            .ok_or(format!("{acl:?}"))
    })
    .await;

    // Deleting it waits while Proxmox lists the VM in it, naming it.
    let pools: Api<ProxmoxPool> = Api::namespaced(support::client(), &ns);
    pools
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    let why = wait_synced(&ns, "team", "InUse").await;
    assert!(why.contains(&format!("qemu/{vmid} (web)")), "{why}");
    assert!(proxmox.pool("team").await.unwrap().is_some());
    assert_eq!(env.sim.count("DELETE", "/pools/{poolid}").await, 0);
    env.vms()
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_gone("web").await;
    support::poll("the ProxmoxPool gone", DEADLINE, || async {
        match pools.get_opt("team").await {
            Ok(None) => Ok(()),
            Ok(Some(p)) => Err(format!("still there: {:?}", p.status)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert!(proxmox.pool("team").await.unwrap().is_none());
    let acl = proxmox.acl().await.unwrap();
    assert!(
        !acl.iter().any(|e| e.path == "/pool/team"),
        "the pool's entries went with it: {acl:?}"
    );
    assert_eq!(env.sim.count("DELETE", "/pools/{poolid}").await, 1);
}

/// An entry naming a role Proxmox does not have: a condition naming the
/// field, retried only at the resync interval (5 s in these tests), never
/// in a loop; fixing the spec makes the pool Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_access_entry_proxmox_refuses_is_named_and_not_retried_in_a_loop() {
    let env = Env::start("pools-refused").await;
    let ns = env.ns.name().to_owned();
    let entries = |role: &str| {
        json!({
            "poolId": "team",
            "access": [
                {"role": "PVEAuditor", "user": "root@pam"},
                {"role": role, "user": "root@pam", "propagate": false},
            ],
        })
    };
    env.apply(&pool("team", entries("PVENoSuchRole"))).await;
    let message = wait_synced(&ns, "team", "AccessRefused").await;
    assert!(
        message.contains("spec.forProvider.access[1]")
            && message.contains("role 'PVENoSuchRole' does not exist"),
        "{message}"
    );
    // The attempts' spacing once the start-up wake-ups are over (the
    // config turning Ready wakes its users once): no loop.
    let refused = || async {
        env.sim
            .requests_to("PUT", "/access/acl")
            .await
            .into_iter()
            .filter(|r| r["params"]["roles"] == "PVENoSuchRole")
            .map(|r| r["time"].as_f64().unwrap())
            .collect::<Vec<f64>>()
    };
    let times = support::poll("five refused attempts", DEADLINE, || async {
        let times = refused().await;
        (times.len() >= 5)
            .then_some(times)
            .ok_or("fewer so far".to_owned())
    })
    .await;
    for pair in times[2..].windows(2) {
        assert!(
            pair[1] - pair[0] >= 4.0,
            "retried after {} s, not at the resync interval: {times:?}",
            pair[1] - pair[0]
        );
    }
    env.apply(&pool("team", entries("PVEPoolUser"))).await;
    let ready = wait_ready(&ns, "team").await;
    assert_eq!(ready.status.unwrap().at_provider.access.len(), 2);
}

/// Two namespaces ask for the same pool ID on one Proxmox: the first makes
/// it, the second is told `NotOwned` and never changes or deletes it, even
/// when it is deleted itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_namespaces_pool_with_the_same_id_is_never_touched() {
    let env = Env::start("pools-a").await;
    let ns = env.ns.name().to_owned();
    let proxmox = env.sim.client();
    env.apply(&pool(
        "shared",
        json!({"poolId": "shared", "comment": "A's", "access": [{"role": "PVEAuditor", "user": "root@pam"}]}),
    ))
    .await;
    wait_ready(&ns, "shared").await;
    let before = proxmox.pool("shared").await.unwrap().unwrap();
    let acl_before = proxmox.acl().await.unwrap();

    let other = support::namespace("pools-b").await;
    let b = other.name().to_owned();
    support::apply_objects(
        &[
            serde_json::from_value(manifests::credentials()).unwrap(),
            serde_json::from_value(manifests::provider_config(&env.sim, &json!({}))).unwrap(),
            serde_json::from_value(pool(
                "shared",
                json!({"poolId": "shared", "comment": "B's", "access": [{"role": "PVEVMUser", "user": "root@pam"}]}),
            ))
            .unwrap(),
        ],
        Some(&b),
    )
    .await;
    let second = Controller::start(
        support::client(),
        Settings {
            namespace: Some(b.clone()),
            identity: format!("test-{b}"),
            ..Settings::default()
        },
    )
    .await;
    let why = wait_synced(&b, "shared", "NotOwned").await;
    assert!(
        why.contains("pool shared exists without this resource's owner marker"),
        "{why}"
    );
    let pools_b: Api<ProxmoxPool> = Api::namespaced(support::client(), &b);
    pools_b
        .delete("shared", &DeleteParams::default())
        .await
        .unwrap();
    support::poll("B's ProxmoxPool gone", DEADLINE, || async {
        match pools_b.get_opt("shared").await {
            Ok(None) => Ok(()),
            Ok(Some(p)) => Err(format!("still there: {:?}", p.status)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    second.stop().await;
    assert_eq!(proxmox.pool("shared").await.unwrap().unwrap(), before);
    assert_eq!(proxmox.acl().await.unwrap(), acl_before);
    // B wrote nothing to Proxmox: every pool and ACL write is A's create.
    let writes: Vec<Value> = env
        .sim
        .requests()
        .await
        .into_iter()
        .filter(|r| r["method"] != "GET")
        .filter(|r| {
            let route = r["route"].as_str().unwrap_or_default();
            route.starts_with("/pools") || route == "/access/acl"
        })
        .collect();
    assert_eq!(writes.len(), 2, "A's create and its one entry: {writes:#?}");
    wait_ready(&ns, "shared").await;
}

/// Whether the pool `poolid` lists VM `vmid`, as Proxmox answers now.
async fn holds(proxmox: &pve_client::Client, poolid: &str, vmid: u32) -> bool {
    proxmox
        .pool(poolid)
        .await
        .unwrap()
        .is_some_and(|p| p.members.iter().any(|m| m.vmid == Some(u64::from(vmid))))
}

/// `pool` on a ProxmoxVM is kept in place: changed in the spec, the VM is
/// moved in one call with `allow-move`; moved back by hand, it is moved
/// again; a spec change of something else sends no pool call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vms_pool_is_changed_in_place_and_kept() {
    let env = Env::start("poolmove").await;
    let proxmox = env.sim.client();
    for id in ["blue", "green"] {
        proxmox.create_pool(id, "").await.unwrap();
    }
    let vmid = env
        .create_ready(
            "mover",
            json!({"node": "pve", "memory": "1Gi", "pool": "blue"}),
        )
        .await;
    assert!(holds(&proxmox, "blue", vmid).await);
    assert_eq!(
        env.sim.count("PUT", "/pools/{poolid}").await,
        0,
        "created in it"
    );

    env.patch_vm("mover", json!({"spec": {"forProvider": {"pool": "green"}}}))
        .await;
    support::poll("moved into green", DEADLINE, || async {
        match (
            holds(&proxmox, "green", vmid).await,
            holds(&proxmox, "blue", vmid).await,
        ) {
            (true, false) => Ok(()),
            other => Err(format!("(green, blue) {other:?}")),
        }
    })
    .await;
    let moves = env.sim.requests_to("PUT", "/pools/{poolid}").await;
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!(moves[0]["params"]["vms"], vmid.to_string());
    assert_eq!(moves[0]["params"]["allow-move"], "1");
    assert!(
        moves[0]["path"]
            .as_str()
            .unwrap_or_default()
            .ends_with("/green"),
        "{moves:?}"
    );

    // Moved back by hand: moved again (within the poll interval).
    proxmox.add_to_pool("blue", vmid, true).await.unwrap();
    support::poll("moved back into green", DEADLINE, || async {
        holds(&proxmox, "green", vmid)
            .await
            .then_some(())
            .ok_or("not yet".to_owned())
    })
    .await;
    let sent = env.sim.count("PUT", "/pools/{poolid}").await;
    // The provider's move, the hand move, the provider's move back.
    assert_eq!(sent, 3);

    // Another change is applied without any pool call.
    env.patch_vm(
        "mover",
        json!({"spec": {"forProvider": {"tags": ["moved"]}}}),
    )
    .await;
    support::poll("tagged", DEADLINE, || async {
        let tags = env.sim.config(vmid).await.tags;
        (tags.as_slice() == ["moved"])
            .then_some(())
            .ok_or(format!("{tags:?}"))
    })
    .await;
    assert_eq!(env.sim.count("PUT", "/pools/{poolid}").await, sent);

    // A container the same way: created in blue, moved into green.
    env.apply(&containers::container(
        "boxed",
        containers::debian(json!({"pool": "blue"})),
    ))
    .await;
    let ctid = env.wait_container_ready("boxed").await;
    assert!(holds(&proxmox, "blue", ctid).await);
    env.patch_container("boxed", json!({"spec": {"forProvider": {"pool": "green"}}}))
        .await;
    support::poll("the container moved into green", DEADLINE, || async {
        match (
            holds(&proxmox, "green", ctid).await,
            holds(&proxmox, "blue", ctid).await,
        ) {
            (true, false) => Ok(()),
            other => Err(format!("(green, blue) {other:?}")),
        }
    })
    .await;
    let moves = env.sim.requests_to("PUT", "/pools/{poolid}").await;
    assert_eq!(moves.len(), sent + 1, "{moves:?}");
    assert_eq!(moves[sent]["params"]["vms"], ctid.to_string());
    assert_eq!(moves[sent]["params"]["allow-move"], "1");
}
