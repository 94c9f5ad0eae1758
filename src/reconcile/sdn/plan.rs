//! The SDN kinds' managed fields, their corrections and when the pending
//! changes of a provider config are applied, pure.
//!
//! An object is compared as it will be once applied (Proxmox's pending
//! view: the running values with the pending changes laid over them), so
//! a change already written is not written again while it waits for the
//! apply. An object whose deletion is pending still exists until the
//! apply: its resource's deletion waits for it ([`Diff::in_use`]).

use std::collections::BTreeMap;

use pve_client::{SdnObject, SdnOptions, SdnState};
use sha2::{Digest, Sha256};

use crate::api::sdn::{ApplyState, DhcpRange, SdnZoneParameters, Subnet, VNetParameters};
use crate::reconcile::managed::crud::Diff;

/// A zone's or VNet's Proxmox ID: `prefix` and 7 hex digits of a hash of
/// the kind, namespace and name (8 characters, pve-network's maximum;
/// `[a-z][a-z0-9]*`).
pub fn sdn_id(prefix: char, namespace: &str, name: &str) -> String {
    let hash = Sha256::digest(format!("{prefix}:{namespace}/{name}").as_bytes());
    let hex: String = hash.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{}", &hex[..7])
}

/// Properties by key; an array property (`dhcp-range`) has several values.
pub type Options = BTreeMap<String, Vec<String>>;

fn one(v: impl ToString) -> Vec<String> {
    vec![v.to_string()]
}

fn flag(b: bool) -> Vec<String> {
    one(u8::from(b))
}

/// The options as form pairs (an array's key repeated).
pub fn pairs(options: &Options) -> SdnOptions {
    options
        .iter()
        .flat_map(|(k, vs)| vs.iter().map(move |v| (k.clone(), v.clone())))
        .collect()
}

/// Where an observed object (with its subnets) stands.
pub fn pending(states: impl IntoIterator<Item = Option<SdnState>>) -> bool {
    states.into_iter().any(|s| s.is_some())
}

/// A zone as managed: its type and the options the spec sets.
#[derive(Clone, Debug, PartialEq)]
pub struct Zone {
    pub kind: String,
    pub options: Options,
    /// Observed only: a change of it is not applied yet.
    pub pending: bool,
    /// Observed only: its deletion is not applied yet.
    pub deleted: bool,
}

/// What corrects an object's options: keys to set and to remove.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OptionsPatch {
    pub set: Options,
    pub delete: Vec<String>,
}

impl OptionsPatch {
    fn is_empty(&self) -> bool {
        self.set.is_empty() && self.delete.is_empty()
    }
}

