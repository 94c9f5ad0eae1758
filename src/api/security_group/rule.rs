//! One rule of a security group, with what Proxmox would refuse refused
//! at apply time (pve-firewall's `verify_rule` for group rules).

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::rules::{NO_CONTROL, NO_CONTROL_MESSAGE};

/// A firewall rule.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(self.type == 'forward' && self.action == 'REJECT')")
        .message("action: REJECT is not allowed on the forward chain"),
    validation = Rule::new("!has(self.dport) || has(self.proto)")
        .message("dport needs proto"),
    validation = Rule::new("!has(self.sport) || has(self.proto)")
        .message("sport needs proto"),
    validation = Rule::new("!has(self.sport) || self.proto in ['tcp', 'udp', 'udplite', 'sctp', 'dccp', '6', '17', '33', '132', '136']")
        .message("sport: the protocol has no ports (use tcp, udp, udplite, sctp or dccp)"),
    validation = Rule::new("!has(self.dport) || self.proto in ['tcp', 'udp', 'udplite', 'sctp', 'dccp', '6', '17', '33', '132', '136']")
        .message("dport: the protocol has no ports (use tcp, udp, udplite, sctp or dccp)"),
    validation = Rule::new("!has(self.source) || !(has(self.source.guestIpSet) || has(self.source.guestAlias))")
        .message("source: guestIpSet and guestAlias name a guest's own objects; a security group's rules cannot"),
    validation = Rule::new("!has(self.dest) || !(has(self.dest.guestIpSet) || has(self.dest.guestAlias))")
        .message("dest: guestIpSet and guestAlias name a guest's own objects; a security group's rules cannot")
)]
pub struct SecurityGroupRule {
    /// Direction: `in`, `out` or `forward` (PVE 8.3 or later).
    #[serde(rename = "type")]
    pub direction: RuleDirection,

    /// `ACCEPT`, `DROP` or `REJECT`.
    pub action: RuleAction,

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

    /// Where packets come from. Left out: anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Address>,

    /// Where packets go. Left out: anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest: Option<Address>,

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

/// CEL: a comma list of ports, service names and ranges (`parse_port_name_number_or_range`).
pub const PORTS: &str = "self.matches('^([0-9]{1,5}|[a-z][a-z0-9-]*)(:([0-9]{1,5}|[a-z][a-z0-9-]*))?(,([0-9]{1,5}|[a-z][a-z0-9-]*)(:([0-9]{1,5}|[a-z][a-z0-9-]*))?)*$')";
/// The refusal of [`PORTS`].
pub const PORTS_MESSAGE: &str =
    "must be a comma list of ports, service names and ranges a:b, e.g. 22,80,8000:8100";

fn yes() -> bool {
    true
}

/// An address a rule matches: exactly one of `cidr`, `ipSet`, `alias`,
/// and in a guest's own rules `guestIpSet`, `guestAlias`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.cidr), has(self.ipSet), has(self.alias), has(self.guestIpSet), has(self.guestAlias)].filter(x, x).size() == 1")
        .message("exactly one of cidr, ipSet, alias, guestIpSet and guestAlias must be set")
)]
pub struct Address {
    /// An IP address or CIDR network, e.g. `10.0.0.0/8` or `fd00::1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 64))]
    #[x_kube(validation = Rule::new("isIP(self) || isCIDR(self)")
        .message("cidr must be an IP address or a CIDR network such as 10.0.0.0/8"))]
    pub cidr: Option<String>,

    /// The name of a ProxmoxIPSet in this resource's namespace (its
    /// Kubernetes name: the provider resolves it to the Proxmox name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub ip_set: Option<String>,

    /// The name of a cluster firewall alias that exists on Proxmox (not
    /// managed by this provider), e.g. `office`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z][A-Za-z0-9_-]+$')")
        .message("alias must be a Proxmox alias name: a letter, then letters, digits, - and _"))]
    pub alias: Option<String>,

    /// An IP set of the guest's own (`firewall.ipSets`), by name; sent as
    /// `+guest/<name>`. Only in a ProxmoxVM's or ProxmoxContainer's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 64))]
    pub guest_ip_set: Option<String>,

    /// An alias of the guest's own (`firewall.aliases`), by name; sent as
    /// `guest/<name>`. Only in a ProxmoxVM's or ProxmoxContainer's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 64))]
    pub guest_alias: Option<String>,
}

/// A rule's direction.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleDirection {
    /// Packets to the guest.
    In,
    /// Packets from the guest.
    Out,
    /// Packets routed through (PVE 8.3 or later).
    Forward,
}

impl RuleDirection {
    /// Proxmox's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "in",
            Self::Out => "out",
            Self::Forward => "forward",
        }
    }
}

/// What a rule does with the packets it matches.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum RuleAction {
    /// Let them through.
    Accept,
    /// Drop them silently.
    Drop,
    /// Refuse them (not on the forward chain).
    Reject,
}

impl RuleAction {
    /// Proxmox's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "ACCEPT",
            Self::Drop => "DROP",
            Self::Reject => "REJECT",
        }
    }
}

/// A rule's log level.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleLog {
    Emerg,
    Alert,
    Crit,
    Err,
    Warning,
    Notice,
    Info,
    Debug,
    Nolog,
}

impl RuleLog {
    /// Proxmox's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Emerg => "emerg",
            Self::Alert => "alert",
            Self::Crit => "crit",
            Self::Err => "err",
            Self::Warning => "warning",
            Self::Notice => "notice",
            Self::Info => "info",
            Self::Debug => "debug",
            Self::Nolog => "nolog",
        }
    }
}

/// The IP sets (Kubernetes names) the rules name: what the group needs to
/// exist, and what keeps a set from being deleted.
pub fn ip_sets(rules: &[SecurityGroupRule]) -> Vec<&str> {
    let mut out: Vec<&str> = rules
        .iter()
        .flat_map(|r| [&r.source, &r.dest])
        .filter_map(|a| a.as_ref()?.ip_set.as_deref())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}
