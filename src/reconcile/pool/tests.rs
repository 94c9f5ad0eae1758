//! The pool's decisions, table by table: the diff (comment, entries added,
//! revoked only when this resource applied them), the deletion held by
//! members, the ownership, what each outcome says on the resource (through
//! the shared CRUD pass) and the status.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pve_client::AclSubject;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::plan::*;
use kube::runtime::controller::Action;

use crate::api::condition::Condition;
use crate::api::meta::{Capabilities, ManagementPolicy};
use crate::api::pool::{AppliedAccess, PoolAccess, PoolMember};
use crate::api::{ProxmoxPool, Reason};
use crate::reconcile::managed::crud::pass::{Kind, Refusal, outcome, standing_changed};
use crate::reconcile::managed::crud::{Call, Decision, Diff, Observed, plan};

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

/// (status, reason) of a condition.
fn said(c: &Condition) -> (String, String) {
    (format!("{:?}", c.status), c.reason.clone())
}

/// What each outcome of a pool's pass says, through the shared CRUD pass
/// with the pool's refusal (`plan::refusal`) and name.
#[test]
fn each_outcome_says_its_conditions_and_when_to_look_again() {
    let wanted = want(OWNER, Some("c"), &[user("PVEVMUser", "alice@pve")], &[]);
    let refusal = format!(
        "{ACCESS_FIELD}0] (PVEVMUser for user alice@pve): ACL update failed: user 'alice@pve' does not exist"
    );
    let patch = PoolPatch {
        grant: vec![grant("PVEVMUser", "alice@pve")],
        ..PoolPatch::default()
    };
    let resync = Duration::from_secs(60);
    let backoff = Duration::from_secs(7);
    /// Name, decision, refusal, Ready and Synced (status, reason), the next look.
    type Row = (
        &'static str,
        Decision<PoolObject>,
        Option<&'static str>,
        (&'static str, &'static str),
        (&'static str, &'static str),
        Action,
    );
    let refused: &'static str = refusal.clone().leak();
    let cases: Vec<Row> = vec![
        (
            "up to date",
            Decision::UpToDate,
            None,
            ("True", "Available"),
            ("True", "ReconcileSuccess"),
            Action::requeue(resync),
        ),
        (
            "created",
            Decision::Call(Call::Create(wanted.clone())),
            None,
            ("False", "Creating"),
            ("True", "ReconcileSuccess"),
            Action::requeue(Duration::ZERO),
        ),
        (
            "an entry refused: the field named, no loop",
            Decision::Call(Call::Update(patch)),
            Some(refused),
            ("False", "Unavailable"),
            ("False", "AccessRefused"),
            Action::requeue(resync),
        ),
        (
            "another refusal: backoff",
            Decision::Call(Call::Create(wanted.clone())),
            Some("pool 'a' already exists"),
            ("False", "Unavailable"),
            ("False", "ReconcileError"),
            Action::requeue(backoff),
        ),
        (
            "another's",
            Decision::NotOwned,
            None,
            ("False", "Unavailable"),
            ("False", "NotOwned"),
            Action::requeue(resync),
        ),
        (
            "deletion held by members: backoff",
            Decision::InUse("holds qemu/100".into()),
            None,
            ("False", "InUse"),
            ("False", "InUse"),
            Action::requeue(backoff),
        ),
        (
            "unreadable: backoff",
            Decision::Wait("refused".into()),
            None,
            ("False", "Unavailable"),
            ("False", "ReconcileError"),
            Action::requeue(backoff),
        ),
    ];
    for (name, decision, refused, ready, synced, again) in cases {
        let refused = refused.map(|why| Refusal {
            why: why.to_owned(),
            field: refusal_reason(why),
        });
        let o = outcome(&decision, refused, "pool a", at(10), resync, || backoff);
        assert_eq!(said(&o.ready), (ready.0.into(), ready.1.into()), "{name}");
        assert_eq!(
            said(&o.synced),
            (synced.0.into(), synced.1.into()),
            "{name}"
        );
        assert_eq!(o.action, again, "{name}");
    }
    // The refusal's message names the field; the one not owned names the pool.
    let o = outcome(
        &Decision::<PoolObject>::Call(Call::Update(PoolPatch::default())),
        Some(Refusal {
            field: refusal_reason(&refusal),
            why: refusal,
        }),
        "pool a",
        at(10),
        resync,
        || backoff,
    );
    let message = o.synced.message.unwrap_or_default();
    assert!(message.contains("spec.forProvider.access[0]"), "{message}");
    assert_eq!(Reason::AccessRefused.as_str(), o.synced.reason);
    assert!(
        o.event
            .is_some_and(|e| e.warning && e.reason == "AccessRefused")
    );
    let o = outcome(
        &Decision::<PoolObject>::NotOwned,
        None,
        "pool a",
        at(10),
        resync,
        || backoff,
    );
    let message = o.synced.message.unwrap_or_default();
    assert!(
        message.contains("pool a exists without this resource's owner marker"),
        "{message}"
    );
}