/// The options of `want` that `have` lacks or holds otherwise; `managed`:
/// keys removed when the spec leaves them out.
fn options_patch(want: &Options, have: &Options, managed: &[&str]) -> OptionsPatch {
    let set = want
        .iter()
        .filter(|(k, v)| have.get(k.as_str()) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let delete = managed
        .iter()
        .filter(|k| !want.contains_key(**k) && have.contains_key(**k))
        .map(|k| (*k).to_owned())
        .collect();
    OptionsPatch { set, delete }
}

/// The zone the spec asks for.
pub fn zone_want(p: &SdnZoneParameters) -> Zone {
    let mut options = Options::new();
    let mut put = |k: &str, v: Option<Vec<String>>| {
        if let Some(v) = v {
            options.insert(k.to_owned(), v);
        }
    };
    put("bridge", p.bridge.as_ref().map(one));
    put("tag", p.tag.map(one));
    put("vlan-protocol", p.vlan_protocol.map(|v| one(v.as_str())));
    put("peers", p.peers.as_ref().map(|l| one(l.join(","))));
    put("mtu", p.mtu.map(one));
    put("nodes", p.nodes.as_ref().map(|l| one(l.join(","))));
    put("ipam", p.ipam.as_ref().map(one));
    put("dhcp", p.dhcp.map(|_| one("dnsmasq")));
    Zone {
        kind: p.zone_type.as_str().to_owned(),
        options,
        pending: false,
        deleted: false,
    }
}

/// The keys a zone's spec manages.
const ZONE_KEYS: &[&str] = &[
    "bridge",
    "tag",
    "vlan-protocol",
    "peers",
    "mtu",
    "nodes",
    "ipam",
    "dhcp",
];

/// A zone as observed.
pub fn zone_seen(o: &SdnObject) -> Zone {
    Zone {
        kind: o.text("type").unwrap_or_default(),
        options: ZONE_KEYS
            .iter()
            .filter_map(|k| o.text(k).map(|v| ((*k).to_owned(), one(v))))
            .collect(),
        pending: o.state.is_some(),
        deleted: o.state == Some(SdnState::Deleted),
    }
}

const DELETION_PENDING: &str =
    "its deletion is written to Proxmox and waits for the SDN configuration to be applied";

impl Diff for Zone {
    type Patch = OptionsPatch;

    /// Only the options the spec sets are managed (a zone's type cannot
    /// change: the API refuses that at apply time).
    fn diff(&self, observed: &Self) -> Option<OptionsPatch> {
        let patch = options_patch(&self.options, &observed.options, &[]);
        (!patch.is_empty()).then_some(patch)
    }

    fn in_use(&self) -> Option<String> {
        self.deleted.then(|| DELETION_PENDING.to_owned())
    }
}

/// A subnet's options as managed (`gateway`, `snat`, `dhcp-range`).
fn subnet_options(s: &Subnet) -> Options {
    let mut o = Options::new();
    if let Some(g) = &s.gateway {
        o.insert("gateway".into(), one(g));
    }
    if let Some(snat) = s.snat {
        o.insert("snat".into(), flag(snat));
    }
    if !s.dhcp_ranges.is_empty() {
        o.insert(
            "dhcp-range".into(),
            s.dhcp_ranges.iter().map(range).collect(),
        );
    }
    o
}

/// A DHCP range as Proxmox writes it.
pub fn range(r: &DhcpRange) -> String {
    format!("start-address={},end-address={}", r.start, r.end)
}

/// The subnet keys removed when the spec leaves them out.
const SUBNET_KEYS: &[&str] = &["gateway", "dhcp-range"];
/// The VNet keys removed when the spec leaves them out.
const VNET_KEYS: &[&str] = &["tag", "alias"];

/// A VNet as managed: its options (with `zone`, the zone's Proxmox ID)
/// and its subnets by CIDR.
#[derive(Clone, Debug, PartialEq)]
pub struct Vnet {
    pub options: Options,
    pub subnets: BTreeMap<String, Options>,
    /// Observed only: each subnet's Proxmox ID by CIDR.
    pub subnet_ids: BTreeMap<String, String>,
    pub pending: bool,
    pub deleted: bool,
}

/// The VNet the spec asks for, in the zone with Proxmox ID `zone`.
pub fn vnet_want(p: &VNetParameters, zone: &str) -> Vnet {
    let mut options = Options::from([("zone".to_owned(), one(zone))]);
    if let Some(tag) = p.tag {
        options.insert("tag".into(), one(tag));
    }
    if let Some(aware) = p.vlan_aware {
        options.insert("vlanaware".into(), flag(aware));
    }
    if let Some(alias) = p.alias.as_ref().filter(|a| !a.is_empty()) {
        options.insert("alias".into(), one(alias));
    }
    Vnet {
        options,
        subnets: p
            .subnets
            .iter()
            .map(|s| (s.cidr.clone(), subnet_options(s)))
            .collect(),
        subnet_ids: BTreeMap::new(),
        pending: false,
        deleted: false,
    }
}

/// A VNet and its subnets as observed.
pub fn vnet_seen(v: &SdnObject, subnets: &[SdnObject]) -> Vnet {
    let keys = ["zone", "tag", "vlanaware", "alias"];
    let options = keys
        .iter()
        .filter_map(|k| v.text(k).map(|t| ((*k).to_owned(), one(t))))
        .collect();
    let mut seen = BTreeMap::new();
    let mut ids = BTreeMap::new();
    for s in subnets
        .iter()
        .filter(|s| s.state != Some(SdnState::Deleted))
    {
        let cidr = s.text("cidr").unwrap_or_else(|| s.id.clone());
        let mut o = Options::new();
        for k in ["gateway", "snat"] {
            if let Some(t) = s.text(k) {
                o.insert(k.to_owned(), one(t));
            }
        }
        let ranges = s.list("dhcp-range");
        if !ranges.is_empty() {
            o.insert("dhcp-range".into(), ranges);
        }
        ids.insert(cidr.clone(), s.id.clone());
        seen.insert(cidr, o);
    }
    Vnet {
        options,
        subnets: seen,
        subnet_ids: ids,
        pending: v.state.is_some() || pending(subnets.iter().map(|s| s.state)),
        deleted: v.state == Some(SdnState::Deleted),
    }
}

/// One subnet correction.
#[derive(Clone, Debug, PartialEq)]
pub enum SubnetChange {
    Create { cidr: String, options: Options },
    Update { id: String, patch: OptionsPatch },
    Delete { id: String },
}

/// What corrects a VNet: its options, then its subnets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VnetPatch {
    pub options: OptionsPatch,
    pub subnets: Vec<SubnetChange>,
}

