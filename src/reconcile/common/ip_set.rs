//! An IP set's entries as managed, pure: the cluster's (ProxmoxIPSet)
//! and a guest's own (`spec.forProvider.firewall.ipSets`) alike.
//!
//! Entries are a set, compared as PVE stores them (`clean_cidr`: host bits
//! cleared, IPv6 compressed, `/32` and `/128` dropped), so a spec written
//! `10.1.2.3/8` is not corrected forever. New entries go in one call (PVE
//! takes no digest for an addition); a change or removal is one per pass,
//! guarded by the entry list's digest.

use std::net::IpAddr;

use crate::api::ip_set::IPSetEntry;

/// One entry as managed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub cidr: String,
    pub nomatch: bool,
    pub comment: Option<String>,
}

/// An IP set as managed; `digest`: the observed entry list's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    pub comment: String,
    pub entries: Vec<Entry>,
    pub digest: Option<String>,
}

/// The one correction a pass sends.
#[derive(Clone, Debug, PartialEq)]
pub enum SetPatch {
    Comment(String),
    /// Entries missing on Proxmox.
    Add(Vec<Entry>),
    /// An entry's `nomatch` and comment.
    Change {
        entry: Entry,
        digest: Option<String>,
    },
    /// An entry the spec does not have.
    Remove {
        cidr: String,
        digest: Option<String>,
    },
}

impl Set {
    /// The set as listed: its comment and its entries, with their digest.
    pub fn observed(comment: Option<String>, listed: Vec<pve_client::firewall::Entry>) -> Self {
        Set {
            comment: comment.unwrap_or_default(),
            digest: listed.first().and_then(|e| e.digest.clone()),
            entries: listed
                .into_iter()
                .map(|e| Entry {
                    cidr: e.cidr,
                    nomatch: e.nomatch,
                    comment: e.comment.filter(|c| !c.is_empty()),
                })
                .collect(),
        }
    }

    /// The one correction that brings `observed` to `self`.
    pub fn patch(&self, observed: &Self) -> Option<SetPatch> {
        if self.comment != observed.comment {
            return Some(SetPatch::Comment(self.comment.clone()));
        }
        let digest = observed.digest.clone();
        if let Some(extra) = observed
            .entries
            .iter()
            .find(|o| !self.entries.iter().any(|w| w.cidr == o.cidr))
        {
            return Some(SetPatch::Remove {
                cidr: extra.cidr.clone(),
                digest,
            });
        }
        if let Some(changed) = self
            .entries
            .iter()
            .find(|w| observed.entries.iter().any(|o| o.cidr == w.cidr && o != *w))
        {
            return Some(SetPatch::Change {
                entry: changed.clone(),
                digest,
            });
        }
        let missing: Vec<Entry> = self
            .entries
            .iter()
            .filter(|w| !observed.entries.iter().any(|o| o.cidr == w.cidr))
            .cloned()
            .collect();
        (!missing.is_empty()).then_some(SetPatch::Add(missing))
    }
}

/// An address or network as PVE stores it in an IP set.
pub fn clean(text: &str) -> Option<String> {
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u32>().ok()?)),
        None => (text, None),
    };
    let ip: IpAddr = addr.parse().ok()?;
    Some(match (ip, len) {
        (IpAddr::V4(_), Some(n)) if n > 32 => return None,
        (IpAddr::V6(_), Some(n)) if n > 128 => return None,
        (_, None) | (IpAddr::V4(_), Some(32)) | (IpAddr::V6(_), Some(128)) => ip.to_string(),
        (IpAddr::V4(v4), Some(n)) => {
            let mask = u32::MAX.checked_shl(32 - n).unwrap_or(0);
            format!("{}/{n}", std::net::Ipv4Addr::from(u32::from(v4) & mask))
        }
        (IpAddr::V6(v6), Some(n)) => {
            let mask = u128::MAX.checked_shl(128 - n).unwrap_or(0);
            format!("{}/{n}", std::net::Ipv6Addr::from(u128::from(v6) & mask))
        }
    })
}

/// The spec's entries (the list at `list`, e.g. `spec.forProvider.cidrs`)
/// as PVE stores them; `Err`: the first one PVE would refuse or that
/// repeats another once stored, naming the field.
pub fn entries(spec: &[IPSetEntry], list: &str) -> Result<Vec<Entry>, String> {
    let mut out: Vec<Entry> = Vec::with_capacity(spec.len());
    for (i, e) in spec.iter().enumerate() {
        let field = format!("{list}[{i}].cidr");
        let Some(cidr) = clean(&e.cidr) else {
            return Err(format!(
                "{field}: {:?} is not an IP address or CIDR network",
                e.cidr
            ));
        };
        if cidr.ends_with("/0") {
            return Err(format!(
                "{field}: a zero prefix is not allowed in IP set entries"
            ));
        }
        if let Some(j) = out.iter().position(|o| o.cidr == cidr) {
            return Err(format!(
                "{field}: {:?} is the same entry as {list}[{j}] once stored ({cidr})",
                e.cidr
            ));
        }
        out.push(Entry {
            cidr,
            nomatch: e.nomatch,
            comment: e.comment.clone().filter(|c| !c.is_empty()),
        });
    }
    Ok(out)
}
