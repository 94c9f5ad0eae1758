//! A guest's own aliases and IP sets: each table row starts from what
//! Proxmox has, checks the first write, then plays every write on a model
//! of PVE until nothing is left to send.

use std::collections::BTreeMap;

use pve_client::guest_alias::Alias;
use serde_json::json;

use super::*;
use crate::reconcile::common::firewall::{FirewallNext, next};
use crate::reconcile::common::ip_set::Entry;

fn spec(v: serde_json::Value) -> GuestFirewall {
    serde_json::from_value(v).expect("a firewall spec")
}

/// The guest's objects as PVE holds them: aliases, sets with entries.
#[derive(Clone, Debug, Default, PartialEq)]
struct Pve {
    aliases: Vec<WantedAlias>,
    sets: BTreeMap<String, Set>,
    rules: Vec<pve_client::firewall::Rule>,
}

impl Pve {
    fn view(&self, fw: &GuestFirewall) -> FirewallView {
        let digest = Some(format!("{:?}", self.aliases.len()));
        FirewallView {
            options: pve_client::FirewallOptions {
                enable: Some(true),
                ..Default::default()
            },
            rules: self.rules.clone(),
            aliases: fw.aliases.as_ref().map(|_| {
                self.aliases
                    .iter()
                    .map(|a| Alias {
                        name: a.name.clone(),
                        cidr: a.cidr.clone(),
                        comment: a.comment.clone(),
                        digest: digest.clone(),
                    })
                    .collect()
            }),
            ip_sets_own: fw.ip_sets.as_ref().map(|_| self.sets.clone()),
            ..FirewallView::default()
        }
    }

    /// What PVE does with `call`.
    fn apply(&mut self, call: &FirewallCall) {
        match call {
            FirewallCall::Alias(AliasCall::Create(a)) => self.aliases.push(a.clone()),
            FirewallCall::Alias(AliasCall::Update { alias, .. }) => {
                if let Some(a) = self.aliases.iter_mut().find(|a| a.name == alias.name) {
                    *a = alias.clone();
                }
            }
            FirewallCall::Alias(AliasCall::Delete { name, .. }) => {
                self.aliases.retain(|a| a.name != *name)
            }
            FirewallCall::IpSet(IpSetCall::Create { name, comment }) => {
                let set = Set {
                    comment: comment.clone(),
                    entries: vec![],
                    digest: None,
                };
                self.sets.insert(name.clone(), set);
            }
            FirewallCall::IpSet(IpSetCall::Delete { name }) => {
                self.sets.remove(name);
            }
            FirewallCall::IpSet(IpSetCall::Patch { name, patch }) => {
                let Some(set) = self.sets.get_mut(name) else {
                    return;
                };
                match patch {
                    SetPatch::Comment(c) => set.comment = c.clone(),
                    SetPatch::Add(new) => set.entries.extend(new.iter().cloned()),
                    SetPatch::Change { entry, .. } => {
                        set.entries.retain(|e| e.cidr != entry.cidr);
                        set.entries.push(entry.clone());
                    }
                    SetPatch::Remove { cidr, .. } => set.entries.retain(|e| e.cidr != *cidr),
                }
            }
            FirewallCall::Rules(patch) => {
                let mut have: Vec<_> = self
                    .rules
                    .iter()
                    .map(crate::reconcile::common::firewall::observed_rule)
                    .collect();
                patch.apply(&mut have);
                self.rules = have
                    .into_iter()
                    .map(|r| pve_client::firewall::Rule {
                        kind: r.kind,
                        action: r.action,
                        enable: Some(u64::from(r.enable)),
                        proto: r.proto,
                        dport: r.dport,
                        source: r.source,
                        dest: r.dest,
                        ..Default::default()
                    })
                    .collect();
            }
            FirewallCall::Options { .. } => {}
        }
    }
}

fn alias(name: &str, cidr: &str) -> WantedAlias {
    WantedAlias {
        name: name.into(),
        cidr: cidr.into(),
        comment: None,
    }
}

fn set(entries: &[&str]) -> Set {
    Set {
        comment: String::new(),
        entries: entries
            .iter()
            .map(|c| Entry {
                cidr: (*c).into(),
                nomatch: false,
                comment: None,
            })
            .collect(),
        digest: Some("e1".into()),
    }
}