impl Diff for Vnet {
    type Patch = VnetPatch;

    fn diff(&self, observed: &Self) -> Option<VnetPatch> {
        let options = options_patch(&self.options, &observed.options, VNET_KEYS);
        let mut subnets = vec![];
        // Deletions first: a CIDR replaced by an overlapping one must be
        // gone before its successor is created.
        for (cidr, id) in &observed.subnet_ids {
            if !self.subnets.contains_key(cidr) {
                subnets.push(SubnetChange::Delete { id: id.clone() });
            }
        }
        for (cidr, want) in &self.subnets {
            match (observed.subnets.get(cidr), observed.subnet_ids.get(cidr)) {
                (Some(have), Some(id)) => {
                    let patch = options_patch(want, have, SUBNET_KEYS);
                    if !patch.is_empty() {
                        subnets.push(SubnetChange::Update {
                            id: id.clone(),
                            patch,
                        });
                    }
                }
                _ => subnets.push(SubnetChange::Create {
                    cidr: cidr.clone(),
                    options: want.clone(),
                }),
            }
        }
        let patch = VnetPatch { options, subnets };
        (!patch.options.is_empty() || !patch.subnets.is_empty()).then_some(patch)
    }

    fn in_use(&self) -> Option<String> {
        self.deleted.then(|| DELETION_PENDING.to_owned())
    }
}

/// Why a VNet's tag does not fit its zone's type (naming the field), as
/// pve-network's `vnet_update_hook` would refuse it.
pub fn tag_refusal(zone_type: &str, tag: Option<u32>) -> Option<String> {
    match (zone_type, tag) {
        ("simple", Some(_)) => {
            Some("spec.forProvider.tag: a VNet in a simple zone has no tag".into())
        }
        ("vlan", None) => {
            Some("spec.forProvider.tag: a VNet in a vlan zone needs its VLAN tag".into())
        }
        ("vxlan", None) => {
            Some("spec.forProvider.tag: a VNet in a vxlan zone needs its VNI".into())
        }
        ("vlan" | "qinq", Some(t)) if t > 4094 => {
            Some(format!("spec.forProvider.tag: {t} is no VLAN tag (1-4094)"))
        }
        _ => None,
    }
}

/// What a provider config's applier does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Look at the apply task in flight.
    Observe,
    /// Apply the pending changes (one `PUT /cluster/sdn`).
    Dispatch,
    /// Nothing now: no pending change, or one of the config's objects is
    /// still on its way (written or refused in a moment), so its change
    /// joins the same apply.
    Wait,
}

/// The applier's decision for one provider config: `in_flight`, an apply
/// task is recorded; `pending`, a pass saw a change not applied; `settled`,
/// every SDN resource of the config had its pass at its generation and
/// none is on its way; `retry_due`, a refused apply's backoff is over.
pub fn step(in_flight: bool, pending: bool, settled: bool, retry_due: bool) -> Step {
    match (in_flight, pending, settled, retry_due) {
        (true, _, _, _) => Step::Observe,
        (false, true, true, true) => Step::Dispatch,
        _ => Step::Wait,
    }
}

/// An object's state in its status: `observed_pending`, its pass saw a
/// change not applied; `applying`, it was pending when the apply in
/// flight was started; `failed`, when the last apply that failed was.
pub fn apply_state(observed_pending: bool, applying: bool, failed: bool) -> ApplyState {
    if observed_pending {
        ApplyState::Pending
    } else if applying {
        ApplyState::Applying
    } else if failed {
        ApplyState::ApplyFailed
    } else {
        ApplyState::Applied
    }
}