/// The warning of a standing state (not owned, held by members) is said
/// when Synced turns to it, not again on every look.
#[test]
fn a_standing_state_is_announced_once() {
    let o = outcome(
        &Decision::<PoolObject>::InUse("holds qemu/100".into()),
        None,
        "pool a",
        at(10),
        Duration::from_secs(60),
        || Duration::from_secs(7),
    );
    assert!(o.standing);
    let event = o.event.expect("an InUse warning");
    assert_eq!((event.warning, event.reason), (true, "InUse"));
    assert!(standing_changed(&[], Some(&event)));
    let synced_was = |reason: Reason| {
        vec![Condition::new(
            crate::api::ConditionType::Synced,
            crate::api::ConditionStatus::False,
            reason,
            "",
            at(1),
        )]
    };
    assert!(standing_changed(
        &synced_was(Reason::ReconcileSuccess),
        Some(&event)
    ));
    assert!(!standing_changed(&synced_was(Reason::InUse), Some(&event)));
}

fn refusal_reason(why: &str) -> Option<Reason> {
    super::plan::refusal(why)
}

fn pool_object(generation: i64) -> ProxmoxPool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ProxmoxPool",
        "metadata": {"name": "pool", "namespace": "team-a", "uid": "u-1", "generation": generation},
        "spec": {"forProvider": {
            "poolId": "a",
            "comment": "c",
            "access": [{"role": "PVEVMUser", "user": "alice@pve"}],
        }},
        "status": {"atProvider": {
            "poolId": "a",
            "memberCount": 2,
            "access": [{"role": "PVEAuditor", "user": "bob@pve", "propagate": true}],
        }},
    }))
    .unwrap()
}

#[test]
fn the_status_shows_members_and_the_entries_it_manages() {
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
    let pool = pool_object(3);
    let status = Kind::status(&pool, &(), vec![], Some(&observed));
    assert_eq!(status.observed_generation, Some(3));
    let at = &status.at_provider;
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
    // What could not be read, or was not asked, keeps what was seen last.
    for kept in [Some(&Observed::Unknown("refused".into())), None] {
        let status = Kind::status(&pool, &(), vec![], kept);
        assert_eq!(status.at_provider.member_count, Some(2), "{kept:?}");
    }
    // Gone: nothing shown.
    let status = Kind::status(&pool, &(), vec![], Some(&Observed::NotFound));
    assert_eq!(status.at_provider, Default::default());
}

/// The gate the shared pass asks of every kind (`ManagedSpec::capabilities`),
/// as the pool's spec carries it.
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
    assert_eq!(spec(vec![All]).capabilities(&plain), Ok(ALL));
    for (policies, meta) in [(vec![All], &annotated), (vec![], &plain)] {
        // Paused, deleted or not: nothing is done, the finalizer stays.
        assert!(matches!(
            spec(policies).capabilities(meta),
            Err((Reason::ReconcilePaused, _))
        ));
    }
    assert!(matches!(
        spec(vec![Create]).capabilities(&plain),
        Err((Reason::InvalidSpec, _))
    ));
}
