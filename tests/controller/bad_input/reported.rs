//! Invalid objects only the provider can judge (Secrets, CA bundles, what
//! Proxmox has) or written around the schema: each is reported as a
//! condition on the object, with a reason and a message a person can act on.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};

use super::refused;
use crate::reconcile::{DEADLINE, Sim, manifests};
use crate::support;

/// What an object must end up saying: its condition `type_` is False with
/// `reason`, and the message holds every one of `message`.
pub struct Expect {
    pub kind: &'static str,
    pub name: String,
    pub type_: &'static str,
    pub reason: &'static str,
    pub message: Vec<String>,
    /// The condition's status: `False`, or `True` for a Warning.
    pub status: &'static str,
    /// A Warning event with the reason and message will do: the API server
    /// refuses a status on an object with a value of the wrong type.
    pub or_event: bool,
}

impl Expect {
    /// Accepts a Warning event instead of the condition.
    pub fn or_event(self) -> Self {
        Self {
            or_event: true,
            ..self
        }
    }
}

/// A ProxmoxVM `name` expected Synced=False with `reason` and `message`.
pub fn vm_says(name: &str, reason: &'static str, message: &[&str]) -> Expect {
    Expect {
        kind: "ProxmoxVM",
        name: name.into(),
        type_: "Synced",
        reason,
        message: message.iter().map(|m| (*m).to_owned()).collect(),
        status: "False",
        or_event: false,
    }
}

/// A ProxmoxVM `name` expected Warning=True with `reason` and `message`.
pub fn vm_warns(name: &str, reason: &'static str, message: &[&str]) -> Expect {
    Expect {
        type_: "Warning",
        status: "True",
        ..vm_says(name, reason, message)
    }
}

/// A ProviderConfig `name` expected Ready=False with `reason` and `message`.
pub fn config_says(name: &str, reason: &'static str, message: &[&str]) -> Expect {
    Expect {
        kind: "ProviderConfig",
        name: name.into(),
        type_: "Ready",
        reason,
        message: message.iter().map(|m| (*m).to_owned()).collect(),
        status: "False",
        or_event: false,
    }
}

/// A ProviderConfig `name` expected Warning=True with `reason` and `message`.
pub fn config_warns(name: &str, reason: &'static str, message: &[&str]) -> Expect {
    Expect {
        type_: "Warning",
        status: "True",
        ..config_says(name, reason, message)
    }
}

/// A ProviderConfig `name` like the test's `pve` (the sim, its fingerprint
/// pinned, its credentials) with `change` merged into the spec.
pub fn config(sim: &Sim, name: &str, change: Value) -> Value {
    let mut pc = manifests::provider_config(sim, &json!({}));
    pc["metadata"]["name"] = json!(name);
    if let (Some(spec), Some(change)) = (pc["spec"].as_object_mut(), change.as_object()) {
        for (k, v) in change {
            if v.is_null() {
                spec.remove(k);
            } else {
                spec.insert(k.clone(), v.clone());
            }
        }
    }
    pc
}

/// A paused-free, valid VM that uses the ProviderConfig `config`.
pub fn vm_using(name: &str, config: &str) -> Value {
    let mut vm = manifests::vm(name, manifests::imported(json!({})));
    vm["spec"]["providerConfigRef"]["name"] = json!(config);
    vm
}

/// A valid VM with `change` merged into `forProvider`.
pub fn vm_with(name: &str, change: Value) -> Value {
    let mut vm = refused::vm_with(change);
    vm["metadata"]["name"] = json!(name);
    vm
}

/// A Secret with `data` as its string data.
pub fn secret(name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": data,
    })
}

fn resource(kind: &str) -> ApiResource {
    let plural = match kind {
        "ProxmoxVM" => "proxmoxvms",
        "ProviderConfig" => "providerconfigs",
        other => panic!("no expectations of kind {other}"),
    };
    ApiResource {
        group: "proxmox.m.crossplane.io".into(),
        version: "v1alpha1".into(),
        api_version: "proxmox.m.crossplane.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// The condition `type_` of an object, read as JSON (the object may not
/// match the provider's types).
async fn condition(namespace: &str, kind: &str, name: &str, type_: &str) -> Result<Value, String> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(support::client(), namespace, &resource(kind));
    let object = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
    object.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .ok_or_else(|| format!("no {type_} condition yet"))
}

fn check(c: &Value, e: &Expect) -> Result<(), String> {
    let message = c["message"].as_str().unwrap_or_default();
    let ok = c["status"] == e.status
        && c["reason"] == e.reason
        && e.message.iter().all(|m| message.contains(m.as_str()));
    if ok {
        Ok(())
    } else {
        Err(format!("{}/{}: {}", c["status"], c["reason"], message))
    }
}

/// Whether a Warning event about the object has the reason and message.
async fn warned(namespace: &str, e: &Expect) -> bool {
    let events: Api<Event> = Api::namespaced(support::client(), namespace);
    let list = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={}", e.name)))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.iter().any(|ev| {
        let message = ev.message.as_deref().unwrap_or_default();
        ev.type_.as_deref() == Some("Warning")
            && ev.reason.as_deref() == Some(e.reason)
            && e.message.iter().all(|m| message.contains(m.as_str()))
    })
}

/// Waits until every expectation holds; on the deadline, fails listing
/// each one that does not, with what the object says instead.
pub async fn wait_all(namespace: &str, expects: &[Expect]) {
    let mut pending: Vec<&Expect> = expects.iter().collect();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let mut still = vec![];
        let mut why = vec![];
        for e in pending {
            let mut verdict = match condition(namespace, e.kind, &e.name, e.type_).await {
                Ok(c) => check(&c, e),
                Err(complaint) => Err(complaint),
            };
            if verdict.is_err() && e.or_event && warned(namespace, e).await {
                verdict = Ok(());
            }
            if let Err(complaint) = verdict {
                why.push(format!(
                    "{} {}: want {}={}/{} with {:?}, got {complaint}",
                    e.kind, e.name, e.type_, e.status, e.reason, e.message
                ));
                still.push(e);
            }
        }
        if still.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {} objects do not say what is wrong:\n{}",
            still.len(),
            expects.len(),
            why.join("\n")
        );
        pending = still;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Asserts that none of the ProxmoxVMs `names` has a VM on the simulator:
/// a VMID they recorded is not there, or holds a VM that is not theirs
/// (its description carries no owner marker of their uid). The test's
/// provider configs all name the one simulator, and each config allocates
/// VMIDs on its own: a VM of another config may get the VMID a refused VM
/// recorded, which is that VM's, not a create of the refused one.
pub async fn nothing_created(namespace: &str, sim: &Sim, names: &[&str]) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(support::client(), namespace, &resource("ProxmoxVM"));
    let on_sim = sim.vmids().await;
    for name in names {
        let object = api.get(name).await.expect("the ProxmoxVM");
        let vmid = object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("crossplane.io/external-name"))
            .and_then(|v| v.parse::<u32>().ok());
        if let Some(vmid) = vmid
            && on_sim.contains(&vmid)
        {
            let uid = object.metadata.uid.clone().unwrap_or_default();
            let description = sim.config(vmid).await.description.unwrap_or_default();
            assert!(
                !description.contains(&format!("uid={uid}")),
                "{name}: VM {vmid} was created on the simulator for it: {description}"
            );
        }
    }
}
