//! The backup's plan, table by table: whose an archive is, the one
//! correction (its protection), what a guest without a VMID means, the
//! notes sent and what the status reports.

use pve_client::{BackupVolume, Guest, GuestType};

use super::plan::{self, BackupObject, Patch};
use crate::api::backup::BackupAtProvider;
use crate::api::meta::Capabilities;
use crate::reconcile::common::owner;
use crate::reconcile::managed::crud::{Call, Decision, Observed, plan as decide};

const ALL: Capabilities = Capabilities {
    create: true,
    update: true,
    delete: true,
};

const VOLID: &str = "local:backup/vzdump-qemu-100-2026_12_05-01_00_00.vma.zst";

fn marker(uid: &str) -> String {
    owner::marker_line_of("ProxmoxBackup", "team-a", "web-now", uid)
}

fn archive(volid: &str, notes: Option<String>, ctime: u64, protected: bool) -> BackupVolume {
    BackupVolume {
        volid: volid.into(),
        vmid: Some(100),
        ctime: Some(ctime),
        size: Some(1 << 20),
        format: Some("vma.zst".into()),
        subtype: Some("qemu".into()),
        notes,
        protected: Some(protected),
    }
}

/// A case: its name, the archives listed, the volume the status records,
/// and the archive seen (volume, ours).
type OwnerCase = (
    &'static str,
    Vec<BackupVolume>,
    Option<&'static str>,
    Option<(&'static str, bool)>,
);

/// A case: its name, what is wanted, what was seen, whether the resource
/// is being deleted, and the decision.
type PlanCase = (
    &'static str,
    BackupObject,
    Observed<BackupObject>,
    bool,
    Decision<BackupObject>,
);

#[test]
fn an_archive_is_ours_only_with_our_marker_first_in_its_notes() {
    let by_hand = archive("local:backup/a", Some("nightly".into()), 10, false);
    let ours_old = archive("local:backup/b", Some(marker("u-1")), 20, false);
    let ours_new = archive(VOLID, Some(marker("u-1")), 30, true);
    let other = archive("local:backup/c", Some(marker("u-2")), 40, false);
    let cases: Vec<OwnerCase> = vec![
        ("none", vec![], None, None),
        ("only by hand", vec![by_hand.clone()], None, None),
        ("another resource's", vec![other.clone()], None, None),
        (
            "ours, the newest of two",
            vec![by_hand.clone(), ours_old, ours_new.clone(), other.clone()],
            None,
            Some((VOLID, true)),
        ),
        (
            "the recorded archive without the marker (notes changed by hand)",
            vec![by_hand.clone()],
            Some("local:backup/a"),
            Some(("local:backup/a", false)),
        ),
    ];
    for (name, list, recorded, want) in cases {
        let got = plan::observed(&list, "u-1", recorded);
        let got = match &got {
            Observed::Found { object, ours } => Some((object.volume.clone().unwrap(), *ours)),
            Observed::NotFound => None,
            Observed::Unknown(why) => panic!("{name}: unknown {why}"),
        };
        assert_eq!(got, want.map(|(v, ours)| (v.to_owned(), ours)), "{name}");
    }
}

fn seen(protected: bool) -> Observed<BackupObject> {
    plan::observed(
        &[archive(VOLID, Some(marker("u-1")), 30, protected)],
        "u-1",
        None,
    )
}

#[test]
fn the_plan_takes_once_corrects_protection_and_deletes_what_is_ours() {
    let why = "ProxmoxVM web has no VMID and node yet".to_owned();
    let no_guest = Some(why.clone());
    let cases: Vec<PlanCase> = vec![
        (
            "no archive: taken",
            plan::want(None, None),
            Observed::NotFound,
            false,
            Decision::Call(Call::Create(plan::want(None, None))),
        ),
        (
            "no archive and no guest yet: waits",
            plan::want(None, no_guest.clone()),
            Observed::NotFound,
            false,
            Decision::Empty(why.clone()),
        ),
        (
            "taken, protection not managed: up to date",
            plan::want(None, None),
            seen(true),
            false,
            Decision::UpToDate,
        ),
        (
            "taken, protection as wanted",
            plan::want(Some(true), None),
            seen(true),
            false,
            Decision::UpToDate,
        ),
        (
            "taken, protection lifted in the spec",
            plan::want(Some(false), None),
            seen(true),
            false,
            Decision::Call(Call::Update(Patch {
                volume: VOLID.into(),
                protected: false,
            })),
        ),
        (
            "taken, and the guest gone since: the archive is kept as it is",
            plan::want(None, no_guest.clone()),
            seen(false),
            false,
            Decision::Empty(why),
        ),
        (
            "deleted: the archive goes",
            plan::want(Some(true), None),
            seen(true),
            true,
            Decision::Call(Call::Delete),
        ),
        (
            "deleted, nothing taken",
            plan::want(None, None),
            Observed::NotFound,
            true,
            Decision::Released { orphaned: false },
        ),
    ];
    for (name, want, observed, deleting, decision) in cases {
        assert_eq!(decide(&want, &observed, ALL, deleting), decision, "{name}");
    }
}

#[test]
fn the_notes_start_with_the_marker() {
    assert_eq!(plan::notes_template("M", None), "M");
    assert_eq!(plan::notes_template("M", Some("")), "M");
    assert_eq!(
        plan::notes_template("M", Some("{{guestname}}")),
        "M\\n{{guestname}}"
    );
}

#[test]
fn the_status_shows_the_archive_and_keeps_where_it_was_looked_for() {
    let guest = Guest {
        kind: GuestType::Qemu,
        node: "pve".into(),
        vmid: 100,
    };
    let at = plan::at_provider(BackupAtProvider::default(), Some(&guest), Some(&seen(true)));
    assert_eq!(at.volume.as_deref(), Some(VOLID));
    assert_eq!(at.protected, Some(true));
    assert_eq!(at.ctime.as_deref(), Some("1970-01-01T00:00:30Z"));
    assert_eq!((at.node.as_deref(), at.vmid), (Some("pve"), Some(100)));
    // Not asked this pass: kept; the guest gone: node and VMID kept.
    let kept = plan::at_provider(at.clone(), None, None);
    assert_eq!(kept, at);
    let gone = plan::at_provider(at, None, Some(&Observed::NotFound));
    assert_eq!(gone.volume, None);
    assert_eq!((gone.node.as_deref(), gone.vmid), (Some("pve"), Some(100)));
}
