//! The managed resource contract, run over every managed kind
//! (`api::kinds::managed()`): what Crossplane users rely on whatever the
//! kind.
//!
//! `crossplane.io/paused: "true"` holds a resource before anything is sent
//! to Proxmox (Synced=False `ReconcilePaused`), and taking it away resumes
//! it at once: the watch reacts to the annotation, not a resync (the
//! provider config's resync here is 10 minutes, beyond the test).
//!
//! `crossplane.io/reconcile-requested-at` set to a new value asks for a
//! pass, answered in `status.lastHandledReconcileAt`.

use std::collections::BTreeSet;

use futures::future::join_all;
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use provider_proxmox::api::{ConditionStatus, kinds};
use provider_proxmox::api::{
    ProxmoxBackup, ProxmoxBackupJob, ProxmoxContainer, ProxmoxIPSet, ProxmoxImage, ProxmoxPool,
    ProxmoxSDNZone, ProxmoxSecurityGroup, ProxmoxSnapshot, ProxmoxVM, ProxmoxVNet,
};
use serde_json::{Value, json};

use crate::firewall::{group, ip_set};
use crate::reconcile::{DEADLINE, Env, Options, containers, manifests};
use crate::support;

const PAUSED: &str = "crossplane.io/paused";
const REQUESTED: &str = "crossplane.io/reconcile-requested-at";

/// One resource of each managed kind that becomes Ready on pve-sim, and
/// its API.
fn one_of_each(ns: &str) -> Vec<(Value, ApiResource)> {
    let url = "https://images.example/contract.qcow2";
    let image = json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxImage",
        "metadata": {"name": "c-image"},
        "spec": {
            "forProvider": {
                "source": {"url": url, "checksum": support::sha256_hex(url), "checksumAlgorithm": "sha256"},
                "content": "import",
                "storage": "local",
            },
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    });
    let pool = json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxPool",
        "metadata": {"name": "c-pool"},
        "spec": {
            "forProvider": {"poolId": format!("c-{ns}"), "comment": "contract"},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    });
    let mut vm = manifests::vm("c-vm", manifests::imported(json!({})));
    vm["metadata"]["labels"] = json!({"tier": "contract"});
    // Ready once the VM it selects has its VMID.
    let job = json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxBackupJob",
        "metadata": {"name": "c-job"},
        "spec": {
            "forProvider": {
                "schedule": "daily",
                "storage": "local",
                "guestSelector": {"matchLabels": {"tier": "contract"}},
            },
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    });
    // Ready once the VM it names has its VMID and the snapshot is taken.
    let snapshot = json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxSnapshot",
        "metadata": {"name": "c-snap"},
        "spec": {
            "forProvider": {"guestRef": {"kind": "ProxmoxVM", "name": "c-vm"}, "name": "contract"},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    });
    // Ready once the VM it names has its VMID and the archive exists.
    let backup = json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxBackup",
        "metadata": {"name": "c-backup"},
        "spec": {
            "forProvider": {"guestRef": {"kind": "ProxmoxVM", "name": "c-vm"}, "storage": "local"},
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    });
    let ct = containers::container("c-ct", containers::debian(json!({})));
    let set = ip_set("c-set", json!([{"cidr": "10.1.0.0/24"}]));
    let group = group("c-group", json!([{"type": "in", "action": "ACCEPT"}]));
    let managed = |kind: &str, name: &str, for_provider: Value| {
        json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": kind,
            "metadata": {"name": name},
            "spec": {
                "forProvider": for_provider,
                "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
            },
        })
    };
    let zone = managed("ProxmoxSDNZone", "c-zone", json!({"type": "simple"}));
    let vnet = managed(
        "ProxmoxVNet",
        "c-vnet",
        json!({"zoneRef": {"name": "c-zone"}, "subnets": [{"cidr": "10.2.0.0/24"}]}),
    );
    vec![
        (zone, ApiResource::erase::<ProxmoxSDNZone>(&())),
        (vnet, ApiResource::erase::<ProxmoxVNet>(&())),
        (vm, ApiResource::erase::<ProxmoxVM>(&())),
        (ct, ApiResource::erase::<ProxmoxContainer>(&())),
        (image, ApiResource::erase::<ProxmoxImage>(&())),
        (pool, ApiResource::erase::<ProxmoxPool>(&())),
        (set, ApiResource::erase::<ProxmoxIPSet>(&())),
        (group, ApiResource::erase::<ProxmoxSecurityGroup>(&())),
        (job, ApiResource::erase::<ProxmoxBackupJob>(&())),
        (snapshot, ApiResource::erase::<ProxmoxSnapshot>(&())),
        (backup, ApiResource::erase::<ProxmoxBackup>(&())),
    ]
}

