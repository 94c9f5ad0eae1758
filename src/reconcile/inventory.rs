//! The cluster as Proxmox shows it, shared by every pass of a provider
//! config: one `GET /cluster/resources` per config per poll interval tells
//! every node's memory and every guest's node, power state and lock, no
//! matter how many VMs are reconciled meanwhile. Placement, VMID allocation,
//! template lookups and finding a VM that moved read it; concurrent passes
//! that find it stale wait for one refresh instead of each asking.
//!
//! The view lags: Proxmox's stats behind it are broadcast every 10 s, so a
//! new VM may show `status: unknown`. It is used for what tolerates that
//! (where a VM is, which VMIDs exist, node memory) and for checking idle VMs;
//! a decision to act on a VM is always made from the VM's own
//! `status/current`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pve_client::{Client, Resource, StorageContent};

use super::common::views::StorageView;
use super::providers::ConfigKey;

/// How long the cluster's `next-id` setting is trusted.
const OPTIONS_FOR: Duration = Duration::from_secs(600);

/// How long a node's bridges are trusted: they are read only for creates,
/// once per node and interval however many VMs are created there.
const BRIDGES_FOR: Duration = Duration::from_secs(120);

/// One node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeView {
    /// Its name.
    pub name: String,
    /// Whether it is online.
    pub online: bool,
    /// Memory in bytes.
    pub max_memory: u64,
    /// Memory in use in bytes.
    pub memory: u64,
    /// Logical CPUs (`maxcpu`; 0 when not shown).
    pub cpus: u32,
}

/// One QEMU guest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmView {
    /// Its node.
    pub node: String,
    /// `status` is `running`.
    pub running: bool,
    /// `status` as listed (`running`, `stopped`, `unknown`).
    pub status: String,
    /// Its config lock.
    pub lock: Option<String>,
    /// Whether it is a template.
    pub template: bool,
    /// Its name, once the stats show it.
    pub name: Option<String>,
    /// Seconds since it started (a restart makes it go down).
    pub uptime: Option<u64>,
    /// Its pool, if it is in one.
    pub pool: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its memory in bytes (`maxmem`).
    pub memory: Option<u64>,
    /// Its vCPUs (`maxcpu`).
    pub cpus: Option<u64>,
    /// The size of its boot disk in bytes (`maxdisk`).
    pub disk: Option<u64>,
}

impl VmView {
    /// A guest as `/cluster/resources` lists it.
    fn listed(r: &Resource) -> VmView {
        let status = r.status.clone().unwrap_or_default();
        VmView {
            node: r.node.clone().unwrap_or_default(),
            running: status == "running",
            status,
            lock: r.lock.clone().filter(|l| !l.is_empty()),
            template: r.template,
            name: r.name.clone(),
            uptime: r.uptime,
            pool: r.pool.clone().filter(|p| !p.is_empty()),
            tags: split_tags(r.tags.as_deref()),
            memory: r.maxmem,
            cpus: r.maxcpu.map(|c| c.round() as u64),
            disk: r.maxdisk,
        }
    }

    /// Whether the guest is as `then` showed it, as far as the view can
    /// tell: the same shape, unlocked, and not restarted since (its uptime
    /// did not go down).
    pub fn unchanged_since(&self, then: &VmView) -> bool {
        let restarted = matches!((then.uptime, self.uptime), (Some(was), Some(up)) if up < was);
        !restarted && self.lock.is_none() && self.shape() == then.shape()
    }

    /// What the view shows of the VM that does not change while it is at
    /// rest (all but its uptime): a VM whose shape is as at its last full
    /// look was not changed in any way the view can tell.
    pub fn shape(&self) -> VmView {
        VmView {
            uptime: None,
            ..self.clone()
        }
    }
}

