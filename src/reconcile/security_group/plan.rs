//! The security group's managed fields and how drift in them is corrected,
//! pure.
//!
//! Rules are compared in order. PVE places a new rule first and knows a
//! rule only by its position, so one correction per pass, each (but a
//! new rule's placement) guarded by the rule list's digest: a list that
//! changed since it was read refuses the write and the next pass looks
//! again.

use pve_client::firewall::{Rule, RuleSpec};

pub use crate::api::security_group::ip_sets;
use crate::api::security_group::{Address, SecurityGroupRule};
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
    /// New rules, each placed first in turn (so the last sent ends first):
    /// the list observed is what the wanted list ends with.
    Prepend(Vec<RuleSpec>),
    /// A new rule at `at` (placed first, then moved there).
    Insert { at: usize, rule: RuleSpec },
    /// The rule at `pos` becomes `rule`.
    Set {
        pos: usize,
        rule: RuleSpec,
        digest: Option<String>,
    },
    /// The rule at `pos` goes.
    Remove { pos: usize, digest: Option<String> },
}

impl Diff for Group {
    type Patch = GroupPatch;

    fn diff(&self, observed: &Self) -> Option<GroupPatch> {
        if self.comment != observed.comment {
            return Some(GroupPatch::Comment(self.comment.clone()));
        }
        rules_patch(&self.rules, &observed.rules, observed.digest.clone())
    }
}

/// The first correction that brings `have` towards `want`.
fn rules_patch(want: &[RuleSpec], have: &[RuleSpec], digest: Option<String>) -> Option<GroupPatch> {
    let (n, m) = (want.len(), have.len());
    if want == have {
        return None;
    }
    if m < n && want[n - m..] == *have {
        return Some(GroupPatch::Prepend(
            want[..n - m].iter().rev().cloned().collect(),
        ));
    }
    let i = (0..n.min(m))
        .find(|&i| want[i] != have[i])
        .unwrap_or(n.min(m));
    let insert = || GroupPatch::Insert {
        at: i,
        rule: want[i].clone(),
    };
    let remove = |pos| GroupPatch::Remove {
        pos,
        digest: digest.clone(),
    };
    Some(if i == n {
        remove(n)
    } else if i == m || (i + 1 < n && have[i] == want[i + 1]) {
        insert()
    } else if i + 1 < m && have[i + 1] == want[i] {
        remove(i)
    } else {
        GroupPatch::Set {
            pos: i,
            rule: want[i].clone(),
            digest: digest.clone(),
        }
    })
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

/// A rule as observed, in the same terms.
pub fn observed_rule(rule: &Rule) -> RuleSpec {
    RuleSpec {
        kind: rule.kind.clone(),
        action: rule.action.clone(),
        enable: rule.enable.unwrap_or_default() != 0,
        proto: rule.proto.clone(),
        dport: rule.dport.clone(),
        sport: rule.sport.clone(),
        source: rule.source.clone(),
        dest: rule.dest.clone(),
        iface: rule.iface.clone(),
        log: rule.log.clone(),
        comment: rule.comment.clone().filter(|c| !c.is_empty()),
        icmp_type: rule.icmp_type.clone(),
        macro_name: rule.macro_name.clone(),
    }
}
