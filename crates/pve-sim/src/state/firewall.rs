//! The cluster firewall's shared objects (cluster.fw): security groups
//! with their ordered rules, and IP sets with their entries.
//!
//! Every list carries PVE's digest (`copy_list_with_digest`): SHA-1 over
//! each entry's defined keys in sorted order as `key:value\n`, so a write
//! sent with the digest of an older list is refused.

use std::collections::BTreeMap;

use sha1::{Digest, Sha1};

/// One rule as PVE keeps it: its defined properties, by name (`type`,
/// `action`, `enable`, `proto`, `ipversion`, ...).
pub type Rule = BTreeMap<String, String>;

/// A security group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    pub comment: Option<String>,
    pub rules: Vec<Rule>,
}

/// One IP set entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub cidr: String,
    pub nomatch: bool,
    pub comment: Option<String>,
}

impl Entry {
    /// Its keys as PVE's list shows (and digests) them.
    pub fn fields(&self) -> Rule {
        let mut out = Rule::from([("cidr".to_owned(), self.cidr.clone())]);
        if self.nomatch {
            out.insert("nomatch".into(), "1".into());
        }
        if let Some(c) = &self.comment {
            out.insert("comment".into(), c.clone());
        }
        out
    }
}

/// An IP set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IpSet {
    pub comment: Option<String>,
    pub entries: Vec<Entry>,
}

/// cluster.fw's groups and IP sets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Firewall {
    pub groups: BTreeMap<String, Group>,
    pub ipsets: BTreeMap<String, IpSet>,
}

/// A guest's own firewall (`/etc/pve/firewall/<vmid>.fw`): its options
/// as written (booleans `0`/`1`), its ordered rules, its aliases (keyed
/// by the lowercased name, as PVE keys them) and IP sets. It is part of
/// the guest, so it goes away with it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GuestFirewall {
    pub options: BTreeMap<String, String>,
    pub rules: Vec<Rule>,
    pub aliases: BTreeMap<String, Alias>,
    pub ipsets: BTreeMap<String, IpSet>,
}

/// An alias: the name as created, its address as PVE keeps it (`/32`,
/// `/128` dropped), a comment.
#[derive(Clone, Debug, PartialEq)]
pub struct Alias {
    pub name: String,
    pub cidr: String,
    pub comment: Option<String>,
}

impl Alias {
    /// Its keys as PVE's list shows (and digests) them.
    pub fn fields(&self) -> Rule {
        let mut out = Rule::from([
            ("name".to_owned(), self.name.clone()),
            ("cidr".to_owned(), self.cidr.clone()),
        ]);
        if let Some(c) = &self.comment {
            out.insert("comment".into(), c.clone());
        }
        out
    }
}

/// PVE's list digest: SHA-1 of every entry's keys, sorted, `key:value\n`.
pub fn digest<'a>(entries: impl IntoIterator<Item = &'a Rule>) -> String {
    let mut sha = Sha1::new();
    for entry in entries {
        for (k, v) in entry {
            sha.update(k.as_bytes());
            sha.update(b":");
            sha.update(v.as_bytes());
            sha.update(b"\n");
        }
    }
    sha.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The name and comment entries of the group or IP set list.
pub fn named_list<'a>(
    key: &str,
    items: impl Iterator<Item = (&'a String, &'a Option<String>)>,
) -> Vec<Rule> {
    items
        .map(|(name, comment)| {
            let mut e = Rule::from([(key.to_owned(), name.clone())]);
            if let Some(c) = comment.as_ref().filter(|c| !c.is_empty()) {
                e.insert("comment".into(), c.clone());
            }
            e
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_follows_every_key_and_the_order() {
        let a = Rule::from([
            ("type".into(), "in".into()),
            ("action".into(), "ACCEPT".into()),
        ]);
        let b = Rule::from([
            ("type".into(), "out".into()),
            ("action".into(), "DROP".into()),
        ]);
        let ab = digest([&a, &b]);
        assert_eq!(ab.len(), 40);
        assert_ne!(ab, digest([&b, &a]));
        let mut a2 = a.clone();
        a2.insert("comment".into(), "x".into());
        assert_ne!(ab, digest([&a2, &b]));
        assert_eq!(ab, digest([&a, &b]));
    }
}