/// The cluster at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// Every node.
    pub nodes: Vec<NodeView>,
    /// QEMU guests by VMID.
    pub vms: HashMap<u32, VmView>,
    /// Every guest's VMID (QEMU and LXC: they share the VMID space).
    pub vmids: BTreeSet<u32>,
    /// LXC containers by VMID, as listed: their node and pool, and what a
    /// coarse look compares (the struct is the same for both kinds of
    /// guest).
    pub lxcs: HashMap<u32, VmView>,
    /// The storages shared by the nodes (a volume on one is on every node).
    pub shared_storages: BTreeSet<String>,
    /// Per node, its storages by ID.
    pub storages: BTreeMap<String, BTreeMap<String, StorageView>>,
}

impl ClusterView {
    /// From `/cluster/resources` (all types).
    pub fn from_resources(resources: Vec<Resource>) -> Self {
        let mut view = Self::default();
        for r in resources {
            let vmid = r.vmid.and_then(|v| u32::try_from(v).ok());
            match (r.kind.as_str(), vmid) {
                ("node", _) => view.nodes.push(NodeView {
                    name: r.node.unwrap_or_default(),
                    online: r.status.as_deref() == Some("online"),
                    max_memory: r.maxmem.unwrap_or_default(),
                    memory: r.mem.unwrap_or_default(),
                    cpus: r.maxcpu.map_or(0, |c| c as u32),
                }),
                ("qemu", Some(vmid)) => {
                    view.vmids.insert(vmid);
                    view.vms.insert(vmid, VmView::listed(&r));
                }
                ("storage", None) => {
                    let Some(storage) = r.storage else { continue };
                    if r.shared {
                        view.shared_storages.insert(storage.clone());
                    }
                    if let Some(node) = r.node {
                        let seen = StorageView {
                            plugin: r.plugintype.unwrap_or_default(),
                            total: r.maxdisk.unwrap_or_default(),
                            used: r.disk.unwrap_or_default(),
                        };
                        view.storages.entry(node).or_default().insert(storage, seen);
                    }
                }
                ("lxc", Some(vmid)) => {
                    view.vmids.insert(vmid);
                    view.lxcs.insert(vmid, VmView::listed(&r));
                }
                (_, Some(vmid)) => {
                    view.vmids.insert(vmid);
                }
                (_, None) => {}
            }
        }
        view.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        view
    }

    /// VMs (not templates) per node, in one walk over the VMs.
    pub fn vm_counts(&self) -> HashMap<&str, u64> {
        let mut counts = HashMap::new();
        for vm in self.vms.values().filter(|vm| !vm.template) {
            *counts.entry(vm.node.as_str()).or_default() += 1;
        }
        counts
    }
}

/// The `next-id` range: `(lower, upper)` as the cluster sets them.
pub type NextId = Option<(Option<u64>, Option<u64>)>;

/// A node's bridges and VNets: the names a NIC may use, and the VNets
/// among them that take no VLAN tag.
type Bridges = Arc<(BTreeSet<String>, BTreeSet<String>)>;

#[derive(Debug, Default)]
struct Cached {
    /// The last view and when it was read; the lock is the single flight.
    view: tokio::sync::Mutex<Option<(Instant, Arc<ClusterView>)>>,
    options: tokio::sync::Mutex<Option<(Instant, NextId)>>,
    /// Node → its bridges and VNets, and when they were read.
    bridges: tokio::sync::Mutex<HashMap<String, (Instant, Bridges)>>,
    /// (node, storage, content type) → its listing, and when it was asked.
    contents: tokio::sync::Mutex<HashMap<ListingOf, (Instant, Listing)>>,
}

/// A storage's content listing, shared by the passes that read it.
pub type Listing = Arc<Vec<StorageContent>>;

/// Which listing: node, storage, content type.
type ListingOf = (String, String, String);

/// The views of every provider config.
#[derive(Debug, Default)]
pub struct Inventory {
    clusters: Mutex<HashMap<ConfigKey, Arc<Cached>>>,
}

impl Inventory {
    fn cached(&self, key: &ConfigKey) -> Arc<Cached> {
        let mut clusters = self.clusters.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(clusters.entry(key.clone()).or_default())
    }