/// Runs the firewall's writes on `pve` until none is left; the calls sent.
fn converge(fw: &GuestFirewall, pve: &mut Pve) -> Vec<FirewallCall> {
    let mut sent = vec![];
    loop {
        match next(fw, &pve.view(fw), "ns", "VM 100") {
            None => return sent,
            Some(FirewallNext::Write(_, call)) => {
                pve.apply(&call);
                sent.push(call);
            }
            Some(other) => panic!("{other:?}"),
        }
        assert!(sent.len() < 20, "does not converge: {sent:?}");
    }
}

fn first(call: &FirewallCall) -> String {
    match call {
        FirewallCall::Alias(AliasCall::Create(a)) => format!("create alias {}", a.name),
        FirewallCall::Alias(AliasCall::Update { alias, digest }) => {
            assert!(digest.is_some(), "a change is guarded by the digest");
            format!("update alias {}", alias.name)
        }
        FirewallCall::Alias(AliasCall::Delete { name, .. }) => format!("delete alias {name}"),
        FirewallCall::IpSet(IpSetCall::Create { name, .. }) => format!("create set {name}"),
        FirewallCall::IpSet(IpSetCall::Delete { name }) => format!("delete set {name}"),
        FirewallCall::IpSet(IpSetCall::Patch { name, patch }) => match patch {
            SetPatch::Comment(_) => format!("comment set {name}"),
            SetPatch::Add(e) => format!("add {} to {name}", e.len()),
            SetPatch::Change { entry, digest } => {
                assert!(digest.is_some(), "a change is guarded by the digest");
                format!("change {} in {name}", entry.cidr)
            }
            SetPatch::Remove { cidr, digest } => {
                assert!(digest.is_some(), "a removal is guarded by the digest");
                format!("remove {cidr} from {name}")
            }
        },
        FirewallCall::Rules(_) => "rules".into(),
        FirewallCall::Options { .. } => "options".into(),
    }
}

#[test]
fn aliases_and_sets_are_brought_to_the_spec_then_nothing_is_sent() {
    let fw = spec(json!({
        "aliases": [{"name": "gw", "cidr": "10.0.0.1/32"}, {"name": "lan", "cidr": "10.0.0.0/24"}],
        "ipSets": [{"name": "peers", "entries": [{"cidr": "10.0.1.5"}, {"cidr": "10.0.2.9/24"}]}],
        "rules": [{"type": "in", "action": "ACCEPT", "source": {"guestIpSet": "peers"},
                   "dest": {"guestAlias": "gw"}}]
    }));
    let full = Pve {
        aliases: vec![alias("gw", "10.0.0.1"), alias("lan", "10.0.0.0/24")],
        sets: BTreeMap::from([("peers".into(), set(&["10.0.1.5", "10.0.2.0/24"]))]),
        rules: vec![],
    };
    type Case = (&'static str, Pve, &'static str);
    let mut changed = full.clone();
    changed.aliases[1].cidr = "10.9.0.0/16".into();
    let mut entry_gone = full.clone();
    entry_gone
        .sets
        .insert("peers".into(), set(&["10.0.2.0/24"]));
    let mut entry_extra = full.clone();
    entry_extra.sets.insert(
        "peers".into(),
        set(&["10.0.1.5", "10.0.2.0/24", "10.7.7.7"]),
    );
    let mut extra = full.clone();
    extra.aliases.push(alias("old", "10.1.1.1"));
    extra.sets.insert("stale".into(), set(&["10.3.3.3"]));
    let cases: Vec<Case> = vec![
        ("nothing yet", Pve::default(), "create alias gw"),
        ("an alias changed by hand", changed, "update alias lan"),
        ("an entry deleted by hand", entry_gone, "add 1 to peers"),
        (
            "an entry added by hand",
            entry_extra,
            "remove 10.7.7.7 from peers",
        ),
        ("objects the spec does not have", extra, "rules"),
    ];
    for (name, mut pve, want_first) in cases {
        let sent = converge(&fw, &mut pve);
        assert_eq!(
            sent.first().map(first).as_deref(),
            Some(want_first),
            "{name}"
        );
        assert_eq!(pve.aliases.len(), 2, "{name}: {:?}", pve.aliases);
        assert_eq!(pve.sets.keys().collect::<Vec<_>>(), ["peers"], "{name}");
        assert_eq!(pve.sets["peers"].entries.len(), 2, "{name}");
        let rule = &pve.rules[0];
        assert_eq!(
            (rule.source.as_deref(), rule.dest.as_deref()),
            (Some("+guest/peers"), Some("guest/gw")),
            "{name}: the guest's own objects, scoped"
        );
        // Removals come after the rules no longer name what goes.
        let rules_at = sent
            .iter()
            .position(|c| matches!(c, FirewallCall::Rules(_)));
        let removal_at = sent.iter().position(|c| {
            matches!(
                c,
                FirewallCall::Alias(AliasCall::Delete { .. })
                    | FirewallCall::IpSet(IpSetCall::Delete { .. })
            )
        });
        if let (Some(r), Some(d)) = (rules_at, removal_at) {
            assert!(r < d, "{name}: {sent:?}");
        }
    }
}

