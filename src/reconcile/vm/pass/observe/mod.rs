//! Observation: what the plan asked to look at ([`Needs`]), read from
//! Proxmox and Kubernetes into an [`Observation`]. Reads only; nothing here
//! changes anything.
//!
//! The in-flight task is read before the VM, so the VM is at least as fresh
//! as the task's outcome.

pub(crate) mod clones;
mod downloads;
mod ha;
pub(crate) mod known;
mod seed;
mod vm;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};

pub use downloads::{resolved_refusals, rooms};

use crate::api::ProxmoxVM;
use crate::reconcile::common::image_cache::{self as cache, Images};
use crate::reconcile::error::{Error, is_not_found};
use crate::reconcile::identity::Identity;
use crate::reconcile::inventory::{ClusterView, Inventory};
use crate::reconcile::managed::{guest_firewall, pools, tasks};
use crate::reconcile::providers::{ConfigKey, secret_value};
use crate::reconcile::runtime::memory::{Kept, Memory};
use crate::reconcile::vm::plan::{
    Depth, ImageRef, Needs, Observation, PasswordState, PoolView, Power, Sensitive, TaskState,
    TemplateLookup, TemplateRef, VmState,
};
use pve_client::{self, Client};

/// Why an observation could not be completed.
#[derive(Debug)]
pub enum Failure {
    /// Proxmox did not answer as needed.
    Proxmox(pve_client::Error),
    /// Kubernetes could not be asked: the pass fails and is retried.
    Kube(Error),
}

impl From<pve_client::Error> for Failure {
    fn from(e: pve_client::Error) -> Self {
        Self::Proxmox(e)
    }
}

/// Where an observation reads from: the config's client and its shared
/// cluster view.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    /// Kubernetes (the password Secret).
    pub kube: &'a kube::Client,
    /// The config's Proxmox client.
    pub client: &'a Client,
    /// The shared cluster views.
    pub inventory: &'a Inventory,
    /// Which config.
    pub key: &'a ConfigKey,
    /// How old a cluster view may be (the poll interval).
    pub max_age: Duration,
    /// The controller's cache of ProxmoxVMs (a clone's template may be
    /// declared by one).
    pub store: &'a Store<DeserializeGuard<ProxmoxVM>>,
    /// What earlier passes saw of each resource's VM.
    pub memory: &'a Memory<Kept>,
    /// The controller's cache of ProxmoxImages (`clone.image`).
    pub images: &'a Images,
}

impl Sources<'_> {
    /// The cluster, read at `since` or later.
    pub async fn view_since(
        &self,
        since: std::time::Instant,
    ) -> Result<Arc<ClusterView>, pve_client::Error> {
        self.inventory
            .view_since(self.key, self.client, since)
            .await
    }

    /// The cluster, read at most one poll interval ago.
    pub async fn view(&self) -> Result<Arc<ClusterView>, pve_client::Error> {
        self.inventory
            .view(self.key, self.client, self.max_age)
            .await
    }
}

