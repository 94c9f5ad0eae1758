//! The pool's decisions, table by table: the diff (comment, entries added,
//! revoked only when this resource applied them), the deletion held by
//! members, the ownership, and what each outcome says on the resource.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pve_client::AclSubject;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::plan::*;
use crate::api::Reason;
use crate::api::meta::{Capabilities, ManagementPolicy};
use crate::api::pool::{AppliedAccess, PoolAccess, PoolMember, ProxmoxPoolStatus};
use crate::reconcile::managed::crud::{Call, Decision, Diff, Done, Observed, plan};

const OWNER: Owner<'static> = Owner {
    namespace: "team-a",
    name: "pool",
    uid: "u-1",
};

const ALL: Capabilities = Capabilities {
    create: true,
    update: true,
    delete: true,
};

fn user(role: &str, who: &str) -> PoolAccess {
    PoolAccess {
        role: role.into(),
        user: Some(who.into()),
        group: None,
        token: None,
        propagate: true,
    }
}

fn applied(role: &str, who: &str) -> AppliedAccess {
    grant(role, who).access()
}

fn grant(role: &str, who: &str) -> Grant {
    Grant::of(&user(role, who)).unwrap()
}

fn comment(text: Option<&str>) -> String {
    want(OWNER, text, &[], &[]).comment
}

fn seen(text: Option<&str>, access: &[Grant], members: &[u32]) -> PoolObject {
    PoolObject {
        comment: comment(text),
        access: access.iter().cloned().collect(),
        members: members
            .iter()
            .map(|vmid| PoolMember {
                vmid: *vmid,
                kind: "qemu".into(),
                name: Some(format!("vm{vmid}")),
            })
            .collect(),
        applied: BTreeSet::new(),
    }
}

#[test]
fn the_comment_carries_the_owner_marker_and_only_its_uid_owns() {
    let ours = comment(Some("Team A"));
    assert!(ours.starts_with("Team A\n\n"));
    assert!(
        ours.ends_with("Managed by crossplane-provider-proxmox: ProxmoxPool team-a/pool uid=u-1")
    );
    assert!(super::plan::ours(&ours, "u-1"));
    // The same ID asked for by another namespace's resource.
    assert!(!super::plan::ours(&ours, "u-2"));
    assert!(!super::plan::ours("made by hand", "u-1"));
    assert!(!super::plan::ours("", "u-1"));
}

#[test]
fn the_diff_corrects_the_comment_and_the_entries_it_manages() {
    let vm_user = grant("PVEVMUser", "alice@pve");
    let auditor = grant("PVEAuditor", "bob@pve");
    let by_hand = grant("PVEAdmin", "root@pam");
    let mut no_propagate = vm_user.clone();
    no_propagate.propagate = false;
    let cases: Vec<(&str, PoolObject, PoolObject, Option<PoolPatch>)> = vec![
        (
            "as wanted",
            want(OWNER, Some("c"), &[user("PVEVMUser", "alice@pve")], &[]),
            seen(Some("c"), std::slice::from_ref(&vm_user), &[]),
            None,
        ),
        (
            "comment edited on Proxmox: set back",
            want(OWNER, Some("c"), &[], &[]),
            seen(Some("edited"), &[], &[]),
            Some(PoolPatch {
                comment: Some(comment(Some("c"))),
                ..PoolPatch::default()
            }),
        ),
        (
            "an entry missing: granted",
            want(OWNER, None, &[user("PVEVMUser", "alice@pve")], &[]),
            seen(None, &[], &[]),
            Some(PoolPatch {
                grant: vec![vm_user.clone()],
                ..PoolPatch::default()
            }),
        ),
        (
            "propagation changed: granted again (PUT replaces it), not revoked",
            want(
                OWNER,
                None,
                &[user("PVEVMUser", "alice@pve")],
                &[applied("PVEVMUser", "alice@pve")],
            ),
            seen(None, &[no_propagate.clone()], &[]),
            Some(PoolPatch {
                grant: vec![vm_user.clone()],
                ..PoolPatch::default()
            }),
        ),
        (
            "an entry it applied left the spec: revoked",
            want(OWNER, None, &[], &[applied("PVEAuditor", "bob@pve")]),
            seen(None, std::slice::from_ref(&auditor), &[]),
            Some(PoolPatch {
                revoke: vec![auditor.clone()],
                ..PoolPatch::default()
            }),
        ),
        (
            "an entry someone else added: left alone",
            want(
                OWNER,
                None,
                &[user("PVEVMUser", "alice@pve")],
                &[applied("PVEVMUser", "alice@pve")],
            ),
            seen(None, &[vm_user.clone(), by_hand.clone()], &[]),
            None,
        ),
        (
            "members are observed, not managed",
            want(OWNER, None, &[], &[]),
            seen(None, &[], &[100, 101]),
            None,
        ),
    ];
    for (name, wanted, observed, expected) in cases {
        assert_eq!(wanted.diff(&observed), expected, "{name}");
    }
}

