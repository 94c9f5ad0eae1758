//! A container restored from a backup archive (`restore`): the one
//! `vzrestore` call, waiting for a ProxmoxBackup, and the owner marker
//! written over the archive's only with the proof of this resource's own
//! restore task.

use super::*;
use crate::reconcile::common::restore::BackupLookup;

const ARCHIVE: &str = "local:backup/vzdump-lxc-300-2026_12_05-01_00_00.tar.zst";

/// A restoring spec: `restore` as JSON, no template.
fn restoring(restore: Value, annotations: Value, status: Value) -> ProxmoxContainer {
    ct(
        json!({"template": null, "restore": restore}),
        annotations,
        status,
    )
}

fn by_archive(annotations: Value, status: Value) -> ProxmoxContainer {
    restoring(json!({"archive": ARCHIVE}), annotations, status)
}

fn by_ref() -> ProxmoxContainer {
    restoring(
        json!({"backupRef": {"name": "nightly"}}),
        recorded(),
        json!({}),
    )
}

fn proof(vmid: u32) -> Value {
    json!({"atProvider": {"restoredVmid": vmid}})
}

/// The container the archive makes, its notes another resource's.
fn restored_foreign() -> Container {
    described(&format!(
        "database of team b\n\n{}",
        marker_line_of("ProxmoxContainer", "team-b", "db", "4f1e")
    ))
}

fn with_backup(lookup: Option<BackupLookup>) -> Observation {
    Observation {
        backup: lookup,
        ..obs(Container::Absent)
    }
}

#[test]
fn restore_table() {
    let ended = {
        let mut status = task("Restore", "vzrestore");
        status["atProvider"]["restoredVmid"] = json!(null);
        status
    };
    let cases: Vec<(&str, ProxmoxContainer, Observation, &str, &str)> = vec![
        (
            "archive named, VMID recorded: restored",
            by_archive(recorded(), json!({})),
            obs(Container::Absent),
            "restore",
            "Creating",
        ),
        (
            "backupRef not looked up: waits, Synced",
            by_ref(),
            with_backup(None),
            "idle",
            "BackupNotReady",
        ),
        (
            "backupRef missing: waits, Synced",
            by_ref(),
            with_backup(Some(BackupLookup::NotFound)),
            "idle",
            "BackupNotReady",
        ),
        (
            "backupRef not Ready: waits, Synced",
            by_ref(),
            with_backup(Some(BackupLookup::NotReady("it is not Ready".into()))),
            "idle",
            "BackupNotReady",
        ),
        (
            "backupRef Ready: restored",
            by_ref(),
            with_backup(Some(BackupLookup::Ready(ARCHIVE.into()))),
            "restore",
            "Creating",
        ),
        (
            "the restore running: waited for",
            by_archive(recorded(), task("Restore", "vzrestore")),
            Observation {
                task: Some(TaskSeen::Running),
                ..obs(Container::Absent)
            },
            "idle",
            "WaitingForTask",
        ),
        (
            "a restore of the VMID the node lists (status lost): waited for",
            by_archive(recorded(), json!({})),
            Observation {
                busy: Some("task vzrestore of 120 running on pve".into()),
                ..obs(Container::Absent)
            },
            "idle",
            "WaitingForTask",
        ),
        (
            "restore ended, notes marked by the call: the spec applied",
            by_archive(recorded(), ended.clone()),
            Observation {
                task: Some(TaskSeen::Succeeded),
                ..obs(ours(false, &[("memory", "1024")]))
            },
            "configure",
            "ReconcileSuccess",
        ),
        (
            "restore ended, the archive's marker: written over",
            by_archive(recorded(), ended),
            Observation {
                task: Some(TaskSeen::Succeeded),
                ..obs(restored_foreign())
            },
            "configure",
            "ReconcileSuccess",
        ),
        (
            "proof recorded, the marker write lost: written again",
            by_archive(recorded(), proof(120)),
            obs(restored_foreign()),
            "configure",
            "ReconcileSuccess",
        ),
        (
            "another resource's container at an allocated VMID, no proof: not taken over",
            by_archive(allocated(), json!({})),
            obs(restored_foreign()),
            "forget-vmid",
            "ReconcileSuccess",
        ),
        (
            "another resource's container at a named VMID, no proof: NotOwned",
            by_archive(recorded(), json!({})),
            obs(restored_foreign()),
            "idle",
            "NotOwned",
        ),
        (
            "proof of another VMID: NotOwned",
            by_archive(recorded(), proof(121)),
            obs(restored_foreign()),
            "idle",
            "NotOwned",
        ),
        (
            "proof without restore in the spec: NotOwned",
            ct(json!({}), recorded(), proof(120)),
            obs(restored_foreign()),
            "idle",
            "NotOwned",
        ),
        (
            "proof, being deleted: not claimed, let go",
            deleting(by_archive(recorded(), proof(120))),
            obs(restored_foreign()),
            "remove-finalizer",
            "NotOwned",
        ),
    ];
    for (name, c, o, step, reason) in cases {
        let p = plan(&c, &id(), &o, now());
        assert_eq!(kind(&p.step), step, "{name}: {:?}", p.step);
        let synced = find(&p.status.conditions, ConditionType::Synced)
            .unwrap_or_else(|| panic!("{name}: no Synced"));
        assert_eq!(synced.reason, reason, "{name}: {synced:?}");
        if reason == "BackupNotReady" {
            assert_eq!(synced.status, ConditionStatus::True, "{name}");
            let message = synced.message.as_deref().unwrap_or_default();
            assert!(
                message.contains("restore.backupRef") && message.contains("ns/nightly"),
                "{name}: {message}"
            );
        }
    }
}

