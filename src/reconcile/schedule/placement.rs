//! Placement: which node a VM without `node` goes to.
//!
//! Every pass sees the same `/cluster/resources` numbers, and a VM placed a
//! moment ago shows in them only once it runs. Like kube-scheduler's
//! "assumed" pods, a placement is remembered until the cluster view shows
//! the VM running on its node: until then its memory is subtracted from the
//! node's free memory and it counts as one of the node's VMs. So VMs
//! applied together spread instead of piling onto the node that looked
//! emptiest when they all looked at once. A VM is never placed outside
//! `allowedNodes`, nor on a node with fewer CPUs than its vCPUs (Proxmox
//! refuses to start it there) or less memory than it has.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::super::inventory::{ClusterView, NodeView};
use crate::api::quantity::human_bytes;
use crate::api::vm::PlacementPolicy;
use crate::reconcile::common::grants::{Placement, PlacementRequest};

/// How long an assumption waits for its VM to run before it is dropped.
const ASSUMED_FOR: Duration = Duration::from_secs(1800);
/// How often the assumptions are pruned: each prune reads every one of
/// them, and a pass of every VM being placed asks for a placement (at
/// 10,000 VMs, pruning at each made placement quadratic). An assumption
/// kept up to this long after its VM runs counts its memory twice on its
/// node for that while: nothing is placed wrong by it, only less tightly.
const PRUNE_EVERY: Duration = Duration::from_secs(1);

/// A placement the cluster view does not reflect yet.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Assumed {
    node: String,
    memory: u64,
    vmid: u32,
    /// The label value `SpreadByLabel` counts, when the VM has one.
    label: Option<(String, String)>,
    at: Instant,
}

/// The placements of one provider config.
#[derive(Debug, Default)]
pub struct PlacementBook {
    /// Resource UID → its placement.
    assumed: HashMap<String, Assumed>,
    /// When the assumptions were last pruned.
    pruned: Option<Instant>,
}

/// What `SpreadByLabel` counts besides the assumptions: how many
/// ProxmoxVMs with the same label value each node has (from the
/// controller's cache of statuses).
pub type LabelCounts = HashMap<String, u32>;

/// What a placement is chosen from.
#[derive(Clone, Copy, Debug)]
pub struct Candidates<'a> {
    /// Nodes and VMs of the cluster.
    pub view: &'a ClusterView,
    /// Per node, ProxmoxVMs sharing the resource's label value.
    pub labelled: &'a LabelCounts,
    /// The clone template's node, for clones.
    pub template_node: Option<&'a str>,
}

impl PlacementBook {
    /// The node for resource `uid` (VMID `vmid`): its earlier placement
    /// while that node is still allowed and online, else a new choice,
    /// remembered until the VM runs there.
    pub fn place(
        &mut self,
        uid: &str,
        vmid: u32,
        request: &PlacementRequest,
        from: Candidates<'_>,
        now: Instant,
    ) -> Placement {
        let view = from.view;
        self.prune(view, now);
        if let Some(earlier) = self.assumed.get(uid)
            && candidate(request, view, &earlier.node)
        {
            return Placement::Chosen {
                node: earlier.node.clone(),
                why: "placed earlier".into(),
            };
        }
        self.assumed.remove(uid);
        let placement = choose(request, from, &self.assumed);
        if let Placement::Chosen { node, .. } = &placement {
            self.assumed.insert(
                uid.to_owned(),
                Assumed {
                    node: node.clone(),
                    memory: request.memory,
                    vmid,
                    label: request.spread_by.clone(),
                    at: now,
                },
            );
        }
        placement
    }

    /// Forgets the placement of a resource that is gone.
    pub fn forget(&mut self, uid: &str) {
        self.assumed.remove(uid);
    }

    /// Drops assumptions whose VM the view shows running (its memory is in
    /// the node's numbers now) or that waited too long.
    fn prune(&mut self, view: &ClusterView, now: Instant) {
        if self
            .pruned
            .is_some_and(|at| now.saturating_duration_since(at) < PRUNE_EVERY)
        {
            return;
        }
        self.pruned = Some(now);
        self.assumed.retain(|_, a| {
            let running = view
                .vms
                .get(&a.vmid)
                .is_some_and(|vm| vm.node == a.node && vm.running);
            !running && now.saturating_duration_since(a.at) < ASSUMED_FOR
        });
    }
}

/// `request` limited to `nodes`: a clone of an image's template goes to a
/// node where that template is ready (cloning it elsewhere needs a target
/// node and shared storage, and a linked clone cannot leave its base).
/// `None` when none of them is allowed: there is nothing to place on yet.
pub fn among(request: &PlacementRequest, nodes: &[String]) -> Option<PlacementRequest> {
    let allowed: Vec<String> = nodes
        .iter()
        .filter(|n| request.allowed.is_empty() || request.allowed.contains(n))
        .cloned()
        .collect();
    (!allowed.is_empty()).then(|| PlacementRequest {
        allowed,
        prefer_template_node: false,
        ..request.clone()
    })
}

