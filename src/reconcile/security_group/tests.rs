//! The rule corrections, table by table: each row a wanted and an observed
//! list, the one correction a pass sends, and that applying corrections
//! as PVE does ends in the wanted list with nothing more to send.

use pve_client::firewall::RuleSpec;

use super::plan::{Group, GroupPatch};
use crate::reconcile::common::firewall::RulePatch;
use crate::reconcile::managed::crud::Diff;

fn rule(port: &str) -> RuleSpec {
    RuleSpec {
        kind: "in".into(),
        action: "ACCEPT".into(),
        enable: true,
        proto: Some("tcp".into()),
        dport: Some(port.into()),
        ..RuleSpec::default()
    }
}

fn group(ports: &[&str]) -> Group {
    Group {
        comment: "c".into(),
        rules: ports.iter().map(|p| rule(p)).collect(),
        digest: Some("d".into()),
    }
}

/// What PVE does with a correction.
fn apply(have: &mut Vec<RuleSpec>, patch: &GroupPatch) {
    match patch {
        GroupPatch::Comment(_) => {}
        GroupPatch::Rules(p) => p.apply(have),
    }
}

#[test]
fn each_drift_gets_the_correction_pve_needs() {
    type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], Option<&'a str>);
    let cases: &[Case] = &[
        ("as wanted", &["22", "80"], &["22", "80"], None),
        ("a new group", &["22", "80", "443"], &[], Some("prepend")),
        (
            "the first deleted",
            &["22", "80", "443"],
            &["80", "443"],
            Some("prepend"),
        ),
        (
            "one added at the end",
            &["22", "80", "443"],
            &["22", "80"],
            Some("insert 2"),
        ),
        (
            "one deleted in the middle",
            &["22", "80", "443"],
            &["22", "443"],
            Some("insert 1"),
        ),
        (
            "one changed",
            &["22", "80", "443"],
            &["22", "8080", "443"],
            Some("set 1"),
        ),
        (
            "one too many",
            &["22", "80"],
            &["22", "80", "443"],
            Some("remove 2"),
        ),
        (
            "one added in the middle",
            &["22", "443"],
            &["22", "80", "443"],
            Some("remove 1"),
        ),
        ("all gone", &[], &["22"], Some("remove 0")),
    ];
    for (name, want, have, first) in cases {
        let (want, have) = (group(want), group(have));
        let patch = want.diff(&have);
        let said = patch.as_ref().map(|p| match p {
            GroupPatch::Comment(_) => "comment".to_owned(),
            GroupPatch::Rules(RulePatch::Prepend(_)) => "prepend".to_owned(),
            GroupPatch::Rules(RulePatch::Insert { at, .. }) => format!("insert {at}"),
            GroupPatch::Rules(RulePatch::Set { pos, .. }) => format!("set {pos}"),
            GroupPatch::Rules(RulePatch::Remove { pos, .. }) => format!("remove {pos}"),
        });
        assert_eq!(said.as_deref(), *first, "{name}");
        // Converges: corrections applied as PVE does end as wanted.
        let mut now = have.clone();
        for _ in 0..10 {
            match want.diff(&now) {
                Some(p) => apply(&mut now.rules, &p),
                None => break,
            }
        }
        assert_eq!(now.rules, want.rules, "{name} converges");
        assert_eq!(want.diff(&now), None, "{name}: then nothing to send");
    }
}

#[test]
fn the_comment_with_the_owner_marker_is_corrected_first_and_the_digest_is_sent() {
    let want = group(&["22"]);
    let mut have = group(&["80"]);
    have.comment = "someone else's words".into();
    assert_eq!(want.diff(&have), Some(GroupPatch::Comment("c".into())));
    have.comment = "c".into();
    have.digest = Some("abc".into());
    assert_eq!(
        want.diff(&have),
        Some(GroupPatch::Rules(RulePatch::Set {
            pos: 0,
            rule: Box::new(rule("22")),
            digest: Some("abc".into())
        }))
    );
}

#[test]
fn a_disabled_or_macro_rule_on_proxmox_is_drift() {
    let want = group(&["22"]);
    let mut have = group(&["22"]);
    have.rules[0].enable = false;
    assert!(matches!(
        want.diff(&have),
        Some(GroupPatch::Rules(RulePatch::Set { pos: 0, .. }))
    ));
    let mut have = group(&["22"]);
    have.rules[0].macro_name = Some("SSH".into());
    assert!(matches!(
        want.diff(&have),
        Some(GroupPatch::Rules(RulePatch::Set { pos: 0, .. }))
    ));
}

/// A rule's IP set that exists but is not Ready yet: the group waits for
/// it (Synced=True), naming it; a missing one is `want`'s refusal instead.
#[test]
fn a_group_waits_for_the_ip_sets_its_rules_name_to_be_ready() {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::Caches;
    use crate::api::{ProxmoxIPSet, ProxmoxSecurityGroup};
    use crate::reconcile::managed::crud::pass::Kind;

    let set = |name: &str, ready: bool| -> ProxmoxIPSet {
        let mut set = json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxIPSet",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"forProvider": {}},
        });
        if ready {
            set["status"] = json!({
                "atProvider": {"name": format!("k8s-{name}")},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                                "lastTransitionTime": "2026-12-05T00:00:00Z"}],
            });
        }
        serde_json::from_value(set).unwrap()
    };
    let group: ProxmoxSecurityGroup = serde_json::from_value(json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1", "kind": "ProxmoxSecurityGroup",
        "metadata": {"name": "web", "namespace": "team"},
        "spec": {"forProvider": {"rules": [
            {"type": "in", "action": "ACCEPT", "source": {"ipSet": "db"}},
            {"type": "in", "action": "ACCEPT", "source": {"ipSet": "lb"}},
        ]}},
    }))
    .unwrap();
    // (the sets in the namespace, Ready or not) -> what the group waits for
    type Case<'a> = (&'a [(&'a str, bool)], Option<&'a str>);
    let cases: [Case<'_>; 4] = [
        (&[("db", true), ("lb", true)], None),
        (&[("db", true), ("lb", false)], Some("lb")),
        (&[("db", false), ("lb", false)], Some("db, lb")),
        // Missing: not waited for here (want refuses it, naming the field).
        (&[("db", true)], None),
    ];
    for (sets, want) in cases {
        let (ip_sets, mut writer) = reflector::store();
        for (name, ready) in sets {
            writer.apply_watcher_event(&Event::Apply(set(name, *ready)));
        }
        let caches = Caches {
            ip_sets,
            vms: reflector::store().0,
            containers: reflector::store().0,
        };
        let got = group.waiting_for(&caches);
        match want {
            None => assert_eq!(got, None, "{sets:?}"),
            Some(names) => {
                let got = got.unwrap_or_default();
                assert!(
                    got.contains(&format!("ProxmoxIPSet {names} to be Ready"))
                        && got.starts_with("spec.forProvider.rules"),
                    "{sets:?}: {got}"
                );
            }
        }
    }
}
