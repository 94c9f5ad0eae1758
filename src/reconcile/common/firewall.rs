//! An ordered firewall rule list brought to what is wanted, one
//! correction at a time, pure: a security group's rules and a guest's
//! alike; and a guest's own firewall (`spec.forProvider.firewall` of a
//! ProxmoxVM or ProxmoxContainer): its options and rules brought to the
//! spec, one synchronous write per pass.
//!
//! A guest's options the spec leaves out are deleted (PVE's default
//! applies). A rule naming a ProxmoxSecurityGroup or ProxmoxIPSet of the
//! namespace waits, sending nothing (options included), until that object
//! is Ready; its Proxmox name comes from its status.
//!
//! PVE places a new rule first and knows a rule only by its position, so
//! one correction per pass, each (but a new rule's placement) guarded by
//! the rule list's digest: a list that changed since it was read refuses
//! the write and the next pass looks again.

use std::collections::BTreeMap;

use pve_client::FirewallOptions;
use pve_client::firewall::{Rule, RuleSpec};

use crate::api::firewall::{
    GuestFirewall, GuestFirewallRule, ObservedFirewall, ObservedFirewallRule,
};
use crate::api::security_group::Address;
use crate::reconcile::common::guest_objects::{self, AliasCall, IpSetCall};

/// The one correction of a rule list a pass sends.
#[derive(Clone, Debug, PartialEq)]
pub enum RulePatch {
    /// New rules, each placed first in turn (so the last sent ends first):
    /// the list observed is what the wanted list ends with.
    Prepend(Vec<RuleSpec>),
    /// A new rule at `at` (placed first, then moved there).
    Insert { at: usize, rule: Box<RuleSpec> },
    /// The rule at `pos` becomes `rule`.
    Set {
        pos: usize,
        rule: Box<RuleSpec>,
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
            Self::Insert { at, rule } => have.insert(*at, rule.as_ref().clone()),
            Self::Set { pos, rule, .. } => {
                if let Some(slot) = have.get_mut(*pos) {
                    *slot = rule.as_ref().clone();
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
        rule: Box::new(want[i].clone()),
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
            rule: Box::new(want[i].clone()),
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

/// The guest's firewall as Proxmox has it, and what the spec's references
/// resolve to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FirewallView {
    /// The options, with their digest.
    pub options: FirewallOptions,
    /// The rules in order, with the list's digest.
    pub rules: Vec<Rule>,
    /// Each ProxmoxSecurityGroup the rules name (Kubernetes name): its
    /// Proxmox name once Ready, else why it cannot be used yet.
    pub groups: BTreeMap<String, Result<String, Unusable>>,
    /// Each ProxmoxIPSet the rules name, as `groups`.
    pub ip_sets: BTreeMap<String, Result<String, Unusable>>,
    /// The guest's own aliases, read only when the spec has `aliases`.
    pub aliases: Option<Vec<pve_client::guest_alias::Alias>>,
    /// The guest's own IP sets by name, read only when the spec has
    /// `ipSets` (the entries only of the sets the spec has).
    pub ip_sets_own: Option<BTreeMap<String, super::ip_set::Set>>,
}

/// Why a referenced object cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unusable {
    /// It does not exist in the namespace: a mistake to correct.
    Missing(String),
    /// It exists but is not Ready yet: waiting, not failing.
    NotReady(String),
}

/// One synchronous write of the guest's firewall.
#[derive(Clone, Debug, PartialEq)]
pub enum FirewallCall {
    /// `PUT .../firewall/options`.
    Options {
        set: Box<FirewallOptions>,
        delete: Vec<&'static str>,
        digest: Option<String>,
    },
    /// One correction of the rules.
    Rules(RulePatch),
    /// One write of the guest's own aliases.
    Alias(AliasCall),
    /// One write of the guest's own IP sets.
    IpSet(IpSetCall),
}

/// What the firewall needs next.
#[derive(Clone, Debug, PartialEq)]
pub enum FirewallNext {
    /// A write (what it does, for people).
    Write(String, FirewallCall),
    /// A referenced object exists but is not Ready: nothing is sent
    /// until it is (the message names the field).
    Waiting(String),
    /// A referenced object is missing, or the spec has what PVE would
    /// refuse: nothing is sent (the message names the field).
    Refused(String),
}

/// The options the spec asks for (`enable` always set).
pub fn wanted_options(fw: &GuestFirewall) -> FirewallOptions {
    FirewallOptions {
        enable: Some(fw.enabled),
        policy_in: fw.policy_in.map(|p| p.as_str().to_owned()),
        policy_out: fw.policy_out.map(|p| p.as_str().to_owned()),
        log_level_in: fw.log_level_in.map(|l| l.as_str().to_owned()),
        log_level_out: fw.log_level_out.map(|l| l.as_str().to_owned()),
        macfilter: fw.mac_filter,
        ipfilter: fw.ip_filter,
        dhcp: fw.dhcp,
        ndp: fw.ndp,
        radv: fw.radv,
        digest: None,
    }
}

/// The options write that brings `have` to `want`, if they differ: what
/// differs is set, what `want` leaves out and `have` has is deleted.
pub fn options_call(want: &FirewallOptions, have: &FirewallOptions) -> Option<FirewallCall> {
    fn pick<T: Clone + PartialEq>(
        key: &'static str,
        want: &Option<T>,
        have: &Option<T>,
        delete: &mut Vec<&'static str>,
    ) -> Option<T> {
        match (want, have) {
            (Some(w), h) if h.as_ref() != Some(w) => Some(w.clone()),
            (None, Some(_)) => {
                delete.push(key);
                None
            }
            (Some(_) | None, _) => None,
        }
    }
    let mut delete = vec![];
    let d = &mut delete;
    let set = FirewallOptions {
        enable: pick("enable", &want.enable, &have.enable, d),
        policy_in: pick("policy_in", &want.policy_in, &have.policy_in, d),
        policy_out: pick("policy_out", &want.policy_out, &have.policy_out, d),
        log_level_in: pick("log_level_in", &want.log_level_in, &have.log_level_in, d),
        log_level_out: pick("log_level_out", &want.log_level_out, &have.log_level_out, d),
        macfilter: pick("macfilter", &want.macfilter, &have.macfilter, d),
        ipfilter: pick("ipfilter", &want.ipfilter, &have.ipfilter, d),
        dhcp: pick("dhcp", &want.dhcp, &have.dhcp, d),
        ndp: pick("ndp", &want.ndp, &have.ndp, d),
        radv: pick("radv", &want.radv, &have.radv, d),
        digest: None,
    };
    (set != FirewallOptions::default() || !delete.is_empty()).then(|| FirewallCall::Options {
        set: Box::new(set),
        delete,
        digest: have.digest.clone(),
    })
}

/// The rules the spec asks for, as PVE is sent them; `Err`: the
/// references not resolved yet ([`FirewallNext::Refused`] if one is
/// missing, else [`FirewallNext::Waiting`]), named.
pub fn wanted_rules(
    fw: &GuestFirewall,
    view: &FirewallView,
    namespace: &str,
) -> Result<Vec<RuleSpec>, Box<FirewallNext>> {
    let mut missing: Vec<String> = vec![];
    let mut waiting: Vec<String> = vec![];
    let mut resolve = |kind: &str,
                       refs: &BTreeMap<String, Result<String, Unusable>>,
                       name: &str| match refs.get(name) {
        Some(Ok(proxmox)) => Some(proxmox.clone()),
        Some(Err(Unusable::NotReady(why))) => {
            waiting.push(why.clone());
            None
        }
        Some(Err(Unusable::Missing(why))) => {
            missing.push(why.clone());
            None
        }
        None => {
            waiting.push(format!("{kind} {namespace}/{name} was not looked up"));
            None
        }
    };
    let mut rules = vec![];
    for rule in &fw.rules {
        if let Some(group) = &rule.security_group {
            let Some(proxmox) = resolve("ProxmoxSecurityGroup", &view.groups, group) else {
                continue;
            };
            rules.push(RuleSpec {
                kind: "group".into(),
                action: proxmox,
                enable: rule.enable,
                iface: rule.iface.clone(),
                comment: rule.comment.clone().filter(|c| !c.is_empty()),
                ..RuleSpec::default()
            });
            continue;
        }
        let mut address = |a: &Option<Address>| -> Option<Option<String>> {
            let Some(a) = a else { return Some(None) };
            if let Some(set) = &a.ip_set {
                return resolve("ProxmoxIPSet", &view.ip_sets, set).map(|p| Some(format!("+{p}")));
            }
            // The guest's own: scoped, so a cluster object of the same
            // name is never meant (PVE looks at the guest's first).
            if let Some(set) = &a.guest_ip_set {
                return Some(Some(format!("+guest/{set}")));
            }
            if let Some(alias) = &a.guest_alias {
                return Some(Some(format!("guest/{alias}")));
            }
            Some(a.cidr.clone().or_else(|| a.alias.clone()))
        };
        let (Some(source), Some(dest)) = (address(&rule.source), address(&rule.dest)) else {
            continue;
        };
        rules.push(plain_rule(rule, source, dest));
    }
    let say = |mut list: Vec<String>| {
        list.sort();
        list.dedup();
        format!("spec.forProvider.firewall.rules: {}", list.join("; "))
    };
    if !missing.is_empty() {
        missing.extend(waiting);
        Err(Box::new(FirewallNext::Refused(say(missing))))
    } else if !waiting.is_empty() {
        Err(Box::new(FirewallNext::Waiting(say(waiting))))
    } else {
        Ok(rules)
    }
}

fn plain_rule(rule: &GuestFirewallRule, source: Option<String>, dest: Option<String>) -> RuleSpec {
    RuleSpec {
        kind: rule
            .direction
            .map(|d| d.as_str().to_owned())
            .unwrap_or_default(),
        action: rule
            .action
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default(),
        enable: rule.enable,
        proto: rule.proto.clone(),
        dport: rule.dport.clone(),
        sport: rule.sport.clone(),
        source,
        dest,
        iface: rule.iface.clone(),
        log: rule.log.map(|l| l.as_str().to_owned()),
        comment: rule.comment.clone().filter(|c| !c.is_empty()),
        icmp_type: None,
        macro_name: None,
    }
}

/// The next write the firewall needs: options first, then the rules;
/// nothing while a reference waits.
/// `guest` names the guest for people (`VM 100`, `container 200`).
pub fn next(
    fw: &GuestFirewall,
    view: &FirewallView,
    namespace: &str,
    guest: &str,
) -> Option<FirewallNext> {
    // Nothing is written, options included, while a reference waits: the
    // firewall is turned on only with the rules it asks for.
    let want = match wanted_rules(fw, view, namespace) {
        Ok(want) => want,
        Err(not_yet) => return Some(*not_yet),
    };
    let objects = match guest_objects::wanted(fw) {
        Ok(objects) => objects,
        Err(why) => return Some(FirewallNext::Refused(why)),
    };
    if let Some(call) = options_call(&wanted_options(fw), &view.options) {
        return Some(FirewallNext::Write(
            format!("setting the firewall options of {guest}"),
            call,
        ));
    }
    let write = |(doing, call)| FirewallNext::Write(doing, call);
    if let Some(next) = guest_objects::before_rules(&objects, view, guest) {
        return Some(write(next));
    }
    let have: Vec<RuleSpec> = view.rules.iter().map(observed_rule).collect();
    let digest = view.rules.first().and_then(|r| r.digest.clone());
    let Some(patch) = rules_patch(&want, &have, digest) else {
        return guest_objects::after_rules(&objects, view, guest).map(write);
    };
    let doing = match &patch {
        RulePatch::Prepend(rules) => format!("adding {} firewall rules to {guest}", rules.len()),
        RulePatch::Insert { at, .. } => format!("adding firewall rule {at} to {guest}"),
        RulePatch::Set { pos, .. } => format!("correcting firewall rule {pos} of {guest}"),
        RulePatch::Remove { pos, .. } => format!("removing firewall rule {pos} of {guest}"),
    };
    Some(FirewallNext::Write(doing, FirewallCall::Rules(patch)))
}

/// The firewall as `status.atProvider.firewall` shows it.
pub fn observed(view: &FirewallView) -> ObservedFirewall {
    let o = &view.options;
    ObservedFirewall {
        enabled: o.enable,
        policy_in: o.policy_in.clone(),
        policy_out: o.policy_out.clone(),
        log_level_in: o.log_level_in.clone(),
        log_level_out: o.log_level_out.clone(),
        mac_filter: o.macfilter,
        ip_filter: o.ipfilter,
        dhcp: o.dhcp,
        ndp: o.ndp,
        radv: o.radv,
        rules: view
            .rules
            .iter()
            .map(|r| {
                let group = r.kind == "group";
                ObservedFirewallRule {
                    security_group: group.then(|| r.action.clone()),
                    direction: (!group).then(|| r.kind.clone()),
                    action: (!group).then(|| r.action.clone()),
                    proto: r.proto.clone(),
                    dport: r.dport.clone(),
                    sport: r.sport.clone(),
                    source: r.source.clone(),
                    dest: r.dest.clone(),
                    iface: r.iface.clone(),
                    log: r.log.clone(),
                    comment: r.comment.clone(),
                    enable: r.enable.unwrap_or_default() != 0,
                }
            })
            .collect(),
        aliases: (view.aliases.iter().flatten())
            .map(|a| format!("{}={}", a.name, a.cidr))
            .collect(),
        ip_sets: (view.ip_sets_own.iter().flatten())
            .map(|(name, set)| {
                let entries = set.entries.iter();
                let entries =
                    entries.map(|e| format!("{}{}", if e.nomatch { "!" } else { "" }, e.cidr));
                (name.clone(), entries.collect())
            })
            .collect(),
    }
}
