//! `spec.forProvider.firewall` of ProxmoxVM and ProxmoxContainer: the
//! guest's own Proxmox firewall (its options and ordered rules, a rule
//! either matching packets or naming a ProxmoxSecurityGroup), and its
//! observed copy for `status.atProvider.firewall`.
//!
//! Left out, the provider does not touch the guest's firewall at all.
//! Given, Proxmox holds exactly what it says: an option left out is
//! removed (PVE's default applies), a rule changed, added, moved or
//! deleted on Proxmox is put back.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::ip_set::IPSetEntry;
use crate::api::rules::{NO_CONTROL, NO_CONTROL_MESSAGE};
use crate::api::security_group::{Address, PORTS, PORTS_MESSAGE, RuleAction, RuleLog};

/// The guest's firewall.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.rules.all(r, !has(r.source) || !has(r.source.guestIpSet) || (has(self.ipSets) && self.ipSets.exists(s, s.name == r.source.guestIpSet)))")
        .message("rules: a source guestIpSet must name one of ipSets"),
    validation = Rule::new("self.rules.all(r, !has(r.dest) || !has(r.dest.guestIpSet) || (has(self.ipSets) && self.ipSets.exists(s, s.name == r.dest.guestIpSet)))")
        .message("rules: a dest guestIpSet must name one of ipSets"),
    validation = Rule::new("self.rules.all(r, !has(r.source) || !has(r.source.guestAlias) || (has(self.aliases) && self.aliases.exists(a, a.name == r.source.guestAlias)))")
        .message("rules: a source guestAlias must name one of aliases"),
    validation = Rule::new("self.rules.all(r, !has(r.dest) || !has(r.dest.guestAlias) || (has(self.aliases) && self.aliases.exists(a, a.name == r.dest.guestAlias)))")
        .message("rules: a dest guestAlias must name one of aliases")
)]
pub struct GuestFirewall {
    /// Whether the guest's firewall is on (`enable`). Default `true`.
    /// A NIC is filtered only when its own `firewall` is also on.
    #[serde(default = "yes")]
    pub enabled: bool,

    /// What happens to incoming packets no rule matched. Left out:
    /// Proxmox's default (`DROP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_in: Option<RuleAction>,

    /// What happens to outgoing packets no rule matched. Left out:
    /// Proxmox's default (`ACCEPT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_out: Option<RuleAction>,

    /// Log level of incoming traffic. Left out: no log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level_in: Option<RuleLog>,

    /// Log level of outgoing traffic. Left out: no log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level_out: Option<RuleLog>,

    /// Drop packets whose source MAC is not the NIC's. Left out:
    /// Proxmox's default (on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_filter: Option<bool>,

    /// Drop packets whose source IP is not the guest's (`ipfilter-net*`
    /// sets, else its link-local and configured addresses). Left out:
    /// Proxmox's default (off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_filter: Option<bool>,

    /// Allow DHCP. Left out: Proxmox's default (off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<bool>,

    /// Allow IPv6 neighbor discovery. Left out: Proxmox's default (on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ndp: Option<bool>,

    /// Allow the guest to send IPv6 router advertisements. Left out:
    /// Proxmox's default (off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radv: Option<bool>,

    /// The guest's rules, first match first. Proxmox holds exactly these,
    /// in this order.
    #[serde(default)]
    #[schemars(length(max = 100))]
    pub rules: Vec<GuestFirewallRule>,

    /// The guest's own aliases, which its rules name as `guestAlias`.
    /// Left out: the guest's aliases are not read or touched. Given (even
    /// `[]`): Proxmox holds exactly these (others are removed, once no
    /// rule names them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("self.all(a, self.exists_one(b, b.name == a.name))")
        .message("aliases: each name once"))]
    pub aliases: Option<Vec<GuestAlias>>,

    /// The guest's own IP sets, which its rules name as `guestIpSet`.
    /// Left out: the guest's IP sets are not read or touched. Given (even
    /// `[]`): Proxmox holds exactly these, with exactly their entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new("self.all(a, self.exists_one(b, b.name == a.name))")
        .message("ipSets: each name once"))]
    pub ip_sets: Option<Vec<GuestIPSet>>,
}

