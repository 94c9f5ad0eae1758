//! The container's connection details (`writeConnectionSecretToRef`), for
//! whatever uses it: decided from the status the plan wrote, so the Secret
//! says what the resource says.

use std::collections::BTreeMap;

use crate::api::condition::find;
use crate::api::vm::ObservedState;
use crate::api::{ConditionType, ProxmoxContainer, ProxmoxContainerStatus, Reason};

/// The Secret's data, when the spec asks for one and the container is
/// this resource's and exists (a guest another resource owns, or none yet,
/// publishes nothing).
pub fn data(
    ct: &ProxmoxContainer,
    status: &ProxmoxContainerStatus,
) -> Option<BTreeMap<String, String>> {
    ct.spec.write_connection_secret_to_ref.as_ref()?;
    let at = &status.at_provider;
    if matches!(at.state, None | Some(ObservedState::Absent)) {
        return None;
    }
    let not_ours = find(&status.conditions, ConditionType::Synced)
        .is_some_and(|c| c.reason == Reason::NotOwned.as_str());
    if not_ours || ct.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let mut data = BTreeMap::from([("vmid".to_owned(), at.vmid?.to_string())]);
    if let Some(node) = &at.node {
        data.insert("node".into(), node.clone());
    }
    if let Some(hostname) = &at.config.hostname {
        data.insert("hostname".into(), hostname.clone());
    }
    // Static addresses only: `dhcp`/`manual`/`auto` name none, and a
    // container's leased addresses are not read (no guest agent).
    let address = |a: &Option<String>| {
        a.as_deref()
            .filter(|a| a.contains(['.', ':']))
            .map(|a| a.split('/').next().unwrap_or(a).to_owned())
    };
    let networks = &at.config.networks;
    let v4 = networks.iter().filter_map(|n| address(&n.ip));
    let v6 = networks.iter().filter_map(|n| address(&n.ip6));
    let addresses: Vec<String> = v4.chain(v6).collect();
    if let Some(first) = addresses.first() {
        data.insert("ipAddress".into(), first.clone());
        data.insert("ipAddresses".into(), addresses.join(","));
    }
    Some(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(secret: bool) -> ProxmoxContainer {
        let mut spec = json!({"forProvider": {
            "template": {"volume": "local:vztmpl/debian.tar.zst"},
            "rootfs": {"storage": "local-lvm", "size": "4Gi"},
        }});
        if secret {
            spec["writeConnectionSecretToRef"] = json!({"name": "cache-conn"});
        }
        serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxContainer",
            "metadata": {"name": "cache", "namespace": "ns", "uid": "u-1"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn status(synced: &str, networks: serde_json::Value) -> ProxmoxContainerStatus {
        serde_json::from_value(json!({
            "atProvider": {
                "vmid": 200, "node": "pve", "state": "running",
                "hostname": "cache", "networks": networks,
            },
            "conditions": [{
                "type": "Synced", "status": if synced == "NotOwned" { "False" } else { "True" },
                "reason": synced, "lastTransitionTime": "2026-12-05T00:00:00Z",
            }],
        }))
        .unwrap()
    }

    #[test]
    fn the_data_says_what_the_status_says() {
        let nets = json!([
            {"slot": "net0", "name": "eth0", "ip": "10.0.0.5/24", "ip6": "fd00::5/64", "firewall": false},
            {"slot": "net1", "name": "eth1", "ip": "dhcp", "ip6": "auto", "firewall": false},
            {"slot": "net2", "name": "eth2", "ip": "10.1.0.7/16", "firewall": false},
        ]);
        let got = data(&container(true), &status("ReconcileSuccess", nets.clone())).unwrap();
        let want: BTreeMap<String, String> = [
            ("vmid", "200"),
            ("node", "pve"),
            ("hostname", "cache"),
            ("ipAddress", "10.0.0.5"),
            ("ipAddresses", "10.0.0.5,10.1.0.7,fd00::5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(got, want);

        let cases = [
            (
                "no Secret asked for",
                container(false),
                status("ReconcileSuccess", nets.clone()),
            ),
            (
                "another resource's guest",
                container(true),
                status("NotOwned", nets.clone()),
            ),
        ];
        for (name, ct, st) in cases {
            assert_eq!(data(&ct, &st), None, "{name}");
        }
        let mut absent = status("ReconcileSuccess", nets.clone());
        absent.at_provider.state = None;
        assert_eq!(data(&container(true), &absent), None, "not created yet");
        let mut deleting = container(true);
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert_eq!(
            data(&deleting, &status("ReconcileSuccess", nets)),
            None,
            "deleting"
        );
        let dhcp_only = status(
            "ReconcileSuccess",
            json!([{"slot": "net0", "name": "eth0", "ip": "dhcp", "firewall": false}]),
        );
        let got = data(&container(true), &dhcp_only).unwrap();
        assert!(
            !got.contains_key("ipAddress") && !got.contains_key("ipAddresses"),
            "{got:?}"
        );
    }
}
