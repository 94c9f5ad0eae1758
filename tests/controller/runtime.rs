//! The controller as a process: /metrics, /healthz and /readyz; leader
//! election between two replicas.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use provider_proxmox::reconcile::LeaderElection;
use serde_json::json;

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
async fn one_of_two_replicas_leads_and_the_other_takes_over() {
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
    let holder = || async {
        leases
            .get_opt("crossplane-provider-proxmox")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
    };
    support::poll("replica-1 to lead", DEADLINE, || async {
        match holder().await.as_deref() {
            Some("replica-1") => Ok(()),
            other => Err(format!("holder {other:?}")),
        }
    })
    .await;
    let second = Controller::start(support::client(), replica(2)).await;
    let standby = second.addr.unwrap();
    support::poll("the standby to be ready", DEADLINE, || async {
        match get(standby, "/readyz").await.0 {
            200 => Ok(()),
            code => Err(code.to_string()),
        }
    })
    .await;

    env.apply(&manifests::vm("web", manifests::imported(json!({}))))
        .await;
    env.wait_ready("web").await;
    assert_eq!(holder().await.as_deref(), Some("replica-1"));
    assert!(
        !second
            .metrics
            .encode()
            .contains("proxmox_provider_reconcile_total{"),
        "the standby reconciled nothing"
    );

    // The leader stops (releasing the Lease); the standby takes over.
    first.stop().await;
    support::poll("replica-2 to lead", DEADLINE, || async {
        match holder().await.as_deref() {
            Some("replica-2") => Ok(()),
            other => Err(format!("holder {other:?}")),
        }
    })
    .await;
    env.patch_vm(
        "web",
        json!({"spec": {"forProvider": {"powerState": "Stopped"}}}),
    )
    .await;
    let vmid = env.vmid("web").await;
    support::poll("replica-2 to stop the VM", DEADLINE, || async {
        match env.sim.power(vmid).await.as_str() {
            "stopped" => Ok(()),
            other => Err(other.to_owned()),
        }
    })
    .await;
    assert!(
        second
            .metrics
            .encode()
            .contains("proxmox_provider_reconcile_total{result=\"success\"}")
    );
    tokio::time::timeout(Duration::from_secs(60), second.stop())
        .await
        .expect("the second replica stops");
}
