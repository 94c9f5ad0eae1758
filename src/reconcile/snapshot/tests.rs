//! The snapshot's plan, table by table: what is wanted, whose a snapshot
//! is, the one correction (a rollback before the description), the guest
//! a reference resolves to, and what the status reports.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pve_client::{GuestType, SnapshotEntry};

use super::plan::{self, Owner, Patch, SnapshotObject};
use crate::api::meta::Capabilities;
use crate::api::snapshot::{GuestKind, SnapshotAtProvider};
use crate::api::task::{CallAction, EndedTask, TaskRecord};
use crate::reconcile::managed::crud::{Call, Decision, Observed, plan as decide};

const ALL: Capabilities = Capabilities {
    create: true,
    update: true,
    delete: true,
};

const OWNER: Owner<'static> = Owner {
    namespace: "team-a",
    name: "before-upgrade",
    uid: "u-1",
};

fn want(kind: GuestKind, vmstate: Option<bool>, rollback: Option<&str>) -> SnapshotObject {
    plan::want(
        &OWNER,
        Some("before the upgrade"),
        (kind, vmstate),
        rollback,
        None,
    )
}

fn entry(name: &str, description: &str) -> SnapshotEntry {
    SnapshotEntry {
        name: name.into(),
        description: Some(description.into()),
        parent: Some("base".into()),
        snaptime: Some(1_700_000_000),
        vmstate: Some(false),
    }
}

fn ours() -> String {
    want(GuestKind::ProxmoxVM, None, None).description
}

#[test]
fn the_wanted_snapshot_carries_the_marker_and_ram_only_for_a_vm() {
    let vm = want(GuestKind::ProxmoxVM, Some(true), None);
    assert!(vm.vmstate);
    assert!(vm.description.starts_with("before the upgrade\n\n"));
    assert!(
        vm.description.ends_with(
            "Managed by crossplane-provider-proxmox: ProxmoxSnapshot team-a/before-upgrade uid=u-1"
        ),
        "{}",
        vm.description
    );
    // The API refuses it for a container; were it let through, no RAM.
    assert!(!want(GuestKind::ProxmoxContainer, Some(true), None).vmstate);
}

#[test]
fn a_snapshot_is_ours_only_with_our_marker() {
    let list = vec![
        SnapshotEntry {
            name: "current".into(),
            ..SnapshotEntry::default()
        },
        entry("by-hand", "taken by a person"),
        entry("before-upgrade", &ours()),
    ];
    let cases = [
        ("ours", "before-upgrade", "u-1", Some(true)),
        (
            "another resource's marker",
            "before-upgrade",
            "u-2",
            Some(false),
        ),
        ("no marker", "by-hand", "u-1", Some(false)),
        ("absent", "nope", "u-1", None),
        ("current is no snapshot", "current", "u-1", None),
    ];
    for (name, snap, uid, want) in cases {
        let got = match plan::observed(&list, snap, uid, None) {
            Observed::Found { ours, .. } => Some(ours),
            Observed::NotFound => None,
            Observed::Unknown(_) => panic!("{name}"),
        };
        assert_eq!(got, want, "{name}");
    }
}

fn seen(description: &str, handled: Option<&str>, ours: bool) -> Observed<SnapshotObject> {
    let list = [entry("before-upgrade", description)];
    let uid = if ours { "u-1" } else { "u-9" };
    plan::observed(&list, "before-upgrade", uid, handled)
}

#[test]
fn one_call_per_pass_rollback_first() {
    let plain = want(GuestKind::ProxmoxVM, None, None);
    let asked = want(GuestKind::ProxmoxVM, None, Some("r2"));
    let other_text = plan::want(
        &OWNER,
        Some("changed"),
        (GuestKind::ProxmoxVM, None),
        Some("r2"),
        None,
    );
    let no_guest = plan::want(
        &OWNER,
        None,
        (GuestKind::ProxmoxVM, None),
        None,
        Some("ProxmoxVM web has no VMID and node yet".into()),
    );
    type Row<'a> = (
        &'static str,
        &'a SnapshotObject,
        Observed<SnapshotObject>,
        bool,
        Decision<SnapshotObject>,
    );
    let rows: Vec<Row<'_>> = vec![
        (
            "absent: taken",
            &plain,
            Observed::NotFound,
            false,
            Decision::Call(Call::Create(plain.clone())),
        ),
        (
            "as wanted: nothing",
            &plain,
            seen(&ours(), None, true),
            false,
            Decision::UpToDate,
        ),
        (
            "a new rollback request: rolled back",
            &asked,
            seen(&ours(), Some("r1"), true),
            false,
            Decision::Call(Call::Update(Patch {
                rollback: Some("r2".into()),
                description: None,
            })),
        ),
        (
            "the request handled: nothing",
            &asked,
            seen(&ours(), Some("r2"), true),
            false,
            Decision::UpToDate,
        ),
        (
            "rollback and description differ: the rollback first",
            &other_text,
            seen(&ours(), Some("r1"), true),
            false,
            Decision::Call(Call::Update(Patch {
                rollback: Some("r2".into()),
                description: None,
            })),
        ),
        (
            "then the description, in place",
            &other_text,
            seen(&ours(), Some("r2"), true),
            false,
            Decision::Call(Call::Update(Patch {
                rollback: None,
                description: Some(other_text.description.clone()),
            })),
        ),
        (
            "a snapshot of the name made by hand: never touched",
            &asked,
            seen("by hand", None, false),
            false,
            Decision::NotOwned,
        ),
        (
            "deleting someone else's: left, released",
            &plain,
            seen("by hand", None, false),
            true,
            Decision::Released { orphaned: true },
        ),
        (
            "deleting ours: deleted",
            &plain,
            seen(&ours(), None, true),
            true,
            Decision::Call(Call::Delete),
        ),
        (
            "deleted, or the guest gone: released",
            &plain,
            Observed::NotFound,
            true,
            Decision::Released { orphaned: false },
        ),
        (
            "no guest yet: nothing taken, said",
            &no_guest,
            Observed::NotFound,
            false,
            Decision::Empty("ProxmoxVM web has no VMID and node yet".into()),
        ),
    ];
    for (name, want, observed, deleting, expected) in rows {
        assert_eq!(decide(want, &observed, ALL, deleting), expected, "{name}");
    }
}

