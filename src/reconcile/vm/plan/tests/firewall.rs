//! The VM's own firewall: options set and deleted, rules created, moved,
//! corrected and removed one write a pass until Proxmox holds the spec,
//! then nothing; references to security groups and IP sets resolved to
//! their Proxmox names, or waited for.

use std::collections::BTreeMap;

use pve_client::FirewallOptions;
use pve_client::firewall::{Rule, RuleSpec};

use super::*;
use crate::api::firewall::{GuestFirewall, GuestFirewallRule, GuestRuleDirection};
use crate::api::security_group::{Address, RuleAction};
use crate::reconcile::common::firewall::{RulePatch, Unusable};
use crate::reconcile::vm::plan::{FirewallCall, FirewallView};

fn ssh() -> GuestFirewallRule {
    GuestFirewallRule {
        security_group: None,
        direction: Some(GuestRuleDirection::In),
        action: Some(RuleAction::Accept),
        proto: Some("tcp".into()),
        dport: Some("22".into()),
        sport: None,
        source: Some(Address {
            ip_set: Some("office".into()),
            ..Address::default()
        }),
        dest: None,
        iface: Some("net0".into()),
        log: None,
        comment: None,
        enable: true,
    }
}

fn group_ref(name: &str) -> GuestFirewallRule {
    GuestFirewallRule {
        security_group: Some(name.into()),
        direction: None,
        action: None,
        proto: None,
        dport: None,
        sport: None,
        source: None,
        dest: None,
        iface: None,
        log: None,
        comment: None,
        enable: true,
    }
}

fn spec() -> GuestFirewall {
    GuestFirewall {
        enabled: true,
        policy_in: Some(RuleAction::Drop),
        rules: vec![group_ref("web"), ssh()],
        ..GuestFirewall::default()
    }
}

/// The rules as PVE shows them once the spec is carried out.
fn sent_rules() -> Vec<RuleSpec> {
    vec![
        RuleSpec {
            kind: "group".into(),
            action: "web-1a2b3c4d".into(),
            enable: true,
            ..RuleSpec::default()
        },
        RuleSpec {
            kind: "in".into(),
            action: "ACCEPT".into(),
            enable: true,
            proto: Some("tcp".into()),
            dport: Some("22".into()),
            source: Some("+office-5e6f7a8b".into()),
            iface: Some("net0".into()),
            ..RuleSpec::default()
        },
    ]
}

fn as_listed(rules: &[RuleSpec]) -> Vec<Rule> {
    rules
        .iter()
        .enumerate()
        .map(|(pos, r)| Rule {
            pos: Some(pos as u64),
            kind: r.kind.clone(),
            action: r.action.clone(),
            enable: Some(u64::from(r.enable)),
            proto: r.proto.clone(),
            dport: r.dport.clone(),
            source: r.source.clone(),
            iface: r.iface.clone(),
            digest: Some("d1".into()),
            ..Rule::default()
        })
        .collect()
}

fn options_done() -> FirewallOptions {
    FirewallOptions {
        enable: Some(true),
        policy_in: Some("DROP".into()),
        digest: Some("o1".into()),
        ..FirewallOptions::default()
    }
}

fn view(options: FirewallOptions, rules: &[RuleSpec]) -> FirewallView {
    FirewallView {
        options,
        rules: as_listed(rules),
        groups: BTreeMap::from([("web".into(), Ok("web-1a2b3c4d".into()))]),
        ip_sets: BTreeMap::from([("office".into(), Ok("office-5e6f7a8b".into()))]),
        ..FirewallView::default()
    }
}

fn world(seen: Option<FirewallView>) -> World {
    World::new()
        .created()
        .spec(|s| s.firewall = Some(spec()))
        .present(our_vm(Power::Running))
        .observe(|o| o.firewall = seen)
}

fn firewall_call(plan: &Plan) -> &FirewallCall {
    match &plan.step {
        Step::Firewall(write) => {
            assert_eq!((write.node.as_str(), write.vmid), ("pve1", 100));
            &write.call
        }
        other => panic!("want a firewall write, got {other:?}"),
    }
}

#[test]
fn options_are_set_and_what_the_spec_leaves_out_is_deleted() {
    let mut have = FirewallOptions {
        ndp: Some(false),
        digest: Some("o0".into()),
        ..FirewallOptions::default()
    };
    have.policy_in = Some("ACCEPT".into());
    let plan = world(Some(view(have, &[]))).run();
    let FirewallCall::Options {
        set,
        delete,
        digest,
    } = firewall_call(&plan)
    else {
        panic!("{:?}", plan.step)
    };
    assert_eq!(set.enable, Some(true));
    assert_eq!(set.policy_in.as_deref(), Some("DROP"));
    assert_eq!(delete, &vec!["ndp"]);
    assert_eq!(digest.as_deref(), Some("o0"), "guarded by the digest read");
    assert_eq!(plan.requeue_after, Some(Duration::ZERO));
    assert!(
        plan.pending_task.is_none(),
        "a synchronous write is no task"
    );
}