#[test]
fn a_pool_with_members_is_not_deleted_and_says_which() {
    let wanted = want(OWNER, None, &[], &[]);
    let busy = Observed::Found {
        object: seen(None, &[], &[100]),
        ours: true,
    };
    assert_eq!(
        plan(&wanted, &busy, ALL, true),
        Decision::InUse(
            "the pool still holds qemu/100 (vm100): Proxmox deletes only an empty pool".into()
        )
    );
    let empty = Observed::Found {
        object: seen(None, &[], &[]),
        ours: true,
    };
    assert_eq!(
        plan(&wanted, &empty, ALL, true),
        Decision::Call(Call::Delete)
    );
    // Another's pool with members is left, whatever it holds.
    let theirs = Observed::Found {
        object: seen(Some("x"), &[], &[100]),
        ours: false,
    };
    assert_eq!(
        plan(&wanted, &theirs, ALL, true),
        Decision::Released { orphaned: true }
    );
}

#[test]
fn only_a_pools_guests_are_its_members() {
    let listed: Vec<pve_client::PoolMember> = serde_json::from_value(serde_json::json!([
        {"id": "qemu/100", "type": "qemu", "vmid": 100, "name": "web", "node": "pve"},
        {"id": "lxc/101", "type": "lxc", "vmid": 101, "node": "pve"},
        {"id": "storage/pve/local", "type": "storage", "storage": "local", "node": "pve"},
    ]))
    .unwrap();
    assert_eq!(
        guests(&listed),
        vec![
            PoolMember {
                vmid: 100,
                kind: "qemu".into(),
                name: Some("web".into())
            },
            PoolMember {
                vmid: 101,
                kind: "lxc".into(),
                name: None
            },
        ]
    );
    let acl = vec![
        pve_client::AclEntry {
            path: "/pool/a".into(),
            subject: AclSubject::Group("devs".into()),
            role: "PVEAuditor".into(),
            propagate: false,
        },
        pve_client::AclEntry {
            path: "/pool/ab".into(),
            subject: AclSubject::User("x@pve".into()),
            role: "PVEAuditor".into(),
            propagate: true,
        },
    ];
    let on = on_path(&acl, &acl_path("a"));
    assert_eq!(on.len(), 1, "only the pool's own path: {on:?}");
}

fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap())
}

fn reason_of(status: &ProxmoxPoolStatus, type_: &str) -> (String, String) {
    let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
    (format!("{:?}", c.status), c.reason.clone())
}

