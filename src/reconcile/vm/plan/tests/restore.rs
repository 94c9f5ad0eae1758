//! Restoring a VM from a backup archive (`restore`): the restore call,
//! waiting for a ProxmoxBackup, and the owner marker written over the
//! archive's only with the proof of this resource's own restore task.

use super::converge::configure_changes;
use super::*;
use crate::reconcile::vm::plan::owner::description;

const ARCHIVE: &str = "local:backup/vzdump-qemu-300-2026_12_05-01_00_00.vma.zst";

/// A restore spec: `restore` as JSON, no disks of its own.
fn restoring(w: World, restore: serde_json::Value) -> World {
    w.spec(|s| {
        s.disks.clear();
        s.restore = Some(serde_json::from_value(restore).unwrap());
    })
}

fn by_archive(w: World) -> World {
    restoring(w, json!({"archive": ARCHIVE, "storage": "local-lvm"}))
}

fn by_ref(w: World) -> World {
    restoring(w, json!({"backupRef": {"name": "nightly"}}))
}

/// The restored VM at VMID 100: the spec's config, with the archive's
/// notes carrying the backed-up VM's resource's marker.
fn restored_vm() -> ObservedVm {
    let mut config = matching_config();
    let foreign = marker_line("team-b", "db", "4f1e0000-0000-0000-0000-000000000001");
    config.current.insert(
        "description".into(),
        format!("database of team b\n\n{foreign}"),
    );
    ObservedVm {
        config: Some(config),
        ..our_vm(Power::Stopped)
    }
}

/// The restore task recorded and seen ending OK, the VM restored.
fn restore_ended(w: World) -> World {
    by_archive(w)
        .pending()
        .finalizer()
        .node("pve1")
        .task(TaskAction::Restore, 10)
        .task_state(task_ok())
        .present(restored_vm())
}

fn proven(w: World) -> World {
    w.status(|s| s.at_provider.restored_vmid = Some(100))
}

#[test]
fn restore_table() {
    let ready = |w: World| w.observe(|o| o.backup = Some(BackupLookup::Ready(ARCHIVE.into())));
    let base = || World::new().pending().absent().node("pve1").finalizer();
    run_table(vec![
        (
            "archive named: restored",
            by_archive(base()),
            expect("RestoreVm", (T, Reason::WaitingForTask), None),
        ),
        (
            "no finalizer yet: the finalizer first",
            by_archive(World::new().pending().absent().node("pve1")),
            expect("AddFinalizer", (T, Reason::ReconcileSuccess), None),
        ),
        (
            "backupRef not looked up: waits",
            by_ref(base()),
            expect("Wait", (T, Reason::BackupNotReady), None),
        ),
        (
            "backupRef missing: waits, Synced",
            by_ref(base()).observe(|o| o.backup = Some(BackupLookup::NotFound)),
            expect("Wait", (T, Reason::BackupNotReady), None),
        ),
        (
            "backupRef not Ready: waits, Synced",
            by_ref(base())
                .observe(|o| o.backup = Some(BackupLookup::NotReady("it is not Ready".into()))),
            expect("Wait", (T, Reason::BackupNotReady), None),
        ),
        (
            "backupRef Ready: restored",
            ready(by_ref(base())),
            expect("RestoreVm", (T, Reason::WaitingForTask), None),
        ),
        (
            "a failed restore backs off",
            by_archive(base()).failed(TaskAction::Restore, 1, 95),
            expect("Wait", (F, Reason::TaskFailed), None),
        ),
        (
            "restore task ended: the marker is written over the archive's",
            restore_ended(World::new()),
            expect("Configure", (T, Reason::WaitingForTask), None),
        ),
        (
            "proof recorded, marker write lost: written again",
            proven(by_archive(World::new()).pending().finalizer()).present(restored_vm()),
            expect("Configure", (T, Reason::WaitingForTask), None),
        ),
        (
            "another resource's VM at the allocated VMID, no proof: not taken over",
            by_archive(World::new())
                .pending()
                .finalizer()
                .present(restored_vm()),
            expect("ForgetExternalName", (T, Reason::ReconcileSuccess), None),
        ),
        (
            "another resource's VM at a named VMID, no proof: NotOwned",
            by_archive(World::new())
                .spec(|s| s.vmid = Some(100))
                .pending()
                .finalizer()
                .present(restored_vm()),
            expect("Wait", (F, Reason::NotOwned), None),
        ),
        (
            "proof but the create is recorded done: no takeover",
            proven(by_archive(World::new()).created()).present(restored_vm()),
            expect("Wait", (F, Reason::NotOwned), None),
        ),
        (
            "proof of another VMID: no takeover",
            by_archive(World::new())
                .spec(|s| s.vmid = Some(100))
                .pending()
                .finalizer()
                .status(|s| s.at_provider.restored_vmid = Some(101))
                .present(restored_vm()),
            expect("Wait", (F, Reason::NotOwned), None),
        ),
        (
            "proof without restore in the spec: no takeover",
            proven(
                World::new()
                    .spec(|s| s.vmid = Some(100))
                    .pending()
                    .finalizer(),
            )
            .present(restored_vm()),
            expect("Wait", (F, Reason::NotOwned), None),
        ),
    ]);
}

