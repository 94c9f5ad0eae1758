//! A guest's own aliases and IP sets (`spec.forProvider.firewall.aliases`
//! and `.ipSets` of a ProxmoxVM or ProxmoxContainer), brought to the spec
//! one synchronous write per pass, pure.
//!
//! Each is managed only when the spec has its list (left out: not read,
//! not touched). What the rules name must exist before a rule naming it
//! is sent (PVE refuses a rule naming an unknown alias or set), and must
//! not go while a rule still names it: so additions and changes come
//! before the rules, removals after them.

use std::collections::BTreeMap;

use pve_client::guest_alias::Alias;

use super::firewall::{FirewallCall, FirewallView};
use super::ip_set::{Set, SetPatch, entries};
use crate::api::firewall::GuestFirewall;

/// One write of a guest alias.
#[derive(Clone, Debug, PartialEq)]
pub enum AliasCall {
    /// `POST .../aliases`.
    Create(WantedAlias),
    /// `PUT .../aliases/{name}`, if the list still has `digest`.
    Update {
        alias: WantedAlias,
        digest: Option<String>,
    },
    /// `DELETE .../aliases/{name}`, if the list still has `digest`.
    Delete {
        name: String,
        digest: Option<String>,
    },
}

/// One write of a guest IP set.
#[derive(Clone, Debug, PartialEq)]
pub enum IpSetCall {
    /// `POST .../ipset`: a new, empty set.
    Create { name: String, comment: String },
    /// A correction of the set `name` (its comment or one entry change).
    Patch { name: String, patch: SetPatch },
    /// `DELETE .../ipset/{name}` with `force`.
    Delete { name: String },
}

/// An alias as sent and as compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedAlias {
    pub name: String,
    pub cidr: String,
    pub comment: Option<String>,
}

/// What the spec asks of the guest's objects, as PVE keeps them; `None`:
/// not managed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WantedObjects {
    pub aliases: Option<Vec<WantedAlias>>,
    pub sets: Option<BTreeMap<String, Set>>,
}

/// The address as PVE keeps an alias's (`parse_ip_or_cidr`: `/32` and
/// `/128` dropped, nothing else changed).
fn alias_cidr(cidr: &str) -> String {
    cidr.strip_suffix("/32")
        .filter(|a| !a.contains(':'))
        .or_else(|| cidr.strip_suffix("/128").filter(|a| a.contains(':')))
        .unwrap_or(cidr)
        .to_owned()
}

/// The spec's aliases and sets as PVE keeps them; `Err`: an entry PVE
/// would refuse, naming the field.
pub fn wanted(fw: &GuestFirewall) -> Result<WantedObjects, String> {
    let aliases = fw.aliases.as_ref().map(|list| {
        list.iter()
            .map(|a| WantedAlias {
                name: a.name.clone(),
                cidr: alias_cidr(&a.cidr),
                comment: a.comment.clone().filter(|c| !c.is_empty()),
            })
            .collect()
    });
    let sets = match &fw.ip_sets {
        None => None,
        Some(list) => {
            let mut out = BTreeMap::new();
            for (i, s) in list.iter().enumerate() {
                let field = format!("spec.forProvider.firewall.ipSets[{i}].entries");
                let set = Set {
                    comment: s.comment.clone().unwrap_or_default(),
                    entries: entries(&s.entries, &field)?,
                    digest: None,
                };
                out.insert(s.name.clone(), set);
            }
            Some(out)
        }
    };
    Ok(WantedObjects { aliases, sets })
}

fn observed_alias(a: &Alias) -> WantedAlias {
    WantedAlias {
        name: a.name.to_lowercase(),
        cidr: a.cidr.clone(),
        comment: a.comment.clone().filter(|c| !c.is_empty()),
    }
}

/// The next addition or change (before the rules), if any.
pub fn before_rules(
    want: &WantedObjects,
    view: &FirewallView,
    guest: &str,
) -> Option<(String, FirewallCall)> {
    if let (Some(want), Some(have)) = (&want.aliases, &view.aliases) {
        let digest = have.first().and_then(|a| a.digest.clone());
        for w in want {
            let found = have.iter().map(observed_alias).find(|h| h.name == w.name);
            let call = match found {
                None => AliasCall::Create(w.clone()),
                Some(h) if h != *w => AliasCall::Update {
                    alias: w.clone(),
                    digest,
                },
                Some(_) => continue,
            };
            let doing = match &call {
                AliasCall::Create(_) => format!("adding firewall alias {} to {guest}", w.name),
                _ => format!("correcting firewall alias {} of {guest}", w.name),
            };
            return Some((doing, FirewallCall::Alias(call)));
        }
    }
    if let (Some(want), Some(have)) = (&want.sets, &view.ip_sets_own) {
        for (name, w) in want {
            let Some(h) = have.get(name) else {
                let call = IpSetCall::Create {
                    name: name.clone(),
                    comment: w.comment.clone(),
                };
                let doing = format!("adding firewall IP set {name} to {guest}");
                return Some((doing, FirewallCall::IpSet(call)));
            };
            if let Some(patch) = w.patch(h) {
                let doing = format!("correcting firewall IP set {name} of {guest}");
                let call = IpSetCall::Patch {
                    name: name.clone(),
                    patch,
                };
                return Some((doing, FirewallCall::IpSet(call)));
            }
        }
    }
    None
}

/// The next removal (once the rules are as wanted), if any.
pub fn after_rules(
    want: &WantedObjects,
    view: &FirewallView,
    guest: &str,
) -> Option<(String, FirewallCall)> {
    if let (Some(want), Some(have)) = (&want.sets, &view.ip_sets_own)
        && let Some(name) = have.keys().find(|n| !want.contains_key(*n))
    {
        let doing = format!("removing firewall IP set {name} of {guest}");
        let call = IpSetCall::Delete { name: name.clone() };
        return Some((doing, FirewallCall::IpSet(call)));
    }
    if let (Some(want), Some(have)) = (&want.aliases, &view.aliases) {
        let extra = have
            .iter()
            .find(|h| !want.iter().any(|w| w.name == h.name.to_lowercase()))?;
        let doing = format!("removing firewall alias {} of {guest}", extra.name);
        let call = AliasCall::Delete {
            name: extra.name.clone(),
            digest: extra.digest.clone(),
        };
        return Some((doing, FirewallCall::Alias(call)));
    }
    None
}

#[cfg(test)]
mod tests;