#[test]
fn left_out_lists_are_not_read_or_touched_and_an_empty_one_empties() {
    let pve = Pve {
        aliases: vec![alias("gw", "10.0.0.1")],
        sets: BTreeMap::from([("peers".into(), set(&["10.0.1.5"]))]),
        rules: vec![],
    };
    let untouched = spec(json!({}));
    assert_eq!(pve.view(&untouched).aliases, None, "not read");
    assert_eq!(pve.view(&untouched).ip_sets_own, None, "not read");
    assert!(converge(&untouched, &mut pve.clone()).is_empty());
    let emptied = spec(json!({"aliases": [], "ipSets": []}));
    let mut emptied_pve = pve.clone();
    converge(&emptied, &mut emptied_pve);
    assert_eq!(emptied_pve, Pve::default());
}

#[test]
fn an_entry_pve_would_refuse_is_a_refusal_naming_the_field() {
    let fw = spec(json!({"ipSets": [
        {"name": "a", "entries": []},
        {"name": "b", "entries": [{"cidr": "10.0.0.1"}, {"cidr": "10.0.0.1/32"}]}
    ]}));
    let Some(FirewallNext::Refused(why)) = next(&fw, &Pve::default().view(&fw), "ns", "VM 1")
    else {
        panic!("refused")
    };
    assert!(
        why.starts_with("spec.forProvider.firewall.ipSets[1].entries[1].cidr"),
        "{why}"
    );
}

/// The status shows the guest's own aliases and IP sets as Proxmox has
/// them (a `nomatch` entry with `!`), only the lists the spec has.
#[test]
fn the_status_shows_the_guests_own_objects() {
    use crate::reconcile::common::firewall::observed;
    let fw = spec(json!({
        "aliases": [{"name": "gw", "cidr": "10.0.0.1"}],
        "ipSets": [{"name": "peers", "entries": [{"cidr": "10.0.1.0/24"}]}],
    }));
    let set = Set {
        comment: String::new(),
        entries: vec![
            Entry {
                cidr: "10.0.1.0/24".into(),
                nomatch: false,
                comment: None,
            },
            Entry {
                cidr: "10.0.1.9".into(),
                nomatch: true,
                comment: None,
            },
        ],
        digest: None,
    };
    let pve = Pve {
        aliases: vec![WantedAlias {
            name: "gw".into(),
            cidr: "10.0.0.1".into(),
            comment: None,
        }],
        sets: BTreeMap::from([("peers".to_owned(), set)]),
        rules: vec![],
    };
    let shown = observed(&pve.view(&fw));
    assert_eq!(shown.aliases, ["gw=10.0.0.1"]);
    assert_eq!(
        shown.ip_sets,
        BTreeMap::from([(
            "peers".to_owned(),
            vec!["10.0.1.0/24".to_owned(), "!10.0.1.9".to_owned()]
        )])
    );
    // Lists the spec does not have are not read, and not shown.
    let shown = observed(&pve.view(&spec(json!({}))));
    assert!(shown.aliases.is_empty() && shown.ip_sets.is_empty());
}