/// Whether `node` may take the VM: online, allowed and big enough.
fn candidate(request: &PlacementRequest, view: &ClusterView, node: &str) -> bool {
    let allowed = request.allowed.is_empty() || request.allowed.iter().any(|n| n == node);
    allowed
        && view
            .nodes
            .iter()
            .any(|n| n.name == node && n.online && fits(request, n))
}

/// Whether the node has the VM's vCPUs and memory at all (a figure the
/// view does not show is not held against it).
fn fits(request: &PlacementRequest, node: &NodeView) -> bool {
    let cpus = node.cpus == 0 || request.cpus <= node.cpus;
    let memory = node.max_memory == 0 || request.memory <= node.max_memory;
    cpus && memory
}

/// Why no node qualifies.
fn no_node(request: &PlacementRequest, view: &ClusterView) -> Placement {
    let online: Vec<&NodeView> = view
        .nodes
        .iter()
        .filter(|n| n.online)
        .filter(|n| request.allowed.is_empty() || request.allowed.contains(&n.name))
        .collect();
    if online.is_empty() {
        let why = if request.allowed.is_empty() {
            "no node is online".into()
        } else {
            format!("none of allowedNodes {:?} is online", request.allowed)
        };
        return Placement::NoNode {
            why,
            too_small: false,
        };
    }
    let largest = online
        .iter()
        .map(|n| format!("{}: {} CPUs, {}", n.name, n.cpus, human_bytes(n.max_memory)))
        .collect::<Vec<_>>()
        .join("; ");
    let why = format!(
        "no {}online node has {} CPUs and {} of memory for the VM ({largest})",
        if request.allowed.is_empty() {
            ""
        } else {
            "allowed "
        },
        request.cpus,
        human_bytes(request.memory)
    );
    Placement::NoNode {
        why,
        too_small: true,
    }
}

/// Chooses a node as the request's policy says, counting `assumed`
/// placements as if their VMs already ran. Ties go to the node that sorts
/// first, so the choice is deterministic.
/// What each node holds besides its own figures in the view: its VMs in
/// the view, and the assumptions placed on it. Counted in one walk over
/// the VMs and one over the assumptions, not one per node.
#[derive(Clone, Copy, Debug, Default)]
struct Load {
    /// Memory of the VMs assumed there.
    pending_memory: u64,
    /// Its VMs (templates aside) and those assumed there the view does not
    /// list yet.
    vms: u64,
    /// Assumed there with the request's `spreadBy` label value.
    same_label: u64,
}

impl Load {
    fn of<'v>(
        request: &PlacementRequest,
        view: &'v ClusterView,
        assumed: &'v HashMap<String, Assumed>,
    ) -> HashMap<&'v str, Load> {
        let mut load: HashMap<&str, Load> = view
            .vm_counts()
            .into_iter()
            .map(|(node, vms)| {
                (
                    node,
                    Load {
                        vms,
                        ..Load::default()
                    },
                )
            })
            .collect();
        let value = request.spread_by.as_ref();
        for a in assumed.values() {
            let here = load.entry(a.node.as_str()).or_default();
            here.pending_memory += a.memory;
            if !view.vms.contains_key(&a.vmid) {
                here.vms += 1;
            }
            if a.label.as_ref() == value {
                here.same_label += 1;
            }
        }
        load
    }
}

