//! Observation: what the plan asked to look at ([`Needs`]), read from
//! Proxmox and Kubernetes into an [`Observation`]. Reads only; nothing here
//! changes anything.
//!
//! The in-flight task is read before the VM, so the VM is at least as fresh
//! as the task's outcome.

mod tasks;
mod vm;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};

use super::error::{Error, is_not_found};
use super::plan::{
    ImageRef, Needs, NodeCandidate, Observation, PasswordState, Sensitive, TemplateLookup,
    TemplateRef,
};
use super::providers::secret_value;
use crate::api::ProxmoxVM;
use pve_client::{self, Client, Resource, ResourceType};

/// Why an observation could not be completed.
#[derive(Debug)]
pub enum Failure {
    /// Proxmox did not answer as needed: the provider config is unusable
    /// for this pass (the plan reports it).
    Proxmox(pve_client::Error),
    /// Kubernetes could not be asked: the pass fails and is retried.
    Kube(Error),
}

impl From<pve_client::Error> for Failure {
    fn from(e: pve_client::Error) -> Self {
        Self::Proxmox(e)
    }
}

/// `/cluster/resources?type=vm`, read at most once per pass.
#[derive(Default)]
pub(super) struct ClusterVms(Option<Vec<Resource>>);

impl ClusterVms {
    pub(super) async fn get(&mut self, client: &Client) -> Result<&[Resource], pve_client::Error> {
        if self.0.is_none() {
            let all = client.cluster_resources(Some(ResourceType::Vm)).await?;
            self.0 = Some(all.into_iter().filter(|r| r.kind == "qemu").collect());
        }
        Ok(self.0.as_deref().unwrap_or_default())
    }
}

/// Observes what `needs` lists. `node_hint` is where the VM is expected
/// (saves a cluster-wide lookup when it is there).
pub async fn observe(
    kube: &kube::Client,
    client: &Client,
    vm: &ProxmoxVM,
    needs: &Needs,
    node_hint: Option<&str>,
) -> Result<Observation, Failure> {
    let mut obs = Observation::default();
    let mut cluster = ClusterVms::default();
    if let Some(task) = &needs.task {
        obs.task = Some(tasks::task_state(client, task).await);
    }
    if let Some(vmid) = needs.vmid {
        obs.vm = vm::vm_state(client, vmid, node_hint, &mut cluster).await?;
    }
    if let Some(node) = &needs.active_tasks_on {
        obs.active_tasks = tasks::active_tasks(client, node).await?;
    }
    obs.images = images(client, &needs.images).await?;
    if needs.nodes {
        obs.nodes = nodes(client).await?;
    }
    if let Some(template) = &needs.template {
        obs.template = Some(template_lookup(cluster.get(client).await?, template));
    }
    if let Some((name, key)) = &needs.password {
        let namespace = vm.namespace().unwrap_or_default();
        obs.password = Some(password(kube, &namespace, name, key).await?);
    }
    Ok(obs)
}

/// Which of the image volumes exist (one content listing per storage).
async fn images(
    client: &Client,
    refs: &[ImageRef],
) -> Result<BTreeMap<String, bool>, pve_client::Error> {
    let mut listed: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut found = BTreeMap::new();
    for r in refs {
        let key = (r.node.clone(), r.storage.clone());
        if !listed.contains_key(&key) {
            let content = client
                .storage_content(&r.node, &r.storage, Some("import"))
                .await?;
            listed.insert(key.clone(), content.into_iter().map(|c| c.volid).collect());
        }
        let present = listed.get(&key).is_some_and(|v| v.contains(&r.volume));
        found.insert(r.volume.clone(), present);
    }
    Ok(found)
}

async fn nodes(client: &Client) -> Result<Vec<NodeCandidate>, pve_client::Error> {
    Ok(client
        .nodes()
        .await?
        .into_iter()
        .map(|n| NodeCandidate {
            online: n.status.as_deref() == Some("online"),
            free_memory: n
                .maxmem
                .unwrap_or_default()
                .saturating_sub(n.mem.unwrap_or_default()),
            name: n.node,
        })
        .collect())
}

/// The clone template by VMID or by (unique) name.
fn template_lookup(vms: &[Resource], wanted: &TemplateRef) -> TemplateLookup {
    let found = |r: &Resource| TemplateLookup::Found {
        vmid: r
            .vmid
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or_default(),
        node: r.node.clone().unwrap_or_default(),
        template: r.template,
    };
    match wanted {
        TemplateRef::Vmid(vmid) => vms
            .iter()
            .find(|r| r.vmid == Some(u64::from(*vmid)))
            .map_or(TemplateLookup::NotFound, found),
        TemplateRef::Name(name) => {
            let matching: Vec<&Resource> = vms
                .iter()
                .filter(|r| r.name.as_deref() == Some(name.as_str()))
                .collect();
            match matching.as_slice() {
                [] => TemplateLookup::NotFound,
                [one] => found(one),
                many => TemplateLookup::Ambiguous(
                    many.iter()
                        .filter_map(|r| r.vmid.and_then(|v| u32::try_from(v).ok()))
                        .collect(),
                ),
            }
        }
    }
}

/// The cloud-init password from a Secret in the VM's namespace.
async fn password(
    kube: &kube::Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<PasswordState, Failure> {
    let secret = match Api::<Secret>::namespaced(kube.clone(), namespace)
        .get(name)
        .await
    {
        Ok(secret) => secret,
        Err(e) if is_not_found(&e) => {
            return Ok(PasswordState::Missing(format!(
                "Secret {namespace}/{name} does not exist"
            )));
        }
        Err(e) => return Err(Failure::Kube(e.into())),
    };
    Ok(match secret_value(&secret, key) {
        Some(value) => PasswordState::Available {
            value: Sensitive::new(value),
            version: secret.resource_version().unwrap_or_default(),
        },
        None => PasswordState::Missing(format!(
            "Secret {namespace}/{name} has no (non-empty) key {key:?}"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(vmid: u64, name: &str, template: bool) -> Resource {
        serde_json::from_value(serde_json::json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "node": "pve",
            "vmid": vmid, "name": name, "template": u8::from(template),
        }))
        .unwrap()
    }

    #[test]
    fn templates_are_found_by_vmid_or_unique_name() {
        let vms = [
            vm(9000, "jammy", true),
            vm(101, "web", false),
            vm(102, "web", false),
        ];
        let want = TemplateLookup::Found {
            vmid: 9000,
            node: "pve".into(),
            template: true,
        };
        assert_eq!(template_lookup(&vms, &TemplateRef::Vmid(9000)), want);
        assert_eq!(
            template_lookup(&vms, &TemplateRef::Name("jammy".into())),
            want
        );
        assert_eq!(
            template_lookup(&vms, &TemplateRef::Name("web".into())),
            TemplateLookup::Ambiguous(vec![101, 102])
        );
        assert_eq!(
            template_lookup(&vms, &TemplateRef::Vmid(1)),
            TemplateLookup::NotFound
        );
    }
}