    /// The cluster, read at most `max_age` ago (read now when older; one
    /// read serves every caller waiting meanwhile).
    pub async fn view(
        &self,
        key: &ConfigKey,
        client: &Client,
        max_age: Duration,
    ) -> Result<Arc<ClusterView>, pve_client::Error> {
        self.view_where(key, client, |at| at.elapsed() < max_age)
            .await
    }

    /// The cluster as read at `since` or later: a pass whose own lookup
    /// contradicts the view asks for one at least as new as that lookup
    /// (passes asking together share one read).
    pub async fn view_since(
        &self,
        key: &ConfigKey,
        client: &Client,
        since: Instant,
    ) -> Result<Arc<ClusterView>, pve_client::Error> {
        self.view_where(key, client, |at| at >= since).await
    }

    /// The last view read, however old, without reading one: for what
    /// only reports (a Warning) and is worth no request.
    pub async fn last_view(&self, key: &ConfigKey) -> Option<Arc<ClusterView>> {
        let cached = self.cached(key);
        let guard = cached.view.lock().await;
        guard.as_ref().map(|(_, view)| Arc::clone(view))
    }

    /// The cached view while `usable(read at)`, else a new read.
    async fn view_where(
        &self,
        key: &ConfigKey,
        client: &Client,
        usable: impl Fn(Instant) -> bool,
    ) -> Result<Arc<ClusterView>, pve_client::Error> {
        let cached = self.cached(key);
        let mut guard = cached.view.lock().await;
        if let Some((at, view)) = guard.as_ref()
            && usable(*at)
        {
            return Ok(Arc::clone(view));
        }
        // Stamped with the time it was asked, not answered: `view_since`
        // must not take a read that began before its lookup for a newer one.
        let asked = Instant::now();
        let view = Arc::new(ClusterView::from_resources(
            client.cluster_resources(None).await?,
        ));
        *guard = Some((asked, Arc::clone(&view)));
        Ok(view)
    }

    /// The cluster's `next-id` setting (`/cluster/options`), re-read every
    /// ten minutes. A token that may not read the datacenter options
    /// (`Sys.Audit` on `/`) gets `None`, as if none were set: such setups
    /// name their range in the provider config's `vmidRange`.
    pub async fn next_id(
        &self,
        key: &ConfigKey,
        client: &Client,
    ) -> Result<NextId, pve_client::Error> {
        let cached = self.cached(key);
        let mut guard = cached.options.lock().await;
        if let Some((at, next_id)) = guard.as_ref()
            && at.elapsed() < OPTIONS_FOR
        {
            return Ok(*next_id);
        }
        let next_id = match client.cluster_options().await {
            Ok(options) => options.next_id.map(|r| (r.lower, r.upper)),
            Err(
                e
                @ (pve_client::Error::Forbidden { .. } | pve_client::Error::NotImplemented { .. }),
            ) => {
                tracing::warn!(config = %key, error = %e, "cannot read the cluster's next-id range; allocating VMIDs from 100 (set vmidRange to choose)");
                None
            }
            Err(e) => return Err(e),
        };
        *guard = Some((Instant::now(), next_id));
        Ok(next_id)
    }

    /// The bridges and VNets a NIC may name on `node`
    /// (`/nodes/{node}/network?type=any_bridge`), read at most
    /// [`BRIDGES_FOR`] ago; one read serves every pass waiting meanwhile.
    pub async fn bridges(
        &self,
        key: &ConfigKey,
        client: &Client,
        node: &str,
    ) -> Result<Bridges, pve_client::Error> {
        let cached = self.cached(key);
        let mut guard = cached.bridges.lock().await;
        if let Some((at, bridges)) = guard.get(node)
            && at.elapsed() < BRIDGES_FOR
        {
            return Ok(Arc::clone(bridges));
        }
        let asked = Instant::now();
        let listed = client.node_bridges(node).await?;
        let untagged = listed
            .iter()
            .filter(|i| i.kind == "vnet" && i.vlanaware != Some(true))
            .map(|i| i.iface.clone())
            .collect();
        let names = listed.into_iter().map(|i| i.iface).collect();
        let bridges: Bridges = Arc::new((names, untagged));
        guard.insert(node.to_owned(), (asked, Arc::clone(&bridges)));
        Ok(bridges)
    }

