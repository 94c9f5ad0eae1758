//! Migration when `node` changes, following a VM moved by someone else,
//! and disk moves when a disk's `storage` changes.

use super::*;

fn migrate_step(plan: &Plan) -> (&str, &str, bool) {
    match &plan.step {
        Step::Pve(PveCall::Migrate {
            node,
            target,
            online,
            ..
        }) => (node.as_str(), target.as_str(), *online),
        other => panic!("want Migrate, got {other:?}"),
    }
}

/// Our VM on pve1, created on pve1 (`node: pve1` recorded).
fn on_pve1(power: Power) -> World {
    World::new()
        .created()
        .spec(|s| s.node = Some("pve1".into()))
        .status(|s| {
            s.at_provider.target_node = Some("pve1".into());
            s.observed_generation = Some(3);
        })
        .present(our_vm(power))
}

#[test]
fn a_changed_node_migrates_the_vm_live_when_it_runs() {
    let plan = on_pve1(Power::Running)
        .spec(|s| s.node = Some("pve2".into()))
        .run();
    assert_eq!(migrate_step(&plan), ("pve1", "pve2", true));
    let task = plan.pending_task.as_ref().expect("tracked as a task");
    assert_eq!(task.action, TaskAction::Migrate);
    assert_eq!(task.target.as_deref(), Some("pve2"));
    assert_eq!(task.summary, "qmigrate");
    assert_eq!(
        plan.status.at_provider.target_node.as_deref(),
        Some("pve1"),
        "the new node is recorded only once the migration succeeded"
    );

    let offline = on_pve1(Power::Stopped)
        .spec(|s| s.node = Some("pve2".into()))
        .run();
    assert_eq!(migrate_step(&offline), ("pve1", "pve2", false));
}

#[test]
fn a_finished_migration_records_the_node_and_a_failed_one_is_retried_after_backoff() {
    let migrating = |w: World| {
        w.spec(|s| s.node = Some("pve2".into()))
            .task(TaskAction::Migrate, 10)
            .status(|s| {
                if let Some(t) = s.at_provider.task.as_mut() {
                    t.target = Some("pve2".into());
                }
            })
    };
    let mut moved = our_vm(Power::Running);
    moved.node = "pve2".into();
    let done = migrating(on_pve1(Power::Running))
        .present(moved)
        .task_state(TaskState::Finished(TaskOutcome::Succeeded {
            warnings: 0,
            warning_lines: vec![],
        }))
        .run();
    assert_eq!(done.status.at_provider.target_node.as_deref(), Some("pve2"));
    assert_eq!(done.status.at_provider.node.as_deref(), Some("pve2"));
    assert_eq!(done.step, Step::Idle(Idle::UpToDate), "{:?}", done.step);

    let failed = migrating(on_pve1(Power::Running))
        .task_state(TaskState::Finished(TaskOutcome::Failed {
            exit_status: "migration problems".into(),
            log_tail: vec![],
        }))
        .run();
    assert_eq!(
        failed.status.at_provider.target_node.as_deref(),
        Some("pve1")
    );
    let failure = failed.status.at_provider.last_failure.as_ref().unwrap();
    assert_eq!(failure.action, TaskAction::Migrate);
    // After the backoff the same migration is sent again.
    let again = on_pve1(Power::Running)
        .spec(|s| s.node = Some("pve2".into()))
        .failed(TaskAction::Migrate, 1, 0)
        .run();
    assert_eq!(migrate_step(&again), ("pve1", "pve2", true));
}

#[test]
fn a_vm_moved_by_ha_or_by_hand_is_followed_not_moved_back() {
    let mut moved = our_vm(Power::Running);
    moved.node = "pve3".into();
    let plan = on_pve1(Power::Running).present(moved.clone()).run();
    assert_eq!(plan.step, Step::Idle(Idle::UpToDate));
    assert_eq!(plan.status.at_provider.node.as_deref(), Some("pve3"));
    let synced = condition(&plan, ConditionType::Synced).unwrap();
    assert_eq!(synced.1, Reason::OutsidePlacement.as_str());

    // A resource from before the record: a spec acted on already is not a
    // request to move.
    let legacy = on_pve1(Power::Running)
        .status(|s| s.at_provider.target_node = None)
        .present(moved.clone())
        .run();
    assert_eq!(legacy.step, Step::Idle(Idle::UpToDate));
    // ... but a spec changed since is.
    let changed = on_pve1(Power::Running)
        .status(|s| {
            s.at_provider.target_node = None;
            s.observed_generation = Some(2);
        })
        .spec(|s| s.node = Some("pve2".into()))
        .present(moved)
        .run();
    assert_eq!(migrate_step(&changed), ("pve3", "pve2", true));
}

#[test]
fn a_vm_on_its_node_records_it_and_a_locked_vm_is_waited_for() {
    let plan = World::new()
        .created()
        .spec(|s| s.node = Some("pve1".into()))
        .present(our_vm(Power::Running))
        .run();
    assert_eq!(plan.status.at_provider.target_node.as_deref(), Some("pve1"));

    let mut locked = our_vm(Power::Running);
    locked.lock = Some("backup".into());
    let plan = on_pve1(Power::Running)
        .spec(|s| s.node = Some("pve2".into()))
        .present(locked)
        .run();
    assert_eq!(plan.step, Step::Idle(Idle::Wait));
    assert_eq!(
        condition(&plan, ConditionType::Synced).unwrap().1,
        Reason::VmLocked.as_str()
    );
}

#[test]
fn a_changed_disk_storage_moves_the_disk_and_deletes_the_old_volume() {
    let plan = on_pve1(Power::Running)
        .spec(|s| s.disks[0].storage = "ceph".into())
        .run();
    match &plan.step {
        Step::Pve(PveCall::MoveDisk {
            slot,
            storage,
            digest,
            ..
        }) => {
            assert_eq!((slot.as_str(), storage.as_str()), ("scsi0", "ceph"));
            assert_eq!(digest.as_deref(), Some("d1g3st"));
        }
        other => panic!("want MoveDisk, got {other:?}"),
    }
    let task = plan.pending_task.as_ref().unwrap();
    assert_eq!(
        (task.action, task.target.as_deref()),
        (TaskAction::MoveDisk, Some("scsi0"))
    );
    assert!(synced_message(&plan).contains("moving disk scsi0"));
}