/// Observes what `needs` lists. `node_hint` is where the VM is expected
/// (saves a cluster-wide lookup when it is there).
pub async fn observe(
    from: Sources<'_>,
    (vm, id): (&ProxmoxVM, &Identity),
    needs: &Needs,
    node_hint: Option<&str>,
    depth: Depth,
) -> Result<Observation, Failure> {
    let client = from.client;
    let mut obs = Observation::default();
    if let Some(upid) = &needs.task {
        let state = tasks::task_state(client, upid).await;
        // While its task runs, nothing about the VM can change what the
        // pass does (it waits for the task): looking costs requests per VM
        // per poll and tells nothing. The VM is looked at once the task
        // has ended, in the same pass that sees the end.
        let running = matches!(state, TaskState::Running { .. });
        obs.task = Some(state);
        if running {
            return Ok(obs);
        }
    }
    // Whether this process knows every task it started for the resource
    // to be recorded in its status (or ended): then no running task of ours
    // can be missing from it, and the node's running tasks need not be
    // listed to find one.
    let mut sure = false;
    if let Some(vmid) = needs.vmid {
        let look = look_at_vm(from, (vm, id), vmid, obs.task.as_ref(), node_hint, depth).await?;
        obs.vm = look.state;
        obs.depth = look.depth;
        sure = look.sure;
    }
    // Only when the spec declares a firewall, in a pass that looks at the
    // VM in full: while it is created or changed, after any write, and at
    // rest once per `fullLookInterval`. A coarse look, which does not read
    // it, follows only a full look that found it as asked, and may only
    // conclude that nothing is to be done (the status keeps the firewall
    // last seen).
    if let (true, Some(vmid), Some(spec), VmState::Present(seen)) = (
        needs.firewall,
        needs.vmid,
        vm.spec.for_provider.firewall.as_ref(),
        &obs.vm,
    ) && seen.config.is_some()
        && obs.depth == Depth::Full
    {
        let guest = pve_client::Guest {
            kind: pve_client::GuestType::Qemu,
            node: seen.node.clone(),
            vmid,
        };
        let view = guest_firewall::view((from.kube, client), &guest, spec, &id.namespace).await;
        obs.firewall = Some(view.map_err(|e| match e {
            guest_firewall::ReadError::Proxmox(e) => Failure::Proxmox(e),
            guest_firewall::ReadError::Kube(e) => Failure::Kube(e.into()),
        })?);
    }
    if needs.linked_clones
        && let (VmState::Present(seen), Some(vmid)) = (&obs.vm, needs.vmid)
        && seen.template
        && let Some(config) = &seen.config
    {
        obs.linked_clones = Some(clones::linked(client, &seen.node, vmid, config).await?);
    }
    obs.images = images(client, &needs.images).await?;
    for name in &needs.named_images {
        // About to be imported: read afresh (see `managed::images::named`).
        let seen =
            crate::reconcile::managed::images::named(from.kube, from.images, &id.namespace, name)
                .await
                .map_err(|e| Failure::Kube(e.into()))?;
        obs.named_images.insert(name.clone(), seen);
    }
    if let Some(name) = &needs.backup {
        obs.backup = Some(
            crate::reconcile::managed::backups::lookup(from.kube, &id.namespace, name)
                .await
                .map_err(|e| Failure::Kube(e.into()))?,
        );
    }
    // A missing image may be downloading already (another resource's task).
    let downloading = obs.images.values().any(|present| !present);
    if let Some(node) = needs
        .active_tasks_on
        .as_ref()
        .filter(|_| !sure || downloading)
    {
        obs.active_tasks = tasks::active_tasks(client, node).await?;
    }
    // Where the disks imported from other VMs come from, for the clone
    // rule: from the shared cluster view, no request of their own.
    if !needs.import_sources.is_empty() && obs.depth != Depth::Idle {
        let view = from.view().await?;
        obs.import_sources = needs
            .import_sources
            .iter()
            .map(|vmid| (*vmid, template_lookup(&view, &TemplateRef::Vmid(*vmid))))
            .collect();
    }
    match &needs.template {
        Some(TemplateRef::Image { name, node }) => {
            // From the cache of images: no request. The template's VMID is
            // then looked up as a `templateVmid` is.
            let image = cache::lookup(from.images, &id.namespace, name);
            let ready = node
                .as_deref()
                .and_then(|n| Some((image.ready_on(n)?.vmid?, n)));
            if let Some((vmid, node)) = ready {
                let view = from.view().await?;
                obs.template = Some(clones::image_template(client, &view, vmid, node).await?);
            }
            obs.image = Some(image);
        }
        Some(template @ (TemplateRef::Vmid(_) | TemplateRef::Name(_))) => {
            let looked_up = template_lookup(from.view().await?.as_ref(), template);
            obs.template = Some(clones::template_source(client, from.store, vm, looked_up).await?);
        }
        None => {}
    }
    if let (true, Some(vmid)) = (needs.ha, needs.vmid) {
        obs.ha = Some(ha::ha_view(client, vmid).await?);
    }
    if let (true, Some(vmid), Some(wanted), VmState::Present(_)) = (
        needs.pool,
        needs.vmid,
        vm.spec.for_provider.pool.as_deref(),
        &obs.vm,
    ) {
        obs.pool = pool_view(from, vmid, wanted).await?;
    }
    if let (Some(spec), Some(vmid)) = (
        needs
            .seed
            .then_some(())
            .and(vm.spec.for_provider.custom_cloud_init.as_ref()),
        needs.vmid,
    ) {
        // The ISOs are on the VM's node (or where it was last seen).
        let (node, running) = match &obs.vm {
            VmState::Present(v) => (Some(v.node.as_str()), v.power == Power::Running),
            VmState::Absent | VmState::Unknown => (node_hint, false),
        };
        if let Some(node) = node {
            let read = seed::SeedRead {
                namespace: &id.namespace,
                spec,
                vmid,
                node,
                deleting: vm.metadata.deletion_timestamp.is_some(),
                running,
            };
            let mut seen = seed::seed_view(from.kube, client, read).await?;
            seen.shared = from.view().await?.shared_storages.contains(&spec.storage);
            obs.seed = Some(seen);
        }
    }
    if let Some((name, key)) = &needs.password {
        obs.password = Some(password(from.kube, &id.namespace, name, key).await?);
    }
    Ok(obs)
}

