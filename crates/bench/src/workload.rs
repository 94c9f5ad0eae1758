//! The ProxmoxVMs of a run: N VMs importing the seeded cloud image, with no
//! `vmid` and no `node` and every simulated node allowed; applied by the
//! admin, watched until Ready, deleted, watched until gone.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::clock::now;

/// The image every VM imports (pve-sim seeds it on every node).
pub const IMAGE: &str = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2";
/// The size the imported 3.5 GiB disk is grown to (one resize task).
pub const DISK_SIZE_GIB: u64 = 20;
/// Memory per VM, MiB.
pub const MEMORY_MIB: u64 = 1024;

/// The name of VM `i` of a run.
pub fn vm_name(i: usize) -> String {
    format!("vm-{i:04}")
}

/// ProxmoxVM `name`: examples/vm-100.yaml without `vmid` and `node`, with
/// `allowedNodes`.
pub fn manifest(name: &str, namespace: &str, config: &str, nodes: &[String]) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxVM",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": config},
            "forProvider": {
                "allowedNodes": nodes,
                "cpu": {"cores": 2},
                "memory": format!("{MEMORY_MIB}Mi"),
                "disks": [{
                    "slot": "scsi0",
                    "storage": "local-lvm",
                    "importFrom": IMAGE,
                    "size": format!("{DISK_SIZE_GIB}Gi"),
                }],
                "networks": [{"slot": "net0", "bridge": "vmbr0"}],
                "cloudInit": {
                    "user": "ubuntu",
                    "ipConfigs": [{"interface": "net0", "ip": "dhcp"}],
                },
                "agent": {"enabled": true},
                "tags": ["bench"],
            },
        },
    })
}

/// `vm` with a guest firewall of its own when `firewall`: enabled, a
/// policy, and two rules (SSH from a network, ICMP from anywhere), as a
/// team protecting each VM would write it.
pub fn with_firewall(mut vm: Value, firewall: bool) -> Value {
    if firewall {
        vm["spec"]["forProvider"]["firewall"] = json!({
            "policyIn": "DROP",
            "rules": [
                {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22",
                 "source": {"cidr": "10.0.0.0/8"}, "comment": "ssh"},
                {"type": "in", "action": "ACCEPT", "proto": "icmp"},
            ],
        });
    }
    vm
}

fn resource() -> ApiResource {
    ApiResource::erase::<provider_proxmox::api::ProxmoxVM>(&())
}

pub fn api(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &resource())
}

/// What the watch saw of one ProxmoxVM.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct VmState {
    pub created_at: f64,
    pub ready_at: Option<f64>,
    /// When the GuestAgent condition first became True (the VM's
    /// addresses are in its status from then on).
    #[serde(default)]
    pub agent_at: Option<f64>,
    pub gone_at: Option<f64>,
    /// Distinct `crossplane.io/external-name` values, in order: one per
    /// VMID the provider recorded for it.
    pub external_names: Vec<String>,
    pub node: Option<String>,
    pub ready_reason: String,
    pub synced_reason: String,
    pub synced_message: String,
    /// Whether the provider wrote any status at all.
    pub touched: bool,
}

/// Every VM of a run, updated by a watch.
#[derive(Clone, Default)]
pub struct Tracker {
    vms: Arc<Mutex<BTreeMap<String, VmState>>>,
    deleting: Arc<std::sync::atomic::AtomicBool>,
    /// A label selector: only these ProxmoxVMs are the run's (the fleet's
    /// template VMs, made by the provider, are not). `None`: all of the
    /// namespace.
    selector: Option<String>,
}

impl Tracker {
    /// A tracker of the ProxmoxVMs with these labels only.
    pub fn selecting(selector: &str) -> Self {
        Self {
            selector: Some(selector.to_owned()),
            ..Self::default()
        }
    }

