//! An ordered firewall rule list brought to what is wanted, one
//! correction at a time, pure: a security group's rules and a guest's
//! alike.
//!
//! PVE places a new rule first and knows a rule only by its position, so
//! one correction per pass, each (but a new rule's placement) guarded by
//! the rule list's digest: a list that changed since it was read refuses
//! the write and the next pass looks again.

use pve_client::firewall::{Rule, RuleSpec};

/// The one correction of a rule list a pass sends.
#[derive(Clone, Debug, PartialEq)]
pub enum RulePatch {
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

impl RulePatch {
    /// What PVE's list becomes once the patch is applied (the table tests'
    /// model of PVE).
    pub fn apply(&self, have: &mut Vec<RuleSpec>) {
        match self {
            Self::Prepend(rules) => rules.iter().for_each(|r| have.insert(0, r.clone())),
            Self::Insert { at, rule } => have.insert(*at, rule.clone()),
            Self::Set { pos, rule, .. } => {
                if let Some(slot) = have.get_mut(*pos) {
                    *slot = rule.clone();
                }
            }
            Self::Remove { pos, .. } => {
                if *pos < have.len() {
                    have.remove(*pos);
                }
            }
        }
    }

    /// The position in the wanted list a refusal of this patch concerns.
    pub fn wanted_index(&self) -> Option<usize> {
        match self {
            Self::Prepend(_) | Self::Remove { .. } => None,
            Self::Insert { at, .. } => Some(*at),
            Self::Set { pos, .. } => Some(*pos),
        }
    }
}

/// The first correction that brings `have` towards `want`.
pub fn rules_patch(
    want: &[RuleSpec],
    have: &[RuleSpec],
    digest: Option<String>,
) -> Option<RulePatch> {
    let (n, m) = (want.len(), have.len());
    if want == have {
        return None;
    }
    if m < n && want[n - m..] == *have {
        return Some(RulePatch::Prepend(
            want[..n - m].iter().rev().cloned().collect(),
        ));
    }
    let i = (0..n.min(m))
        .find(|&i| want[i] != have[i])
        .unwrap_or(n.min(m));
    let insert = || RulePatch::Insert {
        at: i,
        rule: want[i].clone(),
    };
    let remove = |pos| RulePatch::Remove {
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
        RulePatch::Set {
            pos: i,
            rule: want[i].clone(),
            digest: digest.clone(),
        }
    })
}

/// A rule as observed, in the terms it is sent in.
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
