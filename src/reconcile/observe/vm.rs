//! The VM named by the VMID: where it is, its power state, lock, config
//! (current and pending) and the guest agent's interfaces.

use super::super::plan::{AgentState, GuestInterface, ObservedVm, Power, VmConfig, VmState};
use super::ClusterVms;
use pve_client::{self, AgentNetwork, Client, vm::AgentConfig, vm::VmStatus};

/// Finds and reads the VM. Looks on `node_hint` first; only when it is not
/// there is the cluster-wide resource list asked (VMs move: HA, migration).
pub(super) async fn vm_state(
    client: &Client,
    vmid: u32,
    node_hint: Option<&str>,
    cluster: &mut ClusterVms,
) -> Result<VmState, pve_client::Error> {
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
            let listed = cluster
                .get(client)
                .await?
                .iter()
                .find(|r| r.vmid == Some(u64::from(vmid)))
                .and_then(|r| r.node.clone());
            let Some(node) = listed else {
                return Ok(VmState::Absent);
            };
            match client.vm_status(&node, vmid).await {
                Ok(status) => (node, status),
                // Destroyed between the two reads.
                Err(pve_client::Error::NotFound { .. }) => return Ok(VmState::Absent),
                Err(e) => return Err(e),
            }
        }
    };
    match read_vm(client, vmid, node, &status).await {
        Err(pve_client::Error::NotFound { .. }) => Ok(VmState::Absent),
        other => other.map(VmState::Present),
    }
}

fn power(status: &VmStatus) -> Power {
    match (status.status.as_str(), status.qmpstatus.as_deref()) {
        ("running", Some("paused" | "suspended" | "prelaunch")) => Power::Paused,
        ("running", _) => Power::Running,
        ("stopped", _) => Power::Stopped,
        _ => Power::Unknown,
    }
}

async fn read_vm(
    client: &Client,
    vmid: u32,
    node: String,
    status: &VmStatus,
) -> Result<ObservedVm, pve_client::Error> {
    let lock = status.lock.clone().filter(|l| !l.is_empty());
    let power = power(status);
    // While locked create/clone Proxmox shows only the lock.
    let config = if matches!(lock.as_deref(), Some("create" | "clone")) {
        None
    } else {
        Some(config(client, &node, vmid).await?)
    };
    let agent_enabled = config
        .as_ref()
        .and_then(|c| c.current.get("agent"))
        .is_some_and(|a| AgentConfig::parse(a).enabled);
    let agent = if power == Power::Running && agent_enabled {
        agent(client, &node, vmid).await
    } else {
        AgentState::NotAsked
    };
    Ok(ObservedVm {
        node,
        power,
        lock,
        template: status.template,
        config,
        agent,
    })
}

/// The current config (with its digest) and what waits for a reboot.
async fn config(client: &Client, node: &str, vmid: u32) -> Result<VmConfig, pve_client::Error> {
    let current = client.vm_config_current(node, vmid).await?.raw;
    let pending = client
        .vm_pending(node, vmid)
        .await?
        .into_iter()
        .filter_map(|e| match (e.pending, e.delete) {
            (Some(value), _) => Some((e.key, Some(value))),
            (None, Some(_)) => Some((e.key, None)),
            (None, None) => None,
        })
        .collect();
    Ok(VmConfig { current, pending })
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
