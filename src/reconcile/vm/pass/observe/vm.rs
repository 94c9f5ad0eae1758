//! The VM named by the VMID: where it is, its power state, lock, config
//! (current and pending) and the guest agent's interfaces.

use std::time::Instant;

use super::Sources;
use crate::reconcile::inventory::ClusterView;
use crate::reconcile::vm::plan::{
    AgentState, GuestInterface, ObservedVm, Power, VmConfig, VmState,
};
use pve_client::{self, AgentNetwork, Client, vm::VmStatus};

/// Finds and reads the VM. Looks on `node_hint` first; only when it is not
/// there is the shared cluster view asked (VMs move: HA, migration).
pub(super) async fn vm_state(
    from: Sources<'_>,
    vmid: u32,
    node_hint: Option<&str>,
    asked: Agent,
) -> Result<VmState, pve_client::Error> {
    let client = from.client;
    let looked = Instant::now();
    let hinted = match node_hint {
        Some(node) => match client.vm_status(node, vmid).await {
            Ok(status) => Some((node.to_owned(), status)),
            // Not there (or no such node): look cluster-wide.
            Err(pve_client::Error::NotFound { .. } | pve_client::Error::Api { .. }) => None,
            Err(e) => return Err(e),
        },
        None => None,
    };
    let (node, status) = match hinted {
        Some(found) => found,
        None => {
            let listed = |view: &ClusterView| view.vms.get(&vmid).map(|vm| vm.node.clone());
            let mut node = listed(from.view().await?.as_ref());
            if node.is_some() && node.as_deref() == node_hint {
                // The view is older than the lookup that just missed the
                // VM there: it was moved (HA, the balancer, a migration) or
                // destroyed meanwhile. A view read after that lookup says
                // where it is now.
                node = listed(from.view_since(looked).await?.as_ref());
            }
            let Some(node) = node else {
                return Ok(VmState::Absent);
            };
            if node_hint == Some(node.as_str()) {
                // Even a view newer than the lookup shows it there: it is
                // between two states this very moment. Look again later
                // rather than take it for gone.
                return Err(pve_client::Error::Transient {
                    status: None,
                    message: format!("VM {vmid} left node {node} while it was being looked up"),
                    may_have_run: false,
                });
            }
            match client.vm_status(&node, vmid).await {
                Ok(status) => (node, status),
                // Destroyed between the two reads.
                Err(pve_client::Error::NotFound { .. }) => return Ok(VmState::Absent),
                Err(e) => return Err(e),
            }
        }
    };
    let lock = status.lock.clone().filter(|l| !l.is_empty());
    let seen = Seen {
        node,
        power: power(&status),
        lock,
        template: status.template,
    };
    match read_vm(client, vmid, seen, asked).await {
        Err(pve_client::Error::NotFound { .. }) => Ok(VmState::Absent),
        other => other.map(VmState::Present),
    }
}

/// Whether a look asks the guest agent, or keeps what it said last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Agent {
    Ask,
    Keep(AgentState),
}