#[test]
fn a_reference_resolves_to_the_guest_its_status_shows() {
    type Seen = Option<(Option<String>, Option<u32>, bool)>;
    type Want = Result<(GuestType, u32), &'static str>;
    let cases: Vec<(&str, GuestKind, Seen, Want)> = vec![
        (
            "a VM",
            GuestKind::ProxmoxVM,
            Some((Some("pve".into()), Some(100), false)),
            Ok((GuestType::Qemu, 100)),
        ),
        (
            "a container",
            GuestKind::ProxmoxContainer,
            Some((Some("pve".into()), Some(200), false)),
            Ok((GuestType::Lxc, 200)),
        ),
        (
            "missing",
            GuestKind::ProxmoxVM,
            None,
            Err("does not exist in this namespace"),
        ),
        (
            "not created yet",
            GuestKind::ProxmoxVM,
            Some((None, None, false)),
            Err("has no VMID"),
        ),
        (
            "going",
            GuestKind::ProxmoxVM,
            Some((Some("pve".into()), Some(100), true)),
            Err("is being deleted"),
        ),
    ];
    for (name, kind, seen, want) in cases {
        let got = plan::guest(kind, "web", seen);
        match (got, want) {
            (Ok(g), Ok((t, vmid))) => assert_eq!(
                (g.kind, g.vmid, g.node.as_str()),
                (t, vmid, "pve"),
                "{name}"
            ),
            (Err(why), Err(part)) => assert!(why.contains(part), "{name}: {why}"),
            (got, want) => panic!("{name}: {got:?} vs {want:?}"),
        }
    }
}

fn ended(type_: &str, upid: &str, succeeded: bool) -> TaskRecord {
    TaskRecord {
        last_task: Some(EndedTask {
            upid: upid.into(),
            action: CallAction::Update,
            type_: type_.into(),
            target: Some("r2".into()),
            succeeded,
            message: (!succeeded).then(|| "VM is locked (backup)".to_owned()),
            at: Time(Timestamp::from_second(1_700_000_100).unwrap()),
        }),
        ..TaskRecord::default()
    }
}

#[test]
fn each_rollback_task_is_reported_once_and_only_a_success_handles_the_request() {
    let ok = ended("qmrollback", "UPID:a", true);
    let outcome = plan::rollback_outcome(&ok, None).expect("a rollback ended");
    assert_eq!((outcome.request.as_str(), outcome.succeeded), ("r2", true));
    assert_eq!(plan::handled(Some(&outcome)), Some("r2"));
    assert!(
        plan::rollback_outcome(&ok, Some(&outcome)).is_none(),
        "said once"
    );

    let failed =
        plan::rollback_outcome(&ended("vzrollback", "UPID:b", false), Some(&outcome)).unwrap();
    assert!(!failed.succeeded);
    assert_eq!(
        plan::handled(Some(&failed)),
        None,
        "tried again while it stands"
    );

    assert!(plan::rollback_outcome(&ended("qmsnapshot", "UPID:c", true), None).is_none());
}

#[test]
fn the_status_shows_what_was_seen_of_our_snapshot() {
    let guest = plan::guest(
        GuestKind::ProxmoxVM,
        "web",
        Some((Some("pve".into()), Some(100), false)),
    )
    .unwrap();
    let at = plan::at_provider(
        SnapshotAtProvider::default(),
        Some(&guest),
        Some(&seen(&ours(), None, true)),
    );
    assert_eq!((at.vmid, at.node.as_deref()), (Some(100), Some("pve")));
    assert_eq!(at.snaptime.as_deref(), Some("2023-11-14T22:13:20Z"));
    assert_eq!(at.parent.as_deref(), Some("base"));
    assert_eq!(at.description.as_deref(), Some("before the upgrade"));
    assert_eq!(at.vmstate, Some(false));
    // Unreadable: kept; gone: cleared.
    let kept = plan::at_provider(at.clone(), None, Some(&Observed::Unknown("timeout".into())));
    assert_eq!(kept, at);
    let gone = plan::at_provider(at, None, Some(&Observed::NotFound));
    assert_eq!((gone.snaptime, gone.description), (None, None));
}