/// The `reason` of condition `type_`, when its status is `status`.
fn reason(obj: &DynamicObject, type_: &str, status: &str) -> Option<String> {
    obj.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == status)
        .and_then(|c| c["reason"].as_str())
        .map(str::to_owned)
}

async fn wait(api: &Api<DynamicObject>, name: &str, what: &str, check: fn(&DynamicObject) -> bool) {
    support::poll(&format!("{name}: {what}"), DEADLINE, || async {
        let obj = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
        check(&obj)
            .then_some(())
            .ok_or_else(|| format!("status {}", obj.data["status"]))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_managed_kind_pauses_resumes_and_answers_a_reconcile_request() {
    let options = Options {
        provider: json!({"resyncInterval": "10m"}),
        ..Options::default()
    };
    let env = Env::start_with("contract-pause", options).await;
    let ns = env.ns.name().to_owned();
    let resources = one_of_each(&ns);
    // The table covers every managed kind the provider serves.
    let covered: BTreeSet<String> = resources.iter().map(|(_, r)| r.kind.clone()).collect();
    let served: BTreeSet<String> = kinds::managed().into_iter().map(|k| k.kind).collect();
    assert_eq!(covered, served, "one row per managed kind");

    let apis: Vec<(String, Api<DynamicObject>)> = resources
        .iter()
        .map(|(obj, r)| {
            let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
            (name, Api::namespaced_with(support::client(), &ns, r))
        })
        .collect();
    // The config usable first: its becoming Ready wakes every resource
    // naming it, which would resume a paused one whatever woke it.
    env.wait_config("pve", "Ready", |s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True)
    })
    .await;
    for (obj, _) in &resources {
        let mut paused = obj.clone();
        paused["metadata"]["annotations"] = json!({PAUSED: "true"});
        env.apply(&paused).await;
    }
    join_all(apis.iter().map(|(name, api)| {
        wait(api, name, "Synced=False ReconcilePaused", |o| {
            reason(o, "Synced", "False").as_deref() == Some("ReconcilePaused")
        })
    }))
    .await;
    let sent: Vec<Value> = env
        .sim
        .requests()
        .await
        .into_iter()
        .filter(|r| r["method"] != "GET")
        .collect();
    assert!(sent.is_empty(), "paused resources sent {sent:#?}");

    let resume = json!({"metadata": {"annotations": {PAUSED: null}}});
    for (name, api) in &apis {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&resume))
            .await
            .unwrap_or_else(|e| panic!("resuming {name}: {e}"));
    }
    join_all(apis.iter().map(|(name, api)| {
        wait(api, name, "Ready after the pause was lifted", |o| {
            reason(o, "Ready", "True").is_some()
        })
    }))
    .await;

    // `crossplane.io/reconcile-requested-at` asks for a pass (the resync
    // is 10 minutes away), answered in status.lastHandledReconcileAt.
    let request = json!({"metadata": {"annotations": {REQUESTED: "2026-12-04T21:00:00Z"}}});
    for (name, api) in &apis {
        api.patch(name, &PatchParams::default(), &Patch::Merge(&request))
            .await
            .unwrap_or_else(|e| panic!("requesting a pass of {name}: {e}"));
    }
    join_all(apis.iter().map(|(name, api)| {
        wait(api, name, "the request answered", |o| {
            o.data["status"]["lastHandledReconcileAt"] == "2026-12-04T21:00:00Z"
        })
    }))
    .await;

    // The VM and the container use the image's storage, not the image:
    // delete everything at once.
    for (name, api) in &apis {
        api.delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    }
    join_all(apis.iter().map(|(name, api)| gone(api, name))).await;
}

async fn gone(api: &Api<DynamicObject>, name: &str) {
    support::poll(&format!("{name} gone"), DEADLINE, || async {
        match api.get_opt(name).await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err("still there".to_owned()),
            Err(e) => Err(format!("GET: {e}")),
        }
    })
    .await;
}