/// A VM whose state is known but for its config (read when `read_config`)
/// and its agent (asked when `ask_agent`): see `known`. `None` when the
/// config is not where the VM was known to be: it moved (HA, its balancer)
/// or went, which only a full look tells apart. A node-local miss never
/// makes a VM absent.
pub(super) async fn carried(
    client: &Client,
    vmid: u32,
    mut vm: ObservedVm,
    read_config: bool,
    ask_agent: bool,
) -> Result<Option<VmState>, pve_client::Error> {
    if read_config {
        vm.config = match config(client, &vm.node, vmid).await {
            Ok(config) => Some(config),
            Err(pve_client::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
    }
    if ask_agent && vm.power == Power::Running && agent_enabled(vm.config.as_ref()) {
        vm.agent = agent(client, &vm.node, vmid).await;
    }
    Ok(Some(VmState::Present(vm)))
}

fn agent_enabled(config: Option<&VmConfig>) -> bool {
    config.is_some_and(VmConfig::agent_enabled)
}

/// What was seen of a VM before its config was read.
struct Seen {
    node: String,
    power: Power,
    lock: Option<String>,
    template: bool,
}

fn power(status: &VmStatus) -> Power {
    match (status.status.as_str(), status.qmpstatus.as_deref()) {
        ("running", Some("paused" | "suspended" | "prelaunch")) => Power::Paused,
        ("running", _) => Power::Running,
        ("stopped", _) => Power::Stopped,
        // Proxmox's other states (`unknown` while a node is out of reach).
        (_, _) => Power::Unknown,
    }
}

async fn read_vm(
    client: &Client,
    vmid: u32,
    seen: Seen,
    asked: Agent,
) -> Result<ObservedVm, pve_client::Error> {
    let Seen {
        node,
        power,
        lock,
        template,
    } = seen;
    // While locked create/clone Proxmox shows only the lock.
    let config = if matches!(lock.as_deref(), Some("create" | "clone")) {
        None
    } else {
        Some(config(client, &node, vmid).await?)
    };
    let agent = if power != Power::Running || !agent_enabled(config.as_ref()) {
        AgentState::NotAsked
    } else {
        match asked {
            Agent::Ask => agent(client, &node, vmid).await,
            Agent::Keep(answer) => answer,
        }
    };
    Ok(ObservedVm {
        node,
        power,
        lock,
        template,
        config,
        agent,
    })
}

/// The current config (with its digest) and what waits for a reboot, in
/// one request: `GET .../pending` lists every key with its current value
/// (`digest` among them), its pending value and pending deletions.
async fn config(client: &Client, node: &str, vmid: u32) -> Result<VmConfig, pve_client::Error> {
    let mut config = VmConfig::default();
    for entry in client.vm_pending(node, vmid).await? {
        if let Some(value) = entry.value {
            config.current.insert(entry.key.clone(), value);
        }
        match (entry.pending, entry.delete) {
            (Some(value), _) => {
                config.pending.insert(entry.key, Some(value));
            }
            (None, Some(_)) => {
                config.pending.insert(entry.key, None);
            }
            (None, None) => {}
        }
    }
    Ok(config)
}

async fn agent(client: &Client, node: &str, vmid: u32) -> AgentState {
    match client.agent_network_interfaces(node, vmid).await {
        Ok(AgentNetwork::Ready(ifaces)) => AgentState::Interfaces(
            ifaces
                .into_iter()
                .map(|i| GuestInterface {
                    name: i.name,
                    mac: i.hardware_address,
                    addresses: i.ip_addresses.into_iter().map(|a| a.address).collect(),
                })
                .collect(),
        ),
        Ok(AgentNetwork::NotReady { message, .. }) => AgentState::NoAnswer(message),
        Err(e) => AgentState::NoAnswer(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProviderConfigKind;
    use crate::reconcile::inventory::Inventory;
    use crate::reconcile::providers::ConfigKey;
    use pve_client::{ClientConfig, Credentials};
    use pve_sim::{SimConfig, Simulator};

    /// A VM that moved after the shared cluster view was read is found
    /// where it went, not reported as an error (issue 20, item 2: HA or its
    /// balancer moving a VM mid-look made Synced flap).
    #[tokio::test]
    async fn a_vm_moved_since_the_view_was_read_is_found_where_it_went() {
        pve_client::install_crypto_provider();
        let sim = Simulator::start(SimConfig {
            time_scale: 0.01,
            nodes: vec!["pve".into(), "pve2".into()],
            ..SimConfig::default()
        })
        .await
        .unwrap();
        let mut config = ClientConfig::new(
            &sim.base_url(),
            Credentials::token_from_str(pve_sim::DEFAULT_API_TOKEN).unwrap(),
        )
        .unwrap();
        config.tls.pinned_fingerprints = vec![sim.fingerprint().parse().unwrap()];
        let client = Client::new(config).unwrap();
        let kube = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
            .unwrap();
        let inventory = Inventory::default();
        let key = ConfigKey {
            kind: ProviderConfigKind::ClusterProviderConfig,
            namespace: String::new(),
            name: "default".into(),
        };
        let (store, _writer) = kube::runtime::reflector::store();
        let memory = crate::reconcile::runtime::memory::Memory::<
            crate::reconcile::runtime::memory::Kept,
        >::default();
        let (images, _image_writer) = kube::runtime::reflector::store();
        let from = Sources {
            images: &images,
            memory: &memory,
            store: &store,
            kube: &kube,
            client: &client,
            inventory: &inventory,
            key: &key,
            max_age: std::time::Duration::from_secs(600),
        };
        // The view is read while template 9000 is on pve ...
        assert_eq!(from.view().await.unwrap().vms[&9000].node, "pve");
        // ... then the balancer moves it.
        let ca = reqwest::Certificate::from_pem(sim.ca_pem().as_bytes()).unwrap();
        let control = reqwest::Client::builder()
            .tls_certs_only([ca])
            .build()
            .unwrap();
        let answer = control
            .post(format!("{}/_sim/migrate", sim.base_url()))
            .json(&serde_json::json!({"vmid": 9000, "node": "pve2"}))
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success());
        for _ in 0..200 {
            let resources = client.cluster_resources(None).await.unwrap();
            let moved = resources
                .iter()
                .any(|r| r.vmid == Some(9000) && r.node.as_deref() == Some("pve2"));
            if moved {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let seen = vm_state(from, 9000, Some("pve"), Agent::Ask).await;
        match seen {
            Ok(VmState::Present(vm)) => assert_eq!(vm.node, "pve2"),
            other => panic!("want the VM on pve2, got {other:?}"),
        }
    }

    fn status(s: &str, qmp: Option<&str>) -> VmStatus {
        serde_json::from_value(serde_json::json!({"vmid": 100, "status": s, "qmpstatus": qmp}))
            .unwrap()
    }

    #[test]
    fn power_from_status_and_qmp_status() {
        assert_eq!(power(&status("running", Some("running"))), Power::Running);
        assert_eq!(power(&status("running", Some("paused"))), Power::Paused);
        assert_eq!(power(&status("stopped", None)), Power::Stopped);
        assert_eq!(power(&status("unknown", None)), Power::Unknown);
    }
}
