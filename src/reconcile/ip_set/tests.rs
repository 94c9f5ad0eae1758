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
        entries(
            &spec(&["10.0.0.1", "10.0.0.1/32"]),
            "spec.forProvider.cidrs"
        )
        .unwrap_err()
        .contains("spec.forProvider.cidrs[1].cidr")
    );
    assert!(
        entries(&spec(&["10.0.0.0/0"]), "spec.forProvider.cidrs")
            .unwrap_err()
            .contains("cidrs[0]")
    );
    assert_eq!(
        entries(&spec(&["10.1.0.0/16"]), "spec.forProvider.cidrs").unwrap(),
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

mod members {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::entry;
    use crate::api::{ProxmoxContainer, ProxmoxVM};
    use crate::reconcile::ip_set::members::{Guest, entries};

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn guest(who: &str, tier: &str, addresses: &[&str]) -> Guest {
        Guest {
            who: who.into(),
            labels: labels(&[("tier", tier)]),
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    #[test]
    fn a_selector_takes_the_addresses_of_the_guests_it_matches() {
        let guests = [
            guest("ProxmoxVM db-1", "db", &["10.0.0.1", "fd00::1"]),
            guest("ProxmoxVM web-1", "web", &["10.0.0.2"]),
            guest("ProxmoxContainer db-2", "db", &["10.0.0.3", "10.0.0.1"]),
        ];
        let (got, matched) = entries(&labels(&[("tier", "db")]), &guests, vec![]);
        assert_eq!(matched, 2);
        let cidrs: Vec<(&str, Option<&str>)> = got
            .iter()
            .map(|e| (e.cidr.as_str(), e.comment.as_deref()))
            .collect();
        assert_eq!(
            cidrs,
            [
                ("10.0.0.3", Some("ProxmoxContainer db-2")),
                ("10.0.0.1", Some("ProxmoxContainer db-2")),
                ("fd00::1", Some("ProxmoxVM db-1")),
            ],
            "one entry per address, the static ones first"
        );
        let (got, matched) = entries(
            &labels(&[("tier", "none")]),
            &guests,
            vec![entry("10.9.0.0/16")],
        );
        assert_eq!(
            (got, matched),
            (vec![entry("10.9.0.0/16")], 0),
            "no member: an empty selection, not an error"
        );
        let (got, _) = entries(
            &labels(&[("tier", "web")]),
            &guests,
            vec![entry("10.0.0.2")],
        );
        assert_eq!(
            got,
            vec![entry("10.0.0.2")],
            "a static entry wins over a member"
        );
    }

    #[test]
    fn guests_give_their_agent_and_static_addresses_until_deleted() {
        let mut vm: ProxmoxVM = serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxVM",
            "metadata": {"name": "db", "namespace": "ns", "labels": {"tier": "db"}},
            "spec": {"forProvider": {"node": "pve", "cloudInit": {"ipConfigs": [
                {"interface": "net0", "ip": "10.0.0.5/24", "ip6": "auto"},
                {"interface": "net1", "ip": "dhcp"},
            ]}}},
            "status": {"atProvider": {"ipAddresses": ["10.0.1.7", "fd00::7"]}},
        }))
        .unwrap();
        let g = Guest::vm(&vm).unwrap();
        assert_eq!(g.addresses, ["10.0.1.7", "fd00::7", "10.0.0.5"]);
        assert_eq!(g.labels.get("tier").map(String::as_str), Some("db"));
        vm.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert_eq!(Guest::vm(&vm), None, "a guest being deleted is no member");
        let ct: ProxmoxContainer = serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxContainer",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"forProvider": {"node": "pve", "template": {"volume": "local:vztmpl/x.tar.zst"},
                "rootfs": {"storage": "local-lvm", "size": "8Gi"},
                "networks": [{"slot": "net0", "name": "eth0", "bridge": "vmbr0", "ip": "10.0.2.9/24", "ip6": "fd00::9/64"}]}},
        }))
        .unwrap();
        assert_eq!(
            Guest::container(&ct).unwrap().addresses,
            ["10.0.2.9", "fd00::9"]
        );
    }
}
