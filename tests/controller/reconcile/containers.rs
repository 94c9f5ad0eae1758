//! ProxmoxContainer helpers: manifests, reads, waits.

use kube::Api;
use kube::api::{Patch, PatchParams};
use provider_proxmox::api::ProxmoxContainer;
use provider_proxmox::api::condition::Condition;
use serde_json::{Value, json};

use super::{DEADLINE, Env};
use crate::support;

/// The Debian template the sim seeds.
pub const DEBIAN: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

/// A ProxmoxContainer using ProviderConfig `pve`.
pub fn container(name: &str, for_provider: Value) -> Value {
    json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxContainer",
        "metadata": {"name": name},
        "spec": {
            "forProvider": for_provider,
            "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
        },
    })
}

/// A container on `pve` from the seeded Debian template; `more` is merged
/// in (one level deep).
pub fn debian(more: Value) -> Value {
    let mut fp = json!({
        "node": "pve",
        "template": {"volume": DEBIAN},
        "rootfs": {"storage": "local-lvm", "size": "4Gi"},
        "cpu": {"cores": 1},
        "memory": "512Mi",
        "networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "dhcp"}],
        "tags": ["test"],
    });
    if let (Some(fp), Some(more)) = (fp.as_object_mut(), more.as_object()) {
        fp.extend(more.clone());
    }
    fp
}

/// The condition of a type.
pub fn ct_condition<'a>(ct: &'a ProxmoxContainer, type_: &str) -> Option<&'a Condition> {
    ct.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// The status in one line, for failure messages.
pub fn ct_brief(ct: &ProxmoxContainer) -> String {
    match &ct.status {
        Some(s) => format!(
            "vmid {:?} state {:?} task {:?} | {:?}",
            s.at_provider.vmid,
            s.at_provider.state,
            s.at_provider.task.as_ref().map(|t| &t.summary),
            s.conditions
                .iter()
                .map(|c| format!(
                    "{}={:?}/{}: {}",
                    c.type_,
                    c.status,
                    c.reason,
                    c.message.as_deref().unwrap_or_default()
                ))
                .collect::<Vec<_>>()
        ),
        None => "(none)".into(),
    }
}

impl Env {
    pub fn containers(&self) -> Api<ProxmoxContainer> {
        Api::namespaced(support::client(), self.ns.name())
    }

    pub async fn container(&self, name: &str) -> ProxmoxContainer {
        self.containers()
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("GET ProxmoxContainer {name}: {e}"))
    }

    /// Merge-patches a ProxmoxContainer.
    pub async fn patch_container(&self, name: &str, patch: Value) {
        self.containers()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patching ProxmoxContainer {name}: {e}"));
    }

    /// Polls the ProxmoxContainer until `check` accepts it.
    pub async fn wait_container<T>(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ProxmoxContainer) -> Result<T, String>,
    ) -> T {
        let api = self.containers();
        support::poll(
            &format!("ProxmoxContainer {name}: {what}"),
            DEADLINE,
            || {
                let api = api.clone();
                let check = &check;
                async move {
                    let ct = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
                    check(&ct).map_err(|why| format!("{why}; status: {}", ct_brief(&ct)))
                }
            },
        )
        .await
    }

    /// Waits for Ready=True and Synced=True; returns the VMID.
    pub async fn wait_container_ready(&self, name: &str) -> u32 {
        self.wait_container(name, "Ready and Synced", |ct| {
            let up = |t| ct_condition(ct, t).is_some_and(super::is_true);
            let vmid = ct
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("crossplane.io/external-name"))
                .and_then(|v| v.parse().ok());
            match (up("Ready") && up("Synced"), vmid) {
                (true, Some(vmid)) => Ok(vmid),
                _ => Err("not Ready and Synced yet".into()),
            }
        })
        .await
    }

    /// Waits until the ProxmoxContainer is gone.
    pub async fn wait_container_gone(&self, name: &str) {
        let api = self.containers();
        support::poll(
            &format!("ProxmoxContainer {name} to be gone"),
            DEADLINE,
            || {
                let api = api.clone();
                async move {
                    match api.get_opt(name).await {
                        Ok(None) => Ok(()),
                        Ok(Some(ct)) => Err(format!("still there: {}", ct_brief(&ct))),
                        Err(e) => Err(format!("GET: {e}")),
                    }
                }
            },
        )
        .await
    }
}