#[test]
fn rules_are_created_then_a_re_apply_sends_nothing() {
    let plan = world(Some(view(options_done(), &[]))).run();
    let FirewallCall::Rules(RulePatch::Prepend(rules)) = firewall_call(&plan) else {
        panic!("{:?}", plan.step)
    };
    // Sent last first: PVE puts each new rule first.
    let mut want = sent_rules();
    want.reverse();
    assert_eq!(rules, &want, "group and IP set by their Proxmox names");
    let done = world(Some(view(options_done(), &sent_rules()))).run();
    assert_eq!(done.step, Step::Idle(Idle::UpToDate), "{:?}", done.step);
}

#[test]
fn drift_by_hand_is_corrected_one_write_a_pass() {
    let full = sent_rules();
    type Case<'a> = (&'a str, Vec<RuleSpec>, &'a str);
    let mut disabled = full.clone();
    disabled[1].enable = false;
    let mut extra = full.clone();
    extra.push(RuleSpec {
        kind: "out".into(),
        action: "DROP".into(),
        ..RuleSpec::default()
    });
    let cases: Vec<Case> = vec![
        ("the group rule deleted", vec![full[1].clone()], "prepend"),
        ("the last rule deleted", vec![full[0].clone()], "insert 1"),
        ("a rule disabled", disabled, "set 1"),
        ("a rule added by hand", extra, "remove 2"),
        (
            "swapped",
            vec![full[1].clone(), full[0].clone()],
            "insert 0",
        ),
    ];
    for (name, have, want) in cases {
        let mut have = have;
        let mut passes = 0;
        loop {
            let plan = world(Some(view(options_done(), &have))).run();
            if plan.step == Step::Idle(Idle::UpToDate) {
                break;
            }
            let FirewallCall::Rules(patch) = firewall_call(&plan) else {
                panic!("{name}: {:?}", plan.step)
            };
            if passes == 0 {
                let got = match patch {
                    RulePatch::Prepend(_) => "prepend".to_owned(),
                    RulePatch::Insert { at, .. } => format!("insert {at}"),
                    RulePatch::Set { pos, digest, .. } => {
                        assert_eq!(digest.as_deref(), Some("d1"), "{name}");
                        format!("set {pos}")
                    }
                    RulePatch::Remove { pos, digest } => {
                        assert_eq!(digest.as_deref(), Some("d1"), "{name}");
                        format!("remove {pos}")
                    }
                };
                assert_eq!(got, want, "{name}");
            }
            patch.apply(&mut have);
            passes += 1;
            assert!(passes < 5, "{name}: does not converge");
        }
        assert_eq!(have, full, "{name}");
    }
}

#[test]
fn a_missing_or_unready_reference_waits_and_sends_nothing() {
    let not_ready = "ProxmoxSecurityGroup default/web is not Ready";
    let missing = "ProxmoxSecurityGroup default/web does not exist";
    let cases = [
        (
            Unusable::NotReady(not_ready.into()),
            ConditionStatus::True,
            not_ready,
        ),
        (
            Unusable::Missing(missing.into()),
            ConditionStatus::False,
            missing,
        ),
    ];
    for (unusable, synced, said) in cases {
        let mut seen = view(FirewallOptions::default(), &[]);
        seen.groups.insert("web".into(), Err(unusable));
        let plan = world(Some(seen)).run();
        assert_eq!(plan.step, Step::Idle(Idle::Wait), "{:?}", plan.step);
        let (status, reason, message) = condition(&plan, ConditionType::Synced).expect("Synced");
        assert_eq!(
            (status, reason.as_str()),
            (synced, "ReferenceNotReady"),
            "waiting for a reference that exists is not a failure; a missing one is"
        );
        assert!(
            message.contains("spec.forProvider.firewall.rules") && message.contains(said),
            "{message}"
        );
        assert!(
            plan.requeue_after.is_some_and(|r| r > Duration::ZERO),
            "no hot loop"
        );
    }
}

#[test]
fn without_a_firewall_in_the_spec_or_unread_nothing_is_sent() {
    let plan = World::new().created().present(our_vm(Power::Running)).run();
    assert_eq!(plan.step, Step::Idle(Idle::UpToDate), "{:?}", plan.step);
    // Declared but not read in this pass (a reused look): no write.
    let plan = world(None).run();
    assert_eq!(plan.step, Step::Idle(Idle::UpToDate), "{:?}", plan.step);
}

#[test]
fn a_vm_that_is_not_ours_is_never_written() {
    let mut theirs = our_vm(Power::Running);
    if let Some(config) = theirs.config.as_mut() {
        config.current.remove("description");
    }
    let plan = World::new()
        .created()
        .spec(|s| s.firewall = Some(spec()))
        .present(theirs)
        .observe(|o| o.firewall = Some(view(FirewallOptions::default(), &[])))
        .run();
    assert!(!matches!(plan.step, Step::Firewall(_)), "{:?}", plan.step);
}

#[test]
fn the_status_shows_the_firewall_read() {
    let plan = world(Some(view(options_done(), &sent_rules()))).run();
    let fw = plan.status.at_provider.firewall.expect("shown");
    assert_eq!(fw.enabled, Some(true));
    assert_eq!(fw.rules[0].security_group.as_deref(), Some("web-1a2b3c4d"));
    assert_eq!(fw.rules[1].source.as_deref(), Some("+office-5e6f7a8b"));
}