#[test]
fn each_outcome_says_its_conditions_and_when_to_look_again() {
    let wanted = want(OWNER, Some("c"), &[user("PVEVMUser", "alice@pve")], &[]);
    let ours = |members: &[u32]| Observed::Found {
        object: seen(Some("c"), &[grant("PVEVMUser", "alice@pve")], members),
        ours: true,
    };
    let done = |observed, decision, refused: Option<&str>| Done {
        observed,
        decision,
        refused: refused.map(str::to_owned),
    };
    let refusal = format!(
        "{ACCESS_FIELD}0] (PVEVMUser for user alice@pve): ACL update failed: user 'alice@pve' does not exist"
    );
    let patch = PoolPatch {
        grant: vec![grant("PVEVMUser", "alice@pve")],
        ..PoolPatch::default()
    };
    /// Name, outcome, Ready and Synced (status, reason), the next look.
    type Row = (
        &'static str,
        Done<PoolObject>,
        (&'static str, &'static str),
        (&'static str, &'static str),
        Again,
    );
    let cases: Vec<Row> = vec![
        (
            "up to date",
            done(ours(&[]), Decision::UpToDate, None),
            ("True", "Available"),
            ("True", "ReconcileSuccess"),
            Again::Resync,
        ),
        (
            "created",
            done(
                Observed::NotFound,
                Decision::Call(Call::Create(wanted.clone())),
                None,
            ),
            ("False", "Creating"),
            ("True", "ReconcileSuccess"),
            Again::Now,
        ),
        (
            "an entry refused: the field named, no loop",
            done(
                ours(&[]),
                Decision::Call(Call::Update(patch)),
                Some(&refusal),
            ),
            ("False", "Unavailable"),
            ("False", "AccessRefused"),
            Again::Resync,
        ),
        (
            "another's",
            done(
                Observed::Found {
                    object: seen(Some("x"), &[], &[]),
                    ours: false,
                },
                Decision::NotOwned,
                None,
            ),
            ("False", "Unavailable"),
            ("False", "NotOwned"),
            Again::Resync,
        ),
        (
            "deletion held by members: backoff",
            done(ours(&[100]), Decision::InUse("holds qemu/100".into()), None),
            ("False", "InUse"),
            ("False", "InUse"),
            Again::Backoff,
        ),
        (
            "unreadable: backoff",
            done(
                Observed::Unknown("refused".into()),
                Decision::Wait("refused".into()),
                None,
            ),
            ("False", "Unavailable"),
            ("False", "ReconcileError"),
            Again::Backoff,
        ),
    ];
    for (name, done, ready, synced, again) in cases {
        let r = report(
            "a",
            &wanted,
            &done,
            &ProxmoxPoolStatus::default(),
            Some(3),
            at(10),
        );
        assert_eq!(
            reason_of(&r.status, "Ready"),
            (ready.0.into(), ready.1.into()),
            "{name}"
        );
        assert_eq!(
            reason_of(&r.status, "Synced"),
            (synced.0.into(), synced.1.into()),
            "{name}"
        );
        assert_eq!(r.again, again, "{name}");
        assert_eq!(r.status.observed_generation, Some(3), "{name}");
    }
    // The refusal's message names the field.
    let refused = report(
        "a",
        &wanted,
        &done(
            ours(&[]),
            Decision::Call(Call::Update(PoolPatch::default())),
            Some(&refusal),
        ),
        &ProxmoxPoolStatus::default(),
        None,
        at(10),
    );
    let synced = refused
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Synced")
        .unwrap();
    assert!(
        synced
            .message
            .as_deref()
            .unwrap()
            .contains("spec.forProvider.access[0]"),
        "{synced:?}"
    );
    assert_eq!(Reason::AccessRefused.as_str(), synced.reason);
}

#[test]
fn the_status_shows_members_and_the_entries_it_manages() {
    let wanted = want(
        OWNER,
        Some("c"),
        &[user("PVEVMUser", "alice@pve")],
        &[applied("PVEAuditor", "bob@pve")],
    );
    let observed = Observed::Found {
        object: seen(
            Some("c"),
            &[
                grant("PVEVMUser", "alice@pve"),
                grant("PVEAuditor", "bob@pve"),
                grant("PVEAdmin", "root@pam"),
            ],
            &[100],
        ),
        ours: true,
    };
    let done = Done {
        observed,
        decision: Decision::UpToDate,
        refused: None,
    };
    let r = report(
        "a",
        &wanted,
        &done,
        &ProxmoxPoolStatus::default(),
        None,
        at(1),
    );
    let at = &r.status.at_provider;
    assert_eq!(at.pool_id.as_deref(), Some("a"));
    assert_eq!(at.comment.as_deref(), Some("c"));
    assert_eq!(at.member_count, Some(1));
    assert_eq!(at.members[0].vmid, 100);
    // Its own (listed, and the applied one still to revoke), not root's.
    assert_eq!(
        at.access,
        vec![
            applied("PVEAuditor", "bob@pve"),
            applied("PVEVMUser", "alice@pve")
        ]
    );
}

#[test]
fn the_gate_pauses_refuses_or_goes() {
    use crate::api::managed::ManagedSpec;
    use ManagementPolicy::*;
    let spec = |policies: Vec<ManagementPolicy>| ManagedSpec {
        management_policies: policies,
        ..ManagedSpec::default()
    };
    let plain = ObjectMeta::default();
    let annotated = ObjectMeta {
        annotations: Some([(crate::api::meta::PAUSED.to_owned(), "true".to_owned())].into()),
        ..ObjectMeta::default()
    };
    assert_eq!(gate(&spec(vec![All]), &plain), Gate::Go(ALL));
    for (policies, meta) in [(vec![All], &annotated), (vec![], &plain)] {
        // Paused, deleted or not: nothing is done, the finalizer stays.
        assert!(matches!(
            gate(&spec(policies), meta),
            Gate::Stop {
                reason: Reason::ReconcilePaused,
                ..
            }
        ));
    }
    assert!(matches!(
        gate(&spec(vec![Create]), &plain),
        Gate::Stop {
            reason: Reason::InvalidSpec,
            ..
        }
    ));
}
