//! The controller as a process: /metrics, /healthz and /readyz; leader
//! election between two replicas (a VM and a container each), and between the providers of two
//! namespaces sharing one namespace for their Leases.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::ListParams;
use provider_proxmox::reconcile::LeaderElection;
use provider_proxmox::reconcile::runtime::shards::assign::assign;
use serde_json::json;

use crate::reconcile::containers::{container, debian};
use crate::reconcile::{Controller, DEADLINE, Env, Options, manifests};
use crate::support;

async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    let status = r.status().as_u16();
    let content_type = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness_are_served() {
    let mut env = Env::without_controller("metrics", Options::default()).await;
    let mut settings = env.settings();
    settings.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    let controller = Controller::start(support::client(), settings).await;
    let addr = controller.addr.expect("a bound address");
    env.controller = Some(controller);

    assert_eq!(get(addr, "/healthz").await.0, 200);
    support::poll("/readyz to answer 200", DEADLINE, || async {
        match get(addr, "/readyz").await {
            (200, _, _) => Ok(()),
            (code, _, body) => Err(format!("{code} {body}")),
        }
    })
    .await;
    env.apply(&manifests::vm("web", manifests::imported(json!({}))))
        .await;
    env.wait_ready("web").await;

    let (code, content_type, text) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    for want in [
        "proxmox_provider_reconcile_total{result=\"success\"}",
        "proxmox_provider_reconcile_duration_seconds_count",
        "proxmox_provider_task_duration_seconds_count{type=\"qmcreate\",outcome=\"success\"} 1",
        "proxmox_provider_proxmox_requests_total{method=\"POST\",path=\"/nodes/{node}/qemu\",code=\"200\"} 1",
        "proxmox_provider_event_publish_failures_total 0",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
    env.stop_controller().await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the listener is closed after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_replicas_holds_the_config_and_the_other_takes_over() {
    let env = Env::without_controller("leader", Options::default()).await;
    let replica = |n: u32| {
        let mut s = env.settings();
        s.identity = format!("replica-{n}");
        s.leader_election = Some(LeaderElection::in_namespace(env.ns.name()));
        s.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
        s
    };
    let first = Controller::start(support::client(), replica(1)).await;
    let leases: Api<Lease> = Api::namespaced(support::client(), env.ns.name());
    // The Lease of the namespace's ProviderConfig `pve`.
    let lease = format!("crossplane-provider-proxmox.pc.{}.pve", env.ns.name());
    let holder = || async {
        leases
            .get_opt(&lease)
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
    };
    let wait_holder = |who: String| {
        let holder = &holder;
        async move {
            support::poll(&format!("{who} to hold the config"), DEADLINE, || async {
                match holder().await {
                    Some(h) if h == who => Ok(()),
                    other => Err(format!("holder {other:?}")),
                }
            })
            .await;
        }
    };
    wait_holder("replica-1".into()).await;
    let second = Controller::start(support::client(), replica(2)).await;
    let standby = second.addr.unwrap();
    support::poll("the second replica to be ready", DEADLINE, || async {
        match get(standby, "/readyz").await.0 {
            200 => Ok(()),
            code => Err(code.to_string()),
        }
    })
    .await;
    // Both replicas compute the same assignment: wait for it.
    let members = ["replica-1", "replica-2"].map(str::to_owned).into();
    let wanted = assign(&[lease.clone()].into(), &members)[&lease].clone();
    let other = if wanted == "replica-1" {
        "replica-2"
    } else {
        "replica-1"
    };
    support::poll("both member Leases", DEADLINE, || async {
        let n = leases
            .list(&ListParams::default().labels("proxmox.crossplane.io/lease=member"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        if n == 2 {
            Ok(())
        } else {
            Err(format!("{n} member Leases"))
        }
    })
    .await;
    wait_holder(wanted.clone()).await;
    let (holding, standing) = if wanted == "replica-1" {
        (&first, &second)
    } else {
        (&second, &first)
    };
    env.wait_config("pve", "to name its holder", |s| {
        s.holder.as_deref() == Some(wanted.as_str())
    })
    .await;

    env.apply(&manifests::vm("web", manifests::imported(json!({}))))
        .await;
    // A container of the same config goes through the same envelope: only
    // the holder acts for it, and the other replica takes it over too.
    env.apply(&container("ct", debian(json!({})))).await;
    env.wait_ready("web").await;
    let ct_vmid = env.wait_container_ready("ct").await;
    assert_eq!(holder().await, Some(wanted.clone()));
    assert!(
        !standing
            .metrics
            .encode()
            .contains("proxmox_provider_reconcile_total{"),
        "the replica not holding the config reconciled nothing"
    );
    assert!(
        holding.metrics.encode().contains(&format!(
            "proxmox_provider_config_lease_held{{config=\"ProviderConfig {}/pve\"}} 1",
            env.ns.name()
        )),
        "the holder says so in its metrics"
    );

    // The holder stops (giving the Lease up); the other takes over.
    let (survivor, stopped) = if wanted == "replica-1" {
        (second, first)
    } else {
        (first, second)
    };
    stopped.stop().await;
    wait_holder(other.to_owned()).await;
    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"powerState": "Stopped"}}}),
    )
    .await;
    let vmid = env.vmid("web").await;
    support::poll("the other replica to stop the VM", DEADLINE, || async {
        match env.sim.power(vmid).await.as_str() {
            "stopped" => Ok(()),
            other => Err(other.to_owned()),
        }
    })
    .await;
    env.patch_container(
        "ct",
        json!({"spec": {"forProvider": {"powerState": "Stopped"}}}),
    )
    .await;
    let client = env.sim.client();
    support::poll(
        "the other replica to stop the container",
        DEADLINE,
        || async {
            match client.container_status("pve", ct_vmid).await {
                Ok(status) if !status.is_running() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(
        survivor
            .metrics
            .encode()
            .contains("proxmox_provider_reconcile_total{result=\"success\"}")
    );
    tokio::time::timeout(Duration::from_secs(60), survivor.stop())
        .await
        .expect("the second replica stops");
}

/// Two providers in the namespaced mode, each serving its own namespace,
/// keep their Leases in one namespace (as two Helm releases in
/// crossplane-system do): each counts only its own replica, so neither
/// hands its config to the other, and both VMs converge. Their identities
/// are chosen so that counting each other would give each config to the
/// other provider's replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_of_two_namespaces_share_a_lease_namespace() {
    let a = Env::without_controller("serves-a", Options::default()).await;
    let b = Env::without_controller("serves-b", Options::default()).await;
    let lease = |env: &Env| format!("crossplane-provider-proxmox.pc.{}.pve", env.ns.name());
    let (first, second) = (0u32..)
        .map(|n| (format!("a-{n}"), format!("b-{n}")))
        .find(|(x, y)| {
            let both = [x.clone(), y.clone()].into();
            let names = [lease(&a), lease(&b)].into();
            let wanted = assign(&names, &both);
            wanted[&lease(&a)] == *y && wanted[&lease(&b)] == *x
        })
        .unwrap();
    let start = |env: &Env, identity: String| {
        let mut settings = env.settings();
        settings.cluster_configs = false;
        settings.identity = identity;
        settings.leader_election = Some(LeaderElection::in_namespace(a.ns.name()));
        Controller::start(support::client(), settings)
    };
    let serving_a = start(&a, first.clone()).await;
    let serving_b = start(&b, second.clone()).await;
    for env in [&a, &b] {
        env.apply(&manifests::vm("web", manifests::imported(json!({}))))
            .await;
    }
    a.wait_ready("web").await;
    b.wait_ready("web").await;
    let leases: Api<Lease> = Api::namespaced(support::client(), a.ns.name());
    for (env, holder) in [(&a, &first), (&b, &second)] {
        let held = leases.get(&lease(env)).await.unwrap();
        assert_eq!(
            held.spec.and_then(|s| s.holder_identity).as_ref(),
            Some(holder),
            "{}'s config is held by its own provider",
            env.ns.name()
        );
        assert_eq!(
            held.metadata.labels.unwrap_or_default()["proxmox.crossplane.io/serves"],
            env.ns.name()
        );
    }
    serving_a.stop().await;
    serving_b.stop().await;
}
