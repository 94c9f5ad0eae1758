//! The IP set's entries and corrections, table by table.

use super::plan::{Entry, Set, SetPatch, clean, entries};
use crate::api::ip_set::IPSetEntry;
use crate::reconcile::managed::crud::Diff;

fn entry(cidr: &str) -> Entry {
    Entry {
        cidr: cidr.into(),
        nomatch: false,
        comment: None,
    }
}

fn set(cidrs: &[&str]) -> Set {
    Set {
        comment: "c".into(),
        entries: cidrs.iter().map(|c| entry(c)).collect(),
        digest: Some("d".into()),
    }
}

#[test]
fn entries_are_compared_as_pve_stores_them() {
    let cases = [
        ("10.1.2.3/8", Some("10.0.0.0/8")),
        ("10.1.2.3/32", Some("10.1.2.3")),
        ("10.1.2.3", Some("10.1.2.3")),
        ("FD00::1/64", Some("fd00::/64")),
        ("fd00::1/128", Some("fd00::1")),
        ("10.0.0.0/33", None),
        ("web", None),
    ];
    for (text, want) in cases {
        assert_eq!(clean(text).as_deref(), want, "{text}");
    }
    let spec = |cidrs: &[&str]| -> Vec<IPSetEntry> {
        cidrs
            .iter()
            .map(|c| IPSetEntry {
                cidr: (*c).into(),
                nomatch: false,
                comment: None,
            })
            .collect()
    };
    assert!(
        entries(&spec(&["10.0.0.1", "10.0.0.1/32"]))
            .unwrap_err()
            .contains("spec.forProvider.cidrs[1].cidr")
    );
    assert!(
        entries(&spec(&["10.0.0.0/0"]))
            .unwrap_err()
            .contains("cidrs[0]")
    );
    assert_eq!(
        entries(&spec(&["10.1.0.0/16"])).unwrap(),
        vec![entry("10.1.0.0/16")]
    );
}

#[test]
fn each_drift_gets_one_correction_and_a_reapply_sends_nothing() {
    let want = set(&["10.0.0.1", "10.0.1.0/24"]);
    assert_eq!(
        want.diff(&set(&["10.0.1.0/24", "10.0.0.1"])),
        None,
        "order is not drift"
    );
    assert_eq!(
        want.diff(&set(&[])),
        Some(SetPatch::Add(vec![entry("10.0.0.1"), entry("10.0.1.0/24")]))
    );
    assert_eq!(
        want.diff(&set(&["10.0.0.1", "10.0.1.0/24", "10.9.9.9"])),
        Some(SetPatch::Remove {
            cidr: "10.9.9.9".into(),
            digest: Some("d".into())
        })
    );
    let mut changed = set(&["10.0.0.1", "10.0.1.0/24"]);
    changed.entries[0].nomatch = true;
    assert_eq!(
        want.diff(&changed),
        Some(SetPatch::Change {
            entry: entry("10.0.0.1"),
            digest: Some("d".into())
        })
    );
    let mut other = set(&["10.0.0.1", "10.0.1.0/24"]);
    other.comment = "x".into();
    assert_eq!(want.diff(&other), Some(SetPatch::Comment("c".into())));
}
