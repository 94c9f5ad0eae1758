//! The security group's managed fields and how drift in them is corrected,
//! pure. Rules are compared in order and corrected one at a time
//! ([`crate::reconcile::common::firewall`]).

use pve_client::firewall::RuleSpec;

pub use crate::api::security_group::ip_sets;
use crate::api::security_group::{Address, SecurityGroupRule};
pub use crate::reconcile::common::firewall::observed_rule;
use crate::reconcile::common::firewall::{RulePatch, rules_patch};
use crate::reconcile::managed::crud::Diff;

/// pve-firewall's maximum security group name length.
pub const GROUP_NAME_MAX: usize = 18;
/// pve-firewall's maximum IP set name length.
pub const IPSET_NAME_MAX: usize = 64;

/// A security group as managed: its comment (with the owner marker) and
/// rules; `digest`: the observed rule list's (not compared).
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub comment: String,
    pub rules: Vec<RuleSpec>,
    pub digest: Option<String>,
}

/// The one correction a pass sends.
#[derive(Clone, Debug, PartialEq)]
pub enum GroupPatch {
    /// The group's comment.
    Comment(String),
    /// A correction of its rules.
    Rules(RulePatch),
}

impl Diff for Group {
    type Patch = GroupPatch;

    fn diff(&self, observed: &Self) -> Option<GroupPatch> {
        if self.comment != observed.comment {
            return Some(GroupPatch::Comment(self.comment.clone()));
        }
        rules_patch(&self.rules, &observed.rules, observed.digest.clone()).map(GroupPatch::Rules)
    }
}

/// A spec rule as PVE is sent (and shows) it; `ip_set`: the Proxmox name
/// of a ProxmoxIPSet of the namespace.
pub fn rule_spec(rule: &SecurityGroupRule, ip_set: impl Fn(&str) -> String) -> RuleSpec {
    let address = |a: &Option<Address>| {
        a.as_ref().and_then(|a| {
            a.cidr
                .clone()
                .or_else(|| a.alias.clone())
                .or_else(|| a.ip_set.as_deref().map(|s| format!("+{}", ip_set(s))))
        })
    };
    RuleSpec {
        kind: rule.direction.as_str().to_owned(),
        action: rule.action.as_str().to_owned(),
        enable: rule.enable,
        proto: rule.proto.clone(),
        dport: rule.dport.clone(),
        sport: rule.sport.clone(),
        source: address(&rule.source),
        dest: address(&rule.dest),
        iface: None,
        log: rule.log.map(|l| l.as_str().to_owned()),
        comment: rule.comment.clone().filter(|c| !c.is_empty()),
        icmp_type: None,
        macro_name: None,
    }
}