    /// The volumes of `content` type on `storage` at `node`
    /// (`/nodes/{node}/storage/{storage}/content`), read at most `max_age`
    /// ago (`Duration::ZERO`: read now); one read serves every pass
    /// waiting meanwhile.
    pub async fn content(
        &self,
        key: &ConfigKey,
        client: &Client,
        (node, storage, content): (&str, &str, &str),
        max_age: Duration,
    ) -> Result<Listing, pve_client::Error> {
        let cached = self.cached(key);
        let mut guard = cached.contents.lock().await;
        let at = (node.to_owned(), storage.to_owned(), content.to_owned());
        if let Some((asked, listing)) = guard.get(&at)
            && asked.elapsed() < max_age
        {
            return Ok(Arc::clone(listing));
        }
        // Stamped with the time it was asked, as the view.
        let asked = Instant::now();
        let listing = Arc::new(client.storage_content(node, storage, Some(content)).await?);
        guard.insert(at, (asked, Arc::clone(&listing)));
        Ok(listing)
    }

    /// Forgets a config that is gone.
    pub fn forget(&self, key: &ConfigKey) {
        self.clusters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

/// Proxmox tags as `/cluster/resources` lists them (`a;b`; older versions
/// also `,` or spaces).
fn split_tags(tags: Option<&str>) -> Vec<String> {
    tags.unwrap_or_default()
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(value: serde_json::Value) -> Vec<Resource> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_vm_shows_its_pool_and_tags() {
        let view = ClusterView::from_resources(resources(serde_json::json!([
            {"id": "qemu/777", "type": "qemu", "node": "pve", "vmid": 777,
             "pool": "golden", "tags": "clone-ok;db"},
            {"id": "qemu/778", "type": "qemu", "node": "pve", "vmid": 778, "pool": ""},
        ])));
        let vm = &view.vms[&777];
        assert_eq!(vm.pool.as_deref(), Some("golden"));
        assert_eq!(vm.tags, ["clone-ok", "db"]);
        assert_eq!(view.vms[&778].pool, None);
        assert!(view.vms[&778].tags.is_empty());
        assert_eq!(split_tags(Some("a,b c")), ["a", "b", "c"]);
    }

    #[test]
    fn the_view_holds_nodes_vms_and_every_guest_vmid() {
        let view = ClusterView::from_resources(resources(serde_json::json!([
            {"id": "node/pve2", "type": "node", "node": "pve2", "status": "online",
             "maxmem": 1000, "mem": 100},
            {"id": "node/pve1", "type": "node", "node": "pve1", "status": "offline"},
            {"id": "qemu/100", "type": "qemu", "node": "pve2", "vmid": 100,
             "status": "running", "name": "web", "lock": ""},
            {"id": "qemu/9000", "type": "qemu", "node": "pve1", "vmid": 9000,
             "status": "stopped", "template": 1},
            {"id": "lxc/101", "type": "lxc", "node": "pve2", "vmid": 101, "status": "running"},
            {"id": "storage/pve2/local", "type": "storage", "node": "pve2", "storage": "local"},
        ])));
        assert_eq!(
            view.nodes
                .iter()
                .map(|n| (n.name.as_str(), n.online))
                .collect::<Vec<_>>(),
            [("pve1", false), ("pve2", true)]
        );
        assert_eq!(view.vmids, [100, 101, 9000].into());
        assert!(view.vms[&100].running && view.vms[&100].lock.is_none());
        assert!(view.vms[&9000].template);
        let counts = view.vm_counts();
        assert_eq!(counts.get("pve2"), Some(&1));
        assert_eq!(counts.get("pve1"), None, "templates are not VMs to spread");
    }
}