/// A CEL rule: a name of a guest alias or IP set as PVE keeps it (this
/// provider takes lower case only: PVE keys aliases by the lowercased
/// name, so `Web` would read back as another name).
const OWN_NAME: &str = "self.matches('^[a-z][a-z0-9_-]+$')";
const OWN_NAME_MESSAGE: &str =
    "name must be a lowercase letter, then lowercase letters, digits, - and _";

/// One of a guest's own aliases (`.../firewall/aliases`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GuestAlias {
    /// The alias's name, e.g. `gateway`.
    #[schemars(length(min = 2, max = 64))]
    #[x_kube(validation = Rule::new(OWN_NAME).message(OWN_NAME_MESSAGE))]
    pub name: String,

    /// An IP address or CIDR network, e.g. `10.0.0.1` or `10.0.0.0/24`.
    #[schemars(length(min = 2, max = 64))]
    #[x_kube(validation = Rule::new("isIP(self) || isCIDR(self)")
        .message("cidr must be an IP address or a CIDR network such as 10.0.0.0/24"))]
    pub cidr: String,

    /// A note on the alias (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[x_kube(validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE))]
    pub comment: Option<String>,
}

/// One of a guest's own IP sets (`.../firewall/ipset`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GuestIPSet {
    /// The set's name, e.g. `peers`. Rules name it as `guestIpSet`.
    #[schemars(length(min = 2, max = 64))]
    #[x_kube(validation = Rule::new(OWN_NAME).message(OWN_NAME_MESSAGE))]
    pub name: String,

    /// A note on the set (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[x_kube(validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE))]
    pub comment: Option<String>,

    /// Its entries: addresses and networks, `nomatch` ones excluded.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub entries: Vec<IPSetEntry>,
}

fn yes() -> bool {
    true
}

/// A rule of a guest's firewall: either a rule matching packets (`type`
/// and `action`, and the match) or a reference to a security group
/// (`securityGroup`, with `iface` and `enable` only).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.securityGroup) != (has(self.type) || has(self.action))")
        .message("exactly one of a rule (type and action) and securityGroup must be set"),
    validation = Rule::new("has(self.securityGroup) || (has(self.type) && has(self.action))")
        .message("a rule needs type and action"),
    validation = Rule::new("!has(self.securityGroup) || [has(self.proto), has(self.dport), has(self.sport), has(self.source), has(self.dest), has(self.log)].all(x, !x)")
        .message("securityGroup: a security group reference takes only iface, comment and enable"),
    validation = Rule::new("!has(self.dport) || has(self.proto)")
        .message("dport needs proto"),
    validation = Rule::new("!has(self.sport) || has(self.proto)")
        .message("sport needs proto"),
    validation = Rule::new("!has(self.sport) || self.proto in ['tcp', 'udp', 'udplite', 'sctp', 'dccp', '6', '17', '33', '132', '136']")
        .message("sport: the protocol has no ports (use tcp, udp, udplite, sctp or dccp)"),
    validation = Rule::new("!has(self.dport) || self.proto in ['tcp', 'udp', 'udplite', 'sctp', 'dccp', '6', '17', '33', '132', '136']")
        .message("dport: the protocol has no ports (use tcp, udp, udplite, sctp or dccp)")
)]
pub struct GuestFirewallRule {
    /// A ProxmoxSecurityGroup of this resource's namespace, by its
    /// Kubernetes name: its rules apply here, in this place (the provider
    /// names its Proxmox name). The guest waits until the group is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub security_group: Option<String>,

    /// Direction: `in` (to the guest) or `out` (from the guest).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub direction: Option<GuestRuleDirection>,

    /// `ACCEPT`, `DROP` or `REJECT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<RuleAction>,