/// The VM's pool membership ([`pools::member_of`]); `None` while the
/// shared cluster view does not list the VM.
async fn pool_view(
    from: Sources<'_>,
    vmid: u32,
    wanted: &str,
) -> Result<Option<PoolView>, pve_client::Error> {
    let view = from.view().await?;
    let Some(listed) = view.vms.get(&vmid) else {
        return Ok(None);
    };
    let listed = listed.pool.clone();
    let member_of = pools::member_of(from.client, ("qemu", vmid), listed, wanted).await?;
    Ok(Some(PoolView { member_of }))
}

/// What a look at the VM found.
struct Looked {
    state: VmState,
    depth: Depth,
    /// Nothing this process sent the VM is unaccounted for (see `observe`).
    sure: bool,
}

/// Looks at the VM as what is known of it allows (see [`known`]), and
/// remembers what was seen.
async fn look_at_vm(
    from: Sources<'_>,
    (vm, id): (&ProxmoxVM, &Identity),
    vmid: u32,
    task: Option<&TaskState>,
    node_hint: Option<&str>,
    depth: Depth,
) -> Result<Looked, Failure> {
    let (before, mark) = from.memory.recall(&id.uid);
    let before = before.and_then(|l| l.get::<known::Known>());
    let recorded = vm.status.as_ref().and_then(|s| s.at_provider.task.as_ref());
    let recorded = match (recorded, task) {
        (Some(t), Some(state)) => Some(known::RecordedTask {
            action: t.action,
            state,
            node: t.node.as_str(),
            type_: t.type_.as_str(),
        }),
        (Some(_), None) | (None, _) => None,
    };
    let now = Instant::now();
    // Known, and either untouched since or touched by the task recorded.
    let sure = before
        .as_ref()
        .is_some_and(|k| k.vmid == vmid && (!k.touched || recorded.is_some()));
    let mut look = known::look(before.as_ref(), vmid, recorded, depth, now);
    if look == known::Look::Full && recorded.is_none() && vm.metadata.deletion_timestamp.is_some() {
        let view = from.view().await?;
        if let Some(deleting) =
            known::look_to_delete(before.as_ref(), vmid, view.vms.get(&vmid), now)
        {
            look = deleting;
        }
    }
    // What the view showed before the VM is read: the shape a later coarse
    // look compares with (read after, it could hide a change made between).
    let mut depth = Depth::Full;
    let mut shape = before.as_ref().and_then(|k| k.shape.clone());
    if !matches!(look, known::Look::Known(_)) {
        let listed = from.view().await?.vms.get(&vmid).cloned();
        if look == known::Look::Idle {
            look = match known::coarse(before.as_ref(), vmid, listed.as_ref()) {
                Some(coarse) => {
                    depth = Depth::Idle;
                    coarse
                }
                None => known::Look::Full,
            };
        }
        if depth == Depth::Full {
            shape = listed;
        }
    }
    let uptime = shape.as_ref().and_then(|s| s.uptime);
    // A full look keeps the agent's answer while it holds (see `known`).
    let agent = match known::kept_agent(before.as_ref(), vmid, uptime, now) {
        Some(answer) => vm::Agent::Keep(answer),
        None => vm::Agent::Ask,
    };
    let asks = agent == vm::Agent::Ask;
    let (state, asked_agent) = match look {
        known::Look::Known(state) => (state, false),
        known::Look::AfterTask {
            vm,
            read_config,
            ask_agent,
        } => match vm::carried(from.client, vmid, vm, read_config, ask_agent).await? {
            Some(state) => (state, ask_agent),
            None => {
                depth = Depth::Full;
                (vm::vm_state(from, vmid, node_hint, agent).await?, asks)
            }
        },
        known::Look::Idle | known::Look::Full => {
            (vm::vm_state(from, vmid, node_hint, agent).await?, asks)
        }
    };
    let kept = known::remember(before.as_ref(), vmid, &state, asked_agent, uptime, now)
        .map(|k| known::Known { shape, ..k });
    from.memory
        .remember(&id.uid, from.key, kept.map(Kept::new), mark);
    Ok(Looked { state, depth, sure })
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

/// The clone template by VMID or by (unique) name.
fn template_lookup(view: &ClusterView, wanted: &TemplateRef) -> TemplateLookup {
    let found = |vmid: u32| {
        view.vms
            .get(&vmid)
            .map_or(TemplateLookup::NotFound, |vm| TemplateLookup::Found {
                vmid,
                node: vm.node.clone(),
                template: vm.template,
                pool: vm.pool.clone(),
                tags: vm.tags.clone(),
            })
    };
    match wanted {
        TemplateRef::Vmid(vmid) => found(*vmid),
        TemplateRef::Name(name) => {
            let mut matching: Vec<u32> = view
                .vms
                .iter()
                .filter(|(_, vm)| vm.name.as_deref() == Some(name.as_str()))
                .map(|(vmid, _)| *vmid)
                .collect();
            matching.sort_unstable();
            match matching.as_slice() {
                [] => TemplateLookup::NotFound,
                [one] => found(*one),
                [_, _, ..] => TemplateLookup::Ambiguous(matching),
            }
        }
        // An image's template is found through the image (see `observe`).
        TemplateRef::Image { .. } => TemplateLookup::NotFound,
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

    fn view() -> ClusterView {
        ClusterView::from_resources(
            serde_json::from_value(serde_json::json!([
                {"id": "qemu/9000", "type": "qemu", "node": "pve", "vmid": 9000,
                 "name": "jammy", "template": 1},
                {"id": "qemu/101", "type": "qemu", "node": "pve", "vmid": 101, "name": "web"},
                {"id": "qemu/102", "type": "qemu", "node": "pve", "vmid": 102, "name": "web"},
            ]))
            .unwrap(),
        )
    }

    #[test]
    fn templates_are_found_by_vmid_or_unique_name() {
        let view = view();
        let want = TemplateLookup::Found {
            vmid: 9000,
            node: "pve".into(),
            template: true,
            pool: None,
            tags: vec![],
        };
        assert_eq!(template_lookup(&view, &TemplateRef::Vmid(9000)), want);
        assert_eq!(
            template_lookup(&view, &TemplateRef::Name("jammy".into())),
            want
        );
        assert_eq!(
            template_lookup(&view, &TemplateRef::Name("web".into())),
            TemplateLookup::Ambiguous(vec![101, 102])
        );
        assert_eq!(
            template_lookup(&view, &TemplateRef::Vmid(1)),
            TemplateLookup::NotFound
        );
    }
}