#[test]
fn the_restore_call_names_archive_vmid_storage_and_this_resource_never_force() {
    let c = by_archive(recorded(), json!({}));
    let p = plan(&c, &id(), &obs(Container::Absent), now());
    let Step::Restore { node, restore } = &p.step else {
        panic!("want a restore, got {:?}", p.step);
    };
    assert_eq!(node, "pve");
    assert_eq!((restore.vmid, restore.archive.as_str()), (120, ARCHIVE));
    assert_eq!(restore.storage.as_deref(), Some("local-lvm"));
    assert_eq!(restore.hostname.as_deref(), Some("app"));
    assert_eq!(
        restore.description.as_deref(),
        Some(marker_line_of("ProxmoxContainer", "ns", "app", UID).as_str())
    );
    assert_eq!(restore.unprivileged, Some(true));
    assert!(restore.unique);
    assert_eq!(restore.name, None, "a container has no name option");
    // Recorded as the restore, so no pass sends it again.
    let settled = settle(
        p,
        &Outcome::Started {
            upid: "UPID:pve:00001234:00005678:6B49D200:vzrestore:120:root@pam:".into(),
            type_: "vzrestore".into(),
        },
        now(),
        Duration::from_secs(1800),
    );
    let task = settled.status.at_provider.task.expect("recorded");
    assert_eq!(task.action, ContainerTaskAction::Restore);
}

#[test]
fn the_restore_tasks_end_is_the_proof_until_the_container_is_marked() {
    let ended = plan(
        &by_archive(recorded(), task("Restore", "vzrestore")),
        &id(),
        &Observation {
            task: Some(TaskSeen::Succeeded),
            ..obs(restored_foreign())
        },
        now(),
    );
    assert_eq!(ended.status.at_provider.restored_vmid, Some(120));
    let Step::Configure { update, .. } = &ended.step else {
        panic!("want the marker written, got {:?}", ended.step);
    };
    assert_eq!(
        update.set.keys().collect::<Vec<_>>(),
        ["description"],
        "only the marker"
    );
    let notes = &update.set["description"];
    assert!(notes.starts_with("database of team b\n\n"), "{notes}");
    assert!(notes.ends_with(&marker_line_of("ProxmoxContainer", "ns", "app", UID)));
    assert!(!notes.contains("team-b"), "{notes}");
    assert_eq!(update.digest.as_deref(), Some("d1"));

    // Marked: the proof is dropped.
    let marked = plan(
        &by_archive(recorded(), proof(120)),
        &id(),
        &obs(ours(false, &[])),
        now(),
    );
    assert_eq!(marked.status.at_provider.restored_vmid, None);

    // A new restore (the container went) does not inherit the proof.
    let again = plan(
        &by_archive(recorded(), proof(120)),
        &id(),
        &obs(Container::Absent),
        now(),
    );
    assert_eq!(kind(&again.step), "restore");
    assert_eq!(again.status.at_provider.restored_vmid, None);
}