    /// Whether the run's VMs are being deleted.
    pub fn deleting(&self) -> bool {
        self.deleting.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, VmState>> {
        self.vms.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn snapshot(&self) -> BTreeMap<String, VmState> {
        self.lock().clone()
    }

    pub fn count(&self, f: impl Fn(&VmState) -> bool) -> usize {
        self.lock().values().filter(|v| f(v)).count()
    }

    fn created(&self, name: &str, at: f64) {
        self.lock().entry(name.to_owned()).or_default().created_at = at;
    }

    fn observe(&self, object: &DynamicObject, at: f64) {
        let Some(name) = object.metadata.name.clone() else {
            return;
        };
        let mut vms = self.lock();
        let vm = vms.entry(name).or_default();
        if let Some(ext) = object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("crossplane.io/external-name"))
            && vm.external_names.last() != Some(ext)
        {
            vm.external_names.push(ext.clone());
        }
        let status = object.data.get("status");
        let condition = |type_: &str| -> Option<&Value> {
            status?
                .get("conditions")?
                .as_array()?
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
        };
        let text = |c: Option<&Value>, key: &str| {
            c.and_then(|c| c.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let ready = condition("Ready");
        let synced = condition("Synced");
        vm.touched |= ready.is_some() || synced.is_some();
        vm.ready_reason = text(ready, "reason");
        vm.synced_reason = text(synced, "reason");
        vm.synced_message = text(synced, "message");
        if let Some(node) = status
            .and_then(|s| s.pointer("/atProvider/node"))
            .and_then(Value::as_str)
        {
            vm.node = Some(node.to_owned());
        }
        if vm.ready_at.is_none() && text(ready, "status") == "True" {
            vm.ready_at = Some(at);
        }
        if vm.agent_at.is_none() && text(condition("GuestAgent"), "status") == "True" {
            vm.agent_at = Some(at);
        }
    }

    fn gone(&self, name: &str, at: f64) {
        if let Some(vm) = self.lock().get_mut(name) {
            vm.gone_at.get_or_insert(at);
        }
    }

    /// Watches the namespace until the task is aborted.
    pub fn watch(&self, api: Api<DynamicObject>) -> tokio::task::JoinHandle<()> {
        let tracker = self.clone();
        tokio::spawn(async move {
            let mut listed: Vec<String> = Vec::new();
            let config = match &tracker.selector {
                Some(s) => watcher::Config::default().labels(s),
                None => watcher::Config::default(),
            };
            let mut events = watcher(api, config).boxed();
            loop {
                match events.try_next().await {
                    Ok(Some(event)) => tracker.handle(event, &mut listed),
                    Ok(None) => return,
                    // The watcher recovers by itself; pause before asking again.
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        })
    }

    fn handle(&self, event: watcher::Event<DynamicObject>, listed: &mut Vec<String>) {
        let at = now();
        match event {
            watcher::Event::Apply(o) => self.observe(&o, at),
            watcher::Event::Delete(o) => {
                if let Some(name) = o.metadata.name.as_deref() {
                    self.gone(name, at);
                }
            }
            watcher::Event::Init => listed.clear(),
            watcher::Event::InitApply(o) => {
                listed.extend(o.metadata.name.clone());
                self.observe(&o, at);
            }
            // A relist: what it did not list was deleted meanwhile (only
            // possible once deletion began; earlier, a VM created after
            // the list was taken just has not been seen yet).
            watcher::Event::InitDone => {
                if self.deleting.load(std::sync::atomic::Ordering::Relaxed) {
                    let names: Vec<String> = self.lock().keys().cloned().collect();
                    for name in names.iter().filter(|n| !listed.contains(n)) {
                        self.gone(name, at);
                    }
                }
            }
        }
    }
}

/// Requests to the API server at once while applying or deleting the run.
const IN_FLIGHT: usize = 16;

/// Creates the VMs ([`IN_FLIGHT`] at a time, as `kubectl apply` of a large file
/// would be about as fast) and records when each was accepted.
pub async fn apply(
    api: &Api<DynamicObject>,
    tracker: &Tracker,
    manifests: Vec<Value>,
) -> anyhow::Result<()> {
    futures::stream::iter(manifests)
        .map(|manifest| async move {
            let object: DynamicObject =
                serde_json::from_value(manifest).context("a ProxmoxVM manifest")?;
            let name = object.metadata.name.clone().unwrap_or_default();
            api.create(&PostParams::default(), &object)
                .await
                .with_context(|| format!("creating ProxmoxVM {name}"))?;
            tracker.created(&name, now());
            anyhow::Ok(())
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Deletes every ProxmoxVM the tracker follows (those of the run),
/// [`IN_FLIGHT`] requests at a time as they were created. Not one delete-collection
/// request: the API server deletes a collection's objects one after the
/// other within that request, and at 10,000 ProxmoxVMs it outlasted the
/// server's 60 s request timeout (the connection closed before the answer).
pub async fn delete_all(api: &Api<DynamicObject>, tracker: &Tracker) -> anyhow::Result<()> {
    tracker
        .deleting
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let names: Vec<String> = tracker.lock().keys().cloned().collect();
    futures::stream::iter(names)
        .map(|name| async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => anyhow::Ok(()),
                // Gone already: nothing left to delete.
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                Err(e) => Err(e).with_context(|| format!("deleting ProxmoxVM {name}")),
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Where the VMs that are not done are, by Synced reason (a sample message
/// each), for the progress lines and the account of a stall.
pub fn breakdown(vms: &BTreeMap<String, VmState>, done: impl Fn(&VmState) -> bool) -> String {
    let mut by_reason: HashMap<String, (usize, String)> = HashMap::new();
    for vm in vms.values().filter(|v| !done(v)) {
        let reason = if vm.touched {
            vm.synced_reason.clone()
        } else {
            "no status yet".to_owned()
        };
        let entry = by_reason
            .entry(reason)
            .or_insert((0, vm.synced_message.clone()));
        entry.0 += 1;
    }
    let mut rows: Vec<_> = by_reason.into_iter().collect();
    rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    rows.iter()
        .map(|(reason, (n, message))| {
            let message: String = message.chars().take(140).collect();
            if message.is_empty() {
                format!("{n} {reason}")
            } else {
                format!("{n} {reason} (e.g. \"{message}\")")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, ext: Option<&str>, status: Value) -> DynamicObject {
        let mut o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxVM",
            "metadata": {"name": name}, "status": status,
        }))
        .unwrap();
        if let Some(ext) = ext {
            o.metadata.annotations = Some(
                [("crossplane.io/external-name".to_owned(), ext.to_owned())]
                    .into_iter()
                    .collect(),
            );
        }
        o
    }

    #[test]
    fn the_tracker_records_ready_vmids_and_reasons() {
        let t = Tracker::default();
        t.created("a", 1.0);
        t.observe(&object("a", Some("100"), json!({})), 2.0);
        t.observe(&object("a", Some("100"), json!({})), 2.5);
        let waiting = json!({"conditions": [
            {"type": "Synced", "status": "True", "reason": "WaitingForCapacity", "message": "2 of 2 in use"},
            {"type": "Ready", "status": "False", "reason": "Creating"}]});
        t.observe(&object("a", Some("101"), waiting), 3.0);
        let vms = t.snapshot();
        assert_eq!(vms["a"].external_names, ["100", "101"]);
        assert_eq!(
            breakdown(&vms, |v| v.ready_at.is_some()),
            "1 WaitingForCapacity (e.g. \"2 of 2 in use\")"
        );
        let ready = json!({"atProvider": {"node": "pve2"}, "conditions": [
            {"type": "Ready", "status": "True", "reason": "Available"}]});
        t.observe(&object("a", Some("101"), ready), 4.0);
        t.observe(&object("a", Some("101"), json!({})), 5.0);
        let vm = &t.snapshot()["a"];
        assert_eq!((vm.ready_at, vm.node.as_deref()), (Some(4.0), Some("pve2")));
        assert_eq!(vm.created_at, 1.0);
    }

    #[test]
    fn the_manifest_has_no_vmid_and_no_node() {
        let m = manifest("vm-0001", "ns", "cfg", &["pve1".into(), "pve2".into()]);
        let p = &m["spec"]["forProvider"];
        assert!(p.get("vmid").is_none() && p.get("node").is_none());
        assert_eq!(p["allowedNodes"], json!(["pve1", "pve2"]));
        assert_eq!(p["disks"][0]["importFrom"], IMAGE);
    }
}
