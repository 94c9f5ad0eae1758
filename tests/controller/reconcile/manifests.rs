//! The manifests tests apply.

use serde_json::{Value, json};

use super::Sim;

/// The credentials Secret the ProviderConfig names (the sim's default token).
pub fn credentials() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pve-credentials"},
        "stringData": {"tokenId": "root@pam!sim", "secret": "pve-sim-secret"},
    })
}

/// ProviderConfig `pve`: the sim, its fingerprint pinned, fast polling and
/// drift checks; `extra` is merged into the spec (one level deep).
pub fn provider_config(sim: &Sim, extra: &Value) -> Value {
    let mut spec = json!({
        "endpoint": sim.handle.base_url(),
        "credentials": {"source": "Secret", "secretRef": {"name": "pve-credentials"}},
        "tls": {"fingerprint": sim.handle.fingerprint()},
        "tasks": {"pollInterval": "500ms", "timeout": "10m", "shutdownTimeout": "5s"},
        "resyncInterval": "5s",
        // A full look at each VM at rest every 5 s (the default is 15
        // minutes): drift made by hand that only a full look sees (the
        // rest of the config, the firewall) is found within the tests'
        // patience. `lifecycle::at_rest_…` sets a day for the coarse look.
        "fullLookInterval": "5s",
        "limits": {"maxConcurrentRequests": 16, "requestsPerSecond": 200},
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            match (spec.get_mut(k), v) {
                (Some(Value::Object(old)), Value::Object(new)) => {
                    old.extend(new.clone());
                }
                _ => {
                    spec.insert(k.clone(), v.clone());
                }
            }
        }
    }
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProviderConfig",
        "metadata": {"name": "pve"},
        "spec": spec,
    })
}

/// A ProxmoxVM using ProviderConfig `pve`.
pub fn vm(name: &str, for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxVM",
        "metadata": {"name": name},
        "spec": {
            "forProvider": for_provider,
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

/// The seeded Ubuntu image.
pub const UBUNTU: &str = "local:import/ubuntu-24.04-server-cloudimg-amd64.qcow2";

/// A VM imported from the seeded Ubuntu image, grown to 8Gi.
pub fn imported(node_and_more: Value) -> Value {
    let mut fp = json!({
        "node": "pve",
        "memory": "2Gi",
        "cpu": {"cores": 2},
        "disks": [{"slot": "scsi0", "storage": "local-lvm", "importFrom": UBUNTU, "size": "8Gi"}],
        "networks": [{"slot": "net0", "bridge": "vmbr0"}],
        "cloudInit": {"user": "ubuntu", "ipConfigs": [{"interface": "net0", "ip": "dhcp"}]},
        "agent": {"enabled": true},
        "tags": ["test"],
    });
    if let (Some(fp), Some(more)) = (fp.as_object_mut(), node_and_more.as_object()) {
        fp.extend(more.clone());
    }
    fp
}
