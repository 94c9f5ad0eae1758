//! The SDN plan, table by table.

use pve_client::{SdnObject, SdnState};
use serde_json::json;

use super::plan::*;
use crate::api::sdn::{
    ApplyState, DhcpRange, SdnZoneParameters, Subnet, VNetParameters, ZoneReference, ZoneType,
};
use crate::reconcile::managed::crud::Diff;

fn listed(v: serde_json::Value, key: &str) -> SdnObject {
    SdnObject::from_listed(&v, key).unwrap()
}

fn zone_params(kind: ZoneType) -> SdnZoneParameters {
    SdnZoneParameters {
        zone_type: kind,
        bridge: None,
        tag: None,
        vlan_protocol: None,
        peers: None,
        mtu: None,
        nodes: None,
        ipam: None,
        dhcp: None,
    }
}

#[test]
fn ids_fit_pve_and_never_collide_across_namespaces_or_kinds() {
    let ids = [
        sdn_id('z', "team-a", "net"),
        sdn_id('z', "team-b", "net"),
        sdn_id('v', "team-a", "net"),
    ];
    for id in &ids {
        assert_eq!(id.len(), 8, "{id}");
        assert!(
            id.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
    }
    assert_ne!(ids[0], ids[1]);
    assert_ne!(ids[0][1..], ids[2][1..]);
    assert_eq!(ids[0], sdn_id('z', "team-a", "net"));
}

#[test]
fn a_zone_is_compared_as_it_will_be_once_applied() {
    let mut p = zone_params(ZoneType::Vlan);
    p.bridge = Some("vmbr0".into());
    p.mtu = Some(1500);
    let want = zone_want(&p);
    let cases = [
        (
            "created, pending",
            json!({"zone": "z", "type": "vlan", "state": "new",
                "pending": {"bridge": "vmbr0", "mtu": 1500}}),
            None,
            true,
        ),
        (
            "applied as wanted",
            json!({"zone": "z", "type": "vlan", "bridge": "vmbr0", "mtu": 1500}),
            None,
            false,
        ),
        (
            "changed on Proxmox, a key the spec leaves out kept",
            json!({"zone": "z", "type": "vlan", "bridge": "vmbr1", "mtu": 1500, "nodes": "n1"}),
            Some(OptionsPatch {
                set: Options::from([("bridge".into(), vec!["vmbr0".into()])]),
                delete: vec![],
            }),
            false,
        ),
        (
            "our change pending: not written again",
            json!({"zone": "z", "type": "vlan", "bridge": "vmbr1", "mtu": 1500,
                "state": "changed", "pending": {"bridge": "vmbr0"}}),
            None,
            true,
        ),
    ];
    for (name, observed, patch, pending) in cases {
        let seen = zone_seen(&listed(observed, "zone"));
        assert_eq!(want.diff(&seen), patch, "{name}");
        assert_eq!(seen.pending, pending, "{name}");
        assert_eq!(seen.in_use(), None, "{name}");
    }
}

#[test]
fn a_pending_deletion_holds_the_resource_until_applied() {
    let deleted = zone_seen(&listed(
        json!({"zone": "z", "type": "simple", "state": "deleted"}),
        "zone",
    ));
    assert!(deleted.deleted && deleted.pending);
    assert!(
        deleted
            .in_use()
            .unwrap()
            .contains("waits for the SDN configuration")
    );
    let vnet = vnet_seen(
        &listed(
            json!({"vnet": "v", "zone": "z", "state": "deleted"}),
            "vnet",
        ),
        &[],
    );
    assert!(vnet.in_use().is_some());
}

fn vnet_params() -> VNetParameters {
    VNetParameters {
        zone_ref: ZoneReference { name: "z".into() },
        tag: Some(100),
        vlan_aware: None,
        alias: Some("web".into()),
        subnets: vec![Subnet {
            cidr: "10.0.0.0/24".into(),
            gateway: Some("10.0.0.1".into()),
            snat: Some(true),
            dhcp_ranges: vec![DhcpRange {
                start: "10.0.0.100".into(),
                end: "10.0.0.200".into(),
            }],
        }],
    }
}

#[test]
fn a_vnet_and_its_subnets_are_corrected_deletions_first() {
    let want = vnet_want(&vnet_params(), "zabc1234");
    let vnet = |extra: serde_json::Value| {
        let mut v =
            json!({"vnet": "v", "type": "vnet", "zone": "zabc1234", "tag": 100, "alias": "web"});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        listed(v, "vnet")
    };
    let good = json!({"subnet": "zabc1234-10.0.0.0-24", "cidr": "10.0.0.0/24",
        "gateway": "10.0.0.1", "snat": 1,
        "dhcp-range": ["start-address=10.0.0.100,end-address=10.0.0.200"]});
    let other = json!({"subnet": "zabc1234-10.1.0.0-24", "cidr": "10.1.0.0/24"});
    let no_gw = json!({"subnet": "zabc1234-10.0.0.0-24", "cidr": "10.0.0.0/24", "snat": 1,
        "dhcp-range": ["start-address=10.0.0.100,end-address=10.0.0.200"]});
    let cases: Vec<(&str, SdnObject, Vec<serde_json::Value>, Option<VnetPatch>)> = vec![
        ("as wanted", vnet(json!({})), vec![good.clone()], None),
        (
            "an extra subnet and the alias gone",
            vnet(json!({"alias": null})),
            vec![good.clone(), other],
            Some(VnetPatch {
                options: OptionsPatch {
                    set: Options::from([("alias".into(), vec!["web".into()])]),
                    delete: vec![],
                },
                subnets: vec![SubnetChange::Delete {
                    id: "zabc1234-10.1.0.0-24".into(),
                }],
            }),
        ),
        (
            "a tag set on Proxmox the spec does not have",
            vnet(json!({"tag": 7})),
            vec![good.clone()],
            Some(VnetPatch {
                options: OptionsPatch {
                    set: Options::from([("tag".into(), vec!["100".into()])]),
                    delete: vec![],
                },
                subnets: vec![],
            }),
        ),
        (
            "a subnet's gateway removed on Proxmox, and one missing",
            vnet(json!({})),
            vec![no_gw],
            Some(VnetPatch {
                options: OptionsPatch::default(),
                subnets: vec![SubnetChange::Update {
                    id: "zabc1234-10.0.0.0-24".into(),
                    patch: OptionsPatch {
                        set: Options::from([("gateway".into(), vec!["10.0.0.1".into()])]),
                        delete: vec![],
                    },
                }],
            }),
        ),
    ];
    for (name, v, subnets, patch) in cases {
        let subnets: Vec<SdnObject> = subnets.into_iter().map(|s| listed(s, "subnet")).collect();
        let seen = vnet_seen(&v, &subnets);
        assert_eq!(want.diff(&seen), patch, "{name}");
    }
    let mut no_alias = vnet_params();
    no_alias.alias = None;
    no_alias.tag = None;
    let seen = vnet_seen(&vnet(json!({})), &[listed(good, "subnet")]);
    let patch = vnet_want(&no_alias, "zabc1234").diff(&seen).unwrap();
    assert_eq!(
        patch.options.delete,
        vec!["tag".to_owned(), "alias".to_owned()]
    );
}

#[test]
fn a_pending_subnet_makes_the_vnet_pending() {
    let v = listed(json!({"vnet": "v", "zone": "z"}), "vnet");
    let s = listed(
        json!({"subnet": "z-10.0.0.0-24", "cidr": "10.0.0.0/24", "state": "new", "pending": {}}),
        "subnet",
    );
    assert!(vnet_seen(&v, &[s]).pending);
    assert!(!vnet_seen(&v, &[]).pending);
    let gone = listed(
        json!({"subnet": "z-10.1.0.0-24", "cidr": "10.1.0.0/24", "state": "deleted"}),
        "subnet",
    );
    assert_eq!(gone.state, Some(SdnState::Deleted));
    let seen = vnet_seen(&v, &[gone]);
    assert!(seen.pending, "its deletion is pending");
    assert!(
        seen.subnets.is_empty(),
        "a subnet deleted is not one to correct"
    );
}

#[test]
fn a_tag_that_does_not_fit_the_zone_is_named() {
    let cases = [
        ("simple", Some(5), Some("a simple zone has no tag")),
        ("simple", None, None),
        ("vlan", None, Some("needs its VLAN tag")),
        ("vlan", Some(4095), Some("is no VLAN tag")),
        ("vlan", Some(10), None),
        ("qinq", None, None),
        ("vxlan", None, Some("needs its VNI")),
        ("vxlan", Some(100_000), None),
    ];
    for (zone, tag, want) in cases {
        let got = tag_refusal(zone, tag);
        match want {
            Some(w) => assert!(
                got.as_deref()
                    .is_some_and(|g| g.contains(w) && g.starts_with("spec.forProvider.tag")),
                "{zone} {tag:?}: {got:?}"
            ),
            None => assert_eq!(got, None, "{zone} {tag:?}"),
        }
    }
}

#[test]
fn one_apply_when_all_settled_and_none_in_flight() {
    // (in flight, pending, settled, retry due) -> step
    let cases = [
        ((true, true, true, true), Step::Observe),
        ((true, false, false, false), Step::Observe),
        ((false, true, true, true), Step::Dispatch),
        ((false, true, false, true), Step::Wait),
        ((false, false, true, true), Step::Wait),
        ((false, true, true, false), Step::Wait),
    ];
    for ((flight, pending, settled, due), want) in cases {
        assert_eq!(
            step(flight, pending, settled, due),
            want,
            "{flight} {pending} {settled} {due}"
        );
    }
}

#[test]
fn the_state_shown() {
    let cases = [
        ((true, true, true), ApplyState::Pending),
        ((false, true, false), ApplyState::Applying),
        ((false, false, true), ApplyState::ApplyFailed),
        ((false, true, true), ApplyState::Applying),
        ((false, false, false), ApplyState::Applied),
    ];
    for ((pending, applying, failed), want) in cases {
        assert_eq!(apply_state(pending, applying, failed), want);
    }
}