#[test]
fn the_restore_names_archive_vmid_storage_and_never_force() {
    let plan = by_archive(World::new().pending().absent().node("pve1").finalizer()).run();
    let Step::Pve(PveCall::RestoreVm {
        node,
        vmid,
        archive,
        storage,
        pool,
        name,
        description,
    }) = &plan.step
    else {
        panic!("want RestoreVm, got {:?}", plan.step);
    };
    assert_eq!((node.as_str(), *vmid), ("pve1", 100));
    assert_eq!(archive, ARCHIVE);
    assert_eq!(storage.as_deref(), Some("local-lvm"));
    assert_eq!(*pool, None);
    assert_eq!(name, "web");
    assert_eq!(description, &marker_line("default", "web", UID));
    assert_eq!(
        plan.pending_task.as_ref().map(|t| t.action),
        Some(TaskAction::Restore)
    );
    let by_ref = by_ref(World::new().pending().absent().node("pve1").finalizer())
        .observe(|o| o.backup = Some(BackupLookup::NotReady("it is not Ready".into())))
        .run();
    let message = synced_message(&by_ref);
    assert!(
        message.contains("restore.backupRef") && message.contains("default/nightly"),
        "{message}"
    );
}

#[test]
fn after_the_restore_the_marker_replaces_the_archives_and_keeps_its_notes() {
    let plan = restore_ended(World::new()).run();
    assert_eq!(plan.status.at_provider.restored_vmid, Some(100));
    let set = sent(&configure_changes(&plan).set);
    assert_eq!(set.keys().collect::<Vec<_>>(), ["description"]);
    assert_eq!(
        set["description"],
        format!(
            "database of team b\n\n{}",
            marker_line("default", "web", UID)
        )
    );
    assert_eq!(configure_changes(&plan).digest.as_deref(), Some("d1g3st"));

    // Declared notes replace the archive's.
    let declared = restore_ended(World::new())
        .spec(|s| s.description = Some("restored web".into()))
        .run();
    let set = sent(&configure_changes(&declared).set);
    assert!(set["description"].starts_with("restored web\n\n"));
    assert!(!set["description"].contains("team-b"));
}

#[test]
fn once_marked_the_creation_is_recorded_and_the_proof_dropped() {
    let mut vm = restored_vm();
    if let Some(config) = vm.config.as_mut() {
        config.current.insert(
            "description".into(),
            description(
                Some("database of team b"),
                &marker_line("default", "web", UID),
            ),
        );
    }
    let plan = proven(by_archive(World::new()).pending().finalizer())
        .present(vm)
        .run();
    assert_eq!(plan.step.name(), "RecordCreateSucceeded");
    assert_eq!(plan.status.at_provider.restored_vmid, None);
}

#[test]
fn a_taken_vmid_is_a_clear_failure_not_a_loop() {
    let taken = |w: World| {
        w.status(|s| {
            s.at_provider.last_failure = Some(TaskFailure {
                action: TaskAction::Restore,
                message: "unable to restore VM 100 - VM 100 already exists on node 'pve1'".into(),
                at: Time(at(95)),
                count: 1,
                vmid_taken: true,
            })
        })
    };
    let base = || {
        by_archive(World::new())
            .pending()
            .absent()
            .node("pve1")
            .finalizer()
    };
    let allocated = taken(base()).run();
    assert_eq!(allocated.step.name(), "ForgetExternalName");
    let named = taken(base().spec(|s| s.vmid = Some(100))).run();
    assert_eq!(named.step.name(), "Wait");
    assert!(
        condition(&named, ConditionType::Synced).is_some_and(|c| c.1 == "NotOwned"),
        "{:?}",
        named.status.conditions
    );
}
