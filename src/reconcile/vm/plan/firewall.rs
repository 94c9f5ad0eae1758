//! The VM's own firewall (`spec.forProvider.firewall`): its options and
//! ordered rules brought to the spec, one synchronous write per pass.
//!
//! Absent from the spec, the firewall is not read and never written.
//! Options the spec leaves out are deleted (PVE's default applies); the
//! rules are corrected one at a time as a security group's are
//! ([`crate::reconcile::common::firewall`]), each guarded by the digest it
//! was decided on. A rule naming a ProxmoxSecurityGroup or ProxmoxIPSet
//! of the namespace waits, sending nothing, until that object is Ready;
//! its Proxmox name comes from its status.

use std::collections::BTreeMap;

use pve_client::FirewallOptions;
use pve_client::firewall::{Rule, RuleSpec};

use super::context::Ctx;
use crate::api::firewall::{
    GuestFirewall, GuestFirewallRule, ObservedFirewall, ObservedFirewallRule,
};
use crate::api::security_group::Address;
use crate::reconcile::common::firewall::{RulePatch, observed_rule, rules_patch};

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
    pub groups: BTreeMap<String, Result<String, String>>,
    /// Each ProxmoxIPSet the rules name, as `groups`.
    pub ip_sets: BTreeMap<String, Result<String, String>>,
}

/// One synchronous write of the guest's firewall.
#[derive(Clone, Debug, PartialEq)]
pub enum FirewallCall {
    /// `PUT .../firewall/options`.
    Options {
        set: FirewallOptions,
        delete: Vec<&'static str>,
        digest: Option<String>,
    },
    /// One correction of the rules.
    Rules(RulePatch),
}

/// A firewall write to the VM `vmid` on `node`.
#[derive(Clone, Debug, PartialEq)]
pub struct FirewallWrite {
    pub node: String,
    pub vmid: u32,
    pub call: FirewallCall,
}

/// What the firewall needs next.
#[derive(Clone, Debug, PartialEq)]
pub enum FirewallNext {
    /// A write (what it does, for people).
    Write(String, FirewallCall),
    /// A referenced object is missing or not Ready: nothing is sent.
    Waiting(String),
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
        set,
        delete,
        digest: have.digest.clone(),
    })
}

/// The rules the spec asks for, as PVE is sent them; `Err`: the
/// references not resolved yet, named.
pub fn wanted_rules(
    fw: &GuestFirewall,
    view: &FirewallView,
    namespace: &str,
) -> Result<Vec<RuleSpec>, String> {
    let mut waiting: Vec<String> = vec![];
    let mut resolve =
        |kind: &str, refs: &BTreeMap<String, Result<String, String>>, name: &str| match refs
            .get(name)
        {
            Some(Ok(proxmox)) => Some(proxmox.clone()),
            Some(Err(why)) => {
                waiting.push(why.clone());
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
            Some(a.cidr.clone().or_else(|| a.alias.clone()))
        };
        let (Some(source), Some(dest)) = (address(&rule.source), address(&rule.dest)) else {
            continue;
        };
        rules.push(plain_rule(rule, source, dest));
    }
    if waiting.is_empty() {
        Ok(rules)
    } else {
        waiting.sort();
        waiting.dedup();
        Err(waiting.join("; "))
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
pub fn next(
    fw: &GuestFirewall,
    view: &FirewallView,
    namespace: &str,
    vmid: u32,
) -> Option<FirewallNext> {
    // Nothing is written, options included, while a reference waits: the
    // firewall is turned on only with the rules it asks for.
    let want = match wanted_rules(fw, view, namespace) {
        Ok(want) => want,
        Err(why) => return Some(FirewallNext::Waiting(why)),
    };
    if let Some(call) = options_call(&wanted_options(fw), &view.options) {
        return Some(FirewallNext::Write(
            format!("setting the firewall options of VM {vmid}"),
            call,
        ));
    }
    let have: Vec<RuleSpec> = view.rules.iter().map(observed_rule).collect();
    let digest = view.rules.first().and_then(|r| r.digest.clone());
    let patch = rules_patch(&want, &have, digest)?;
    let doing = match &patch {
        RulePatch::Prepend(rules) => format!("adding {} firewall rules to VM {vmid}", rules.len()),
        RulePatch::Insert { at, .. } => format!("adding firewall rule {at} to VM {vmid}"),
        RulePatch::Set { pos, .. } => format!("correcting firewall rule {pos} of VM {vmid}"),
        RulePatch::Remove { pos, .. } => format!("removing firewall rule {pos} of VM {vmid}"),
    };
    Some(FirewallNext::Write(doing, FirewallCall::Rules(patch)))
}

/// What the firewall of this pass's VM (on `node`) needs, when the spec
/// declares one and it was read.
pub(super) fn converge(ctx: &Ctx, node: &str) -> Option<Result<(String, FirewallWrite), String>> {
    let fw = ctx.spec.firewall.as_ref()?;
    let view = ctx.obs.firewall.as_ref()?;
    let vmid = ctx.vmid()?;
    Some(match next(fw, view, &ctx.id.namespace, vmid)? {
        FirewallNext::Write(doing, call) => Ok((
            doing,
            FirewallWrite {
                node: node.to_owned(),
                vmid,
                call,
            },
        )),
        FirewallNext::Waiting(why) => Err(why),
    })
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
    }
}