    /// Protocol name (`tcp`, `udp`, `icmp`, ...) or number (0-255).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16))]
    #[x_kube(validation = Rule::new("self.matches('^([a-z][a-z0-9-]*|[0-9]{1,3})$')")
        .message("proto must be a protocol name such as tcp or a number"))]
    pub proto: Option<String>,

    /// Destination ports: a list of ports, service names and ranges
    /// `a:b`, e.g. `22,80,8000:8100`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(validation = Rule::new(PORTS).message(PORTS_MESSAGE))]
    pub dport: Option<String>,

    /// Source ports, as `dport`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    #[x_kube(validation = Rule::new(PORTS).message(PORTS_MESSAGE))]
    pub sport: Option<String>,

    /// Where packets come from: a CIDR, a ProxmoxIPSet of this namespace
    /// (`ipSet`, by Kubernetes name) or a cluster alias. Left out:
    /// anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Address>,

    /// Where packets go, as `source`. Left out: anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest: Option<Address>,

    /// The guest's NIC the rule applies to (`net0`, `net1`, ...). Left
    /// out: every NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 4, max = 8))]
    #[x_kube(validation = Rule::new("self.matches('^net[0-9]+$')")
        .message("iface must name a NIC of the guest: net0, net1, ..."))]
    pub iface: Option<String>,

    /// Log level for packets the rule matches (left out: no log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<RuleLog>,

    /// A note on the rule (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[x_kube(validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE))]
    pub comment: Option<String>,

    /// Whether the rule is in force (default `true`).
    #[serde(default = "yes")]
    pub enable: bool,
}

/// A guest rule's direction (a guest's rules have no forward chain).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GuestRuleDirection {
    /// Packets to the guest.
    In,
    /// Packets from the guest.
    Out,
}

impl GuestRuleDirection {
    /// Proxmox's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "in",
            Self::Out => "out",
        }
    }
}

impl GuestFirewall {
    /// The ProxmoxSecurityGroups (Kubernetes names) the rules name.
    pub fn security_groups(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .rules
            .iter()
            .filter_map(|r| r.security_group.as_deref())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The ProxmoxIPSets (Kubernetes names) the rules name.
    pub fn ip_sets(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .rules
            .iter()
            .flat_map(|r| [&r.source, &r.dest])
            .filter_map(|a| a.as_ref()?.ip_set.as_deref())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The guest's firewall as Proxmox shows it, in the shape of
/// `spec.forProvider.firewall` (a status carries no CEL): the options
/// set, and the rules as Proxmox has them (a security group and an IP set
/// by their Proxmox names).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedFirewall {
    /// `enable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Input policy (`policy_in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_in: Option<String>,
    /// Output policy (`policy_out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_out: Option<String>,
    /// Log level of incoming traffic (`log_level_in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level_in: Option<String>,
    /// Log level of outgoing traffic (`log_level_out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level_out: Option<String>,
    /// MAC filter (`macfilter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_filter: Option<bool>,
    /// IP filter (`ipfilter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_filter: Option<bool>,
    /// DHCP allowed (`dhcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp: Option<bool>,
    /// Neighbor discovery allowed (`ndp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ndp: Option<bool>,
    /// Router advertisements allowed (`radv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub radv: Option<bool>,
    /// The rules in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<ObservedFirewallRule>,
    /// The guest's own aliases as `name=cidr` (read only when the spec
    /// has `aliases`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// The guest's own IP sets by name, each with its entries as Proxmox
    /// keeps them (`!` before a `nomatch` one; read only when the spec has
    /// `ipSets`, the entries of the sets it names).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ip_sets: BTreeMap<String, Vec<String>>,
}

/// A rule as Proxmox shows it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedFirewallRule {
    /// The Proxmox name of the security group a `type: group` rule names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group: Option<String>,
    /// `in` or `out` (absent for a group).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// `ACCEPT`, `DROP` or `REJECT` (absent for a group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<String>,
    /// Destination ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<String>,
    /// Source ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<String>,
    /// As Proxmox has it: a CIDR, an alias or `+<IP set's Proxmox name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// As `source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest: Option<String>,
    /// The NIC (`netN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iface: Option<String>,
    /// Log level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// The rule's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Whether the rule is in force.
    pub enable: bool,
}