fn choose(
    request: &PlacementRequest,
    from: Candidates<'_>,
    assumed: &HashMap<String, Assumed>,
) -> Placement {
    let Candidates {
        view,
        labelled,
        template_node,
    } = from;
    if request.prefer_template_node
        && let Some(node) = template_node
        && candidate(request, view, node)
    {
        return Placement::Chosen {
            node: node.to_owned(),
            why: "the template's node".into(),
        };
    }
    let load = Load::of(request, view, assumed);
    let mut best: Option<(String, (u64, u64))> = None;
    for node in view
        .nodes
        .iter()
        .filter(|n| candidate(request, view, &n.name))
    {
        let here = load.get(node.name.as_str()).copied().unwrap_or_default();
        let free = node
            .max_memory
            .saturating_sub(node.memory)
            .saturating_sub(here.pending_memory);
        let vms = here.vms;
        // Lower is better: (primary, secondary).
        let score = match request.policy {
            PlacementPolicy::MostFreeMemory => (u64::MAX - free, vms),
            PlacementPolicy::FewestVms => (vms, u64::MAX - free),
            PlacementPolicy::SpreadByLabel => {
                let same = u64::from(labelled.get(&node.name).copied().unwrap_or_default())
                    + here.same_label;
                (same, u64::MAX - free)
            }
        };
        if best.as_ref().is_none_or(|(_, b)| score < *b) {
            best = Some((node.name.clone(), score));
        }
    }
    match best {
        Some((node, _)) => Placement::Chosen {
            node,
            why: match request.policy {
                PlacementPolicy::MostFreeMemory => "most free memory",
                PlacementPolicy::FewestVms => "fewest VMs",
                PlacementPolicy::SpreadByLabel => "fewest VMs with the same label",
            }
            .into(),
        },
        None => no_node(request, view),
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::inventory::VmView;
    use super::*;

    fn from<'a>(view: &'a ClusterView, labelled: &'a LabelCounts) -> Candidates<'a> {
        Candidates {
            view,
            labelled,
            template_node: None,
        }
    }

    const GIB: u64 = 1 << 30;

    fn view(nodes: &[(&str, bool, u64, u64)]) -> ClusterView {
        ClusterView {
            nodes: nodes
                .iter()
                .map(|(name, online, max, used)| NodeView {
                    name: (*name).into(),
                    online: *online,
                    max_memory: max * GIB,
                    memory: used * GIB,
                    cpus: 16,
                })
                .collect(),
            ..ClusterView::default()
        }
    }

    fn request(allowed: &[&str], policy: PlacementPolicy) -> PlacementRequest {
        PlacementRequest {
            allowed: allowed.iter().map(|s| (*s).to_owned()).collect(),
            memory: 2 * GIB,
            cpus: 2,
            policy,
            spread_by: None,
            prefer_template_node: false,
        }
    }

    fn node_of(p: &Placement) -> &str {
        match p {
            Placement::Chosen { node, .. } => node,
            Placement::NoNode { why, .. } => panic!("no node: {why}"),
        }
    }

    #[test]
    fn vms_placed_together_spread_over_equal_nodes() {
        let v = view(&[
            ("pve1", true, 64, 0),
            ("pve2", true, 64, 0),
            ("pve3", true, 64, 0),
        ]);
        let mut book = PlacementBook::default();
        let now = Instant::now();
        let req = request(&[], PlacementPolicy::MostFreeMemory);
        let mut per_node: HashMap<String, u32> = HashMap::new();
        for i in 0..30u32 {
            let p = book.place(
                &format!("uid-{i}"),
                100 + i,
                &req,
                from(&v, &LabelCounts::new()),
                now,
            );
            *per_node.entry(node_of(&p).to_owned()).or_default() += 1;
        }
        assert_eq!(per_node.values().copied().collect::<Vec<_>>(), [10, 10, 10]);
    }

    #[test]
    fn placement_is_stable_for_a_resource_and_stays_inside_allowed_nodes() {
        let v = view(&[
            ("pve1", true, 64, 0),
            ("pve2", true, 8, 0),
            ("pve3", false, 128, 0),
        ]);
        let mut book = PlacementBook::default();
        let now = Instant::now();
        let req = request(&["pve2", "pve3"], PlacementPolicy::MostFreeMemory);
        let first = book.place("a", 100, &req, from(&v, &LabelCounts::new()), now);
        assert_eq!(
            node_of(&first),
            "pve2",
            "pve1 is not allowed, pve3 is offline"
        );
        let again = book.place("a", 100, &req, from(&v, &LabelCounts::new()), now);
        assert_eq!(node_of(&again), "pve2");
        let none = book.place(
            "b",
            101,
            &request(&["pve3"], PlacementPolicy::MostFreeMemory),
            from(&v, &LabelCounts::new()),
            now,
        );
        assert!(matches!(none, Placement::NoNode { .. }), "{none:?}");
    }

    #[test]
    fn an_assumption_ends_when_the_vm_runs_on_its_node() {
        let mut v = view(&[("pve1", true, 64, 0), ("pve2", true, 64, 0)]);
        let mut book = PlacementBook::default();
        let now = Instant::now();
        let req = request(&[], PlacementPolicy::MostFreeMemory);
        assert_eq!(
            node_of(&book.place("a", 100, &req, from(&v, &LabelCounts::new()), now)),
            "pve1"
        );
        // VM 100 runs on pve1 now; its memory is in pve1's numbers.
        v.nodes[0].memory = 2 * GIB;
        v.vms.insert(
            100,
            VmView {
                node: "pve1".into(),
                running: true,
                ..VmView::default()
            },
        );
        // Within a second of the last prune, a is still assumed.
        let soon = now + PRUNE_EVERY / 2;
        assert_eq!(
            node_of(&book.place("b", 101, &req, from(&v, &LabelCounts::new()), soon)),
            "pve2"
        );
        assert_eq!(book.assumed.len(), 2, "not pruned yet");
        let later = now + PRUNE_EVERY;
        assert_eq!(
            node_of(&book.place("b", 101, &req, from(&v, &LabelCounts::new()), later)),
            "pve2"
        );
        assert_eq!(book.assumed.len(), 1, "only b is assumed");
    }

    #[test]
    fn policies() {
        let mut v = view(&[("pve1", true, 64, 60), ("pve2", true, 64, 0)]);
        for id in 0..3u32 {
            v.vms.insert(
                200 + id,
                VmView {
                    node: "pve2".into(),
                    running: false,
                    ..VmView::default()
                },
            );
        }
        let mut book = PlacementBook::default();
        let now = Instant::now();
        let fewest = request(&[], PlacementPolicy::FewestVms);
        assert_eq!(
            node_of(&book.place("a", 100, &fewest, from(&v, &LabelCounts::new()), now)),
            "pve1"
        );
        let most = request(&[], PlacementPolicy::MostFreeMemory);
        assert_eq!(
            node_of(&book.place("b", 101, &most, from(&v, &LabelCounts::new()), now)),
            "pve2"
        );
        let mut spread = request(&[], PlacementPolicy::SpreadByLabel);
        spread.spread_by = Some(("app".into(), "web".into()));
        let labelled: LabelCounts = [("pve2".to_owned(), 2)].into();
        assert_eq!(
            node_of(&book.place("c", 102, &spread, from(&v, &labelled), now)),
            "pve1"
        );
    }

    #[test]
    fn nodes_too_small_for_the_vm_are_not_chosen() {
        let mut v = view(&[("big", true, 64, 60), ("small", true, 256, 0)]);
        v.nodes[1].cpus = 4;
        let mut book = PlacementBook::default();
        let now = Instant::now();
        let mut req = request(&[], PlacementPolicy::MostFreeMemory);
        req.cpus = 8;
        let none = LabelCounts::new();
        assert_eq!(
            node_of(&book.place("a", 100, &req, from(&v, &none), now)),
            "big",
            "small has the free memory but 4 CPUs"
        );
        req.cpus = 2;
        req.memory = 100 * GIB;
        assert_eq!(
            node_of(&book.place("b", 101, &req, from(&v, &none), now)),
            "small",
            "big has 64 GiB in all"
        );
        req.cpus = 64;
        let p = book.place("c", 102, &req, from(&v, &none), now);
        let Placement::NoNode {
            why,
            too_small: true,
        } = p
        else {
            panic!("placed: {p:?}")
        };
        assert!(
            why.contains("no online node has 64 CPUs and 100 GiB of memory")
                && why.contains("big: 16 CPUs, 64 GiB"),
            "{why}"
        );
    }

    #[test]
    fn clones_prefer_the_template_node_when_allowed() {
        let v = view(&[("pve1", true, 64, 60), ("pve2", true, 64, 0)]);
        let none = LabelCounts::new();
        let clone = Candidates {
            template_node: Some("pve1"),
            ..from(&v, &none)
        };
        let mut book = PlacementBook::default();
        let now = Instant::now();
        let mut req = request(&[], PlacementPolicy::MostFreeMemory);
        req.prefer_template_node = true;
        assert_eq!(node_of(&book.place("a", 100, &req, clone, now)), "pve1");
        req.allowed = vec!["pve2".into()];
        assert_eq!(node_of(&book.place("b", 101, &req, clone, now)), "pve2");
    }

    #[test]
    fn clones_of_an_image_go_only_where_its_template_is_ready() {
        // pve2 has the most free memory, but only pve1 and pve3 have the
        // image's template ready.
        let v = view(&[
            ("pve1", true, 64, 60),
            ("pve2", true, 64, 0),
            ("pve3", true, 64, 50),
        ]);
        let none = LabelCounts::new();
        let mut book = PlacementBook::default();
        let now = Instant::now();
        let ready = ["pve1".to_owned(), "pve3".to_owned()];
        let req = request(&[], PlacementPolicy::MostFreeMemory);
        let among_ready = among(&req, &ready).unwrap();
        assert_eq!(among_ready.allowed, ready);
        assert_eq!(
            node_of(&book.place("a", 100, &among_ready, from(&v, &none), now)),
            "pve3"
        );
        // Intersected with allowedNodes.
        let only_pve1 = among(
            &request(&["pve1", "pve2"], PlacementPolicy::MostFreeMemory),
            &ready,
        );
        assert_eq!(only_pve1.unwrap().allowed, ["pve1"]);
        // No ready node allowed: nothing to place on (not "any node").
        assert_eq!(
            among(&request(&["pve2"], PlacementPolicy::FewestVms), &ready),
            None
        );
        assert_eq!(among(&req, &[]), None);
    }
}
