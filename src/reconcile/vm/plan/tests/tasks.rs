//! Tasks in flight, restarts, lost status writes, failures, deadlines.

use std::time::Duration;

use super::*;

fn running(progress: Option<u8>) -> TaskState {
    TaskState::Running { progress }
}

fn finished(exit: &str) -> TaskState {
    let tail = vec![
        "transferred 1.1 GiB of 2.2 GiB (50.00%)".into(),
        format!("TASK ERROR: {exit}"),
    ];
    if exit == "OK" {
        return task_ok();
    }
    match exit.strip_prefix("WARNINGS: ") {
        Some(n) => TaskState::Finished(TaskOutcome::Succeeded {
            warnings: n.parse().expect("a count"),
            warning_lines: tail,
        }),
        None => task_failed(exit, tail),
    }
}

/// A create task recorded in the status, as after a dispatch (or as a
/// restarted provider finds it).
fn importing() -> World {
    World::new()
        .pending()
        .finalizer()
        .node("pve1")
        .task(TaskAction::Create, 10)
}

fn locked_create() -> ObservedVm {
    ObservedVm {
        node: "pve1".into(),
        power: Power::Stopped,
        lock: Some("create".into()),
        template: false,
        config: None,
        agent: AgentState::NotAsked,
    }
}

/// A VM with another resource's owner marker, as a VMID handed out twice
/// by `nextid` leaves it.
fn other_resources_vm() -> ObservedVm {
    let mut vm = our_vm(Power::Stopped);
    if let Some(config) = vm.config.as_mut() {
        config.current.insert(
            "description".into(),
            marker_line("default", "other", "another-uid"),
        );
    }
    vm
}

#[test]
fn task_table() {
    let creating = Some((F, Reason::Creating));
    run_table(vec![
        (
            "import running: observe, dispatch nothing",
            importing()
                .task_state(running(Some(42)))
                .present(locked_create()),
            expect("ObserveTask", (T, Reason::ImportingDisk), creating),
        ),
        (
            "restarted provider resumes the same task from status",
            importing()
                .at(400)
                .task_state(running(Some(87)))
                .present(locked_create()),
            expect("ObserveTask", (T, Reason::ImportingDisk), creating),
        ),
        (
            "past the deadline: TaskTimeout, still observing",
            importing()
                .at(700)
                .task_state(running(Some(99)))
                .present(locked_create()),
            expect("ObserveTask", (F, Reason::TaskTimeout), creating),
        ),
        (
            "create finished: record success",
            importing()
                .task_state(finished("OK"))
                .present(our_vm(Power::Stopped)),
            expect(
                "RecordCreateSucceeded",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "an adopted create turns out to be another resource's (same nextid VMID): allocate again",
            importing()
                .task_state(finished("OK"))
                .present(other_resources_vm()),
            expect(
                "ForgetExternalName",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "warnings count as success",
            importing()
                .task_state(finished("WARNINGS: 2"))
                .present(our_vm(Power::Stopped)),
            expect(
                "RecordCreateSucceeded",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "create failed (Proxmox removed the VM): back off",
            importing()
                .task_state(finished("unable to create VM 100 - checksum mismatch"))
                .absent(),
            expect("Wait", (F, Reason::TaskFailed), creating),
        ),
        (
            "task not visible yet",
            importing()
                .at(30)
                .task_state(TaskState::NotFound)
                .present(locked_create()),
            expect("ObserveTask", (T, Reason::ImportingDisk), creating),
        ),
        (
            "task gone for good, VM absent: create again with the same VMID",
            importing()
                .at(200)
                .task_state(TaskState::NotFound)
                .absent()
                .image(true)
                .slot_granted("pve1"),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "task status unreadable",
            importing()
                .task_state(TaskState::Unreadable("503".into()))
                .present(locked_create()),
            expect("ObserveTask", (F, Reason::ReconcileError), None),
        ),
        (
            "lost status write: a create runs on the VMID; its owner cannot be read yet: wait",
            World::new()
                .pending()
                .finalizer()
                .node("pve1")
                .present(locked_create())
                .active("qmcreate", "100"),
            expect("Wait", (T, Reason::WaitingForTask), creating),
        ),
        (
            "lost status write: VM locked create, task list shows nothing yet",
            World::new()
                .pending()
                .finalizer()
                .node("pve1")
                .present(locked_create()),
            expect("Wait", (T, Reason::WaitingForTask), creating),
        ),
        (
            "lost status write: create finished meanwhile",
            World::new()
                .pending()
                .finalizer()
                .node("pve1")
                .present(our_vm(Power::Stopped)),
            expect(
                "RecordCreateSucceeded",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "lost status write: create failed meanwhile, VM gone: create again",
            World::new()
                .pending()
                .finalizer()
                .node("pve1")
                .absent()
                .image(true)
                .slot_granted("pve1"),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "lost status write: download still running, adopt it",
            World::new()
                .pending()
                .node("pve1")
                .absent()
                .image(false)
                .active("download", "jammy-abababababab.qcow2"),
            expect("ObserveTask", (T, Reason::DownloadingImage), creating),
        ),
        (
            "someone else's backup runs on our VM: wait, start nothing",
            World::new()
                .created()
                .present(our_vm(Power::Stopped))
                .active("vzdump", "100"),
            expect("Wait", (T, Reason::WaitingForTask), None),
        ),
        (
            "someone cloning our VM (task id is the source): not ours to adopt",
            World::new()
                .created()
                .present(our_vm(Power::Running))
                .active("qmclone", "100"),
            expect("Wait", (T, Reason::WaitingForTask), None),
        ),
        (
            "start finished: carry on in the same pass",
            World::new()
                .created()
                .task(TaskAction::Start, 90)
                .task_state(finished("OK"))
                .present(our_vm(Power::Running)),
            expect(
                "UpToDate",
                (T, Reason::ReconcileSuccess),
                Some((T, Reason::Available)),
            ),
        ),
    ]);
}

#[test]
fn progress_shows_in_the_task_summary() {
    let plan = importing()
        .task_state(running(Some(42)))
        .present(locked_create())
        .run();
    let task = plan
        .status
        .at_provider
        .task
        .as_ref()
        .expect("still in flight");
    assert_eq!(task.summary, "qmcreate 42%");
    assert_eq!(task.progress, Some(42));
    assert_eq!(
        plan.requeue_after,
        Some(Duration::from_secs(15)),
        "a running task is looked at again by its timer every 5 poll intervals (at most 15 s); the task watcher wakes the resource when it ends"
    );
    assert!(
        synced_message(&plan).contains("42% done"),
        "{}",
        synced_message(&plan)
    );
}

#[test]
fn a_failed_task_backs_off_and_says_why() {
    let first = importing()
        .task_state(finished("unable to create VM 100 - checksum mismatch"))
        .absent()
        .run();
    assert_eq!(first.requeue_after, Some(Duration::from_secs(10)));
    assert!(first.status.at_provider.task.is_none());
    let failure = first.status.at_provider.last_failure.as_ref().unwrap();
    assert_eq!((failure.action, failure.count), (TaskAction::Create, 1));
    assert!(synced_message(&first).contains("checksum mismatch"));
    assert!(
        first
            .events
            .iter()
            .any(|e| e.warning && e.reason == "TaskFailed" && e.note.contains("TASK ERROR"))
    );

    // The lines that say why are in the condition, not only in the event.
    let migration = World::new()
        .created()
        .present(our_vm(Power::Running))
        .task(TaskAction::Migrate, 70)
        .task_state(task_failed(
            "migration aborted",
            vec![
                "starting migration of VM 100 to node 'pve2'".into(),
                "can't migrate local disk 'local:iso/seed.iso': local cdrom image".into(),
                "TASK ERROR: migration aborted".into(),
            ],
        ))
        .run();
    let message = synced_message(&migration);
    assert!(
        message.contains("migration aborted (starting migration of VM 100 to node 'pve2' | can't migrate local disk 'local:iso/seed.iso': local cdrom image)"),
        "{message}"
    );
    assert!(!message.contains("TASK ERROR"), "{message}");

    let second = importing()
        .failed(TaskAction::Create, 1, 5)
        .task_state(finished("unable to create VM 100 - checksum mismatch"))
        .absent()
        .run();
    assert_eq!(
        second
            .status
            .at_provider
            .last_failure
            .as_ref()
            .unwrap()
            .count,
        2
    );
    assert_eq!(second.requeue_after, Some(Duration::from_secs(20)));
}

#[test]
fn a_success_clears_the_failure_record() {
    let plan = importing()
        .created()
        .failed(TaskAction::Create, 2, 5)
        .task_state(finished("OK"))
        .present(our_vm(Power::Stopped))
        .run();
    assert_eq!(plan.status.at_provider.last_failure, None);
    assert_eq!(plan.status.at_provider.task, None);
}

#[test]
fn an_adopted_task_keeps_its_upid_and_start_time() {
    // A start dispatched before a lost status write, on our own VM.
    let plan = World::new()
        .created()
        .node("pve1")
        .present(our_vm(Power::Stopped))
        .active("qmstart", "100")
        .run();
    let task = plan.status.at_provider.task.as_ref().expect("adopted");
    assert!(task.upid.contains(":qmstart:100:"));
    assert_eq!(task.action, TaskAction::Start);
    assert_eq!(task.started_at.0, at(90));
    assert_eq!(task.deadline.0, at(690));
    assert!(plan.events.iter().any(|e| e.reason == "TaskAdopted"));
}

#[test]
fn a_create_whose_owner_cannot_be_read_is_waited_out_not_adopted() {
    // The config is locked `create`: whose create it is cannot be read, and
    // another resource may have been handed the same VMID. Wait for it to
    // end; the owner marker then says whose VM it is.
    let plan = World::new()
        .pending()
        .finalizer()
        .node("pve1")
        .present(locked_create())
        .active("qmcreate", "100")
        .run();
    assert_eq!(plan.step, Step::Idle(Idle::Wait));
    assert_eq!(plan.status.at_provider.task, None, "nothing adopted");
    assert!(!plan.events.iter().any(|e| e.reason == "TaskAdopted"));
    // Nor does a task on a VM that is not there yet get adopted.
    let absent = World::new()
        .pending()
        .finalizer()
        .node("pve1")
        .absent()
        .active("qmcreate", "100")
        .run();
    assert_eq!(absent.step, Step::Idle(Idle::Wait));
    assert_eq!(absent.status.at_provider.task, None);
}

#[test]
fn a_failed_password_update_is_sent_again() {
    let plan = World::new()
        .created()
        .status(|s| s.at_provider.password_version = Some("v2".into()))
        .task(TaskAction::Configure, 90)
        .task_state(finished("VM is locked (backup)"))
        .present(our_vm(Power::Running))
        .run();
    assert_eq!(plan.status.at_provider.password_version, None);
}

#[test]
fn a_create_that_ended_is_recorded_first_and_its_end_consumed_by_the_next_pass() {
    // The pass that sees the create end on our VM records the creation (a
    // metadata write) and leaves the task recorded: its status holds
    // nothing the next pass will not find again, so it is not written.
    let first = importing()
        .task_state(finished("OK"))
        .present(our_vm(Power::Stopped))
        .run();
    assert_eq!(first.step, Step::Kube(KubeWrite::RecordCreateSucceeded));
    assert!(
        first.status.at_provider.task.is_some(),
        "left to the next pass"
    );
    assert!(first.events.is_empty(), "{:?}", first.events);
    assert_eq!(first.finished_task, None);
    // The next pass consumes the end, says it, and goes on in the same
    // pass (one status write: the end and the next task).
    let next = importing()
        .created()
        .task_state(finished("OK"))
        .present(our_vm(Power::Stopped))
        .run();
    assert_eq!(next.status.at_provider.task, None);
    assert!(
        next.events
            .iter()
            .any(|e| e.reason == "TaskSucceeded" && e.note.contains(":qmcreate:")),
        "{:?}",
        next.events
    );
    assert!(next.finished_task.is_some());
    assert!(matches!(next.step, Step::Pve(_)), "{:?}", next.step);
    // Not ours (yet): consumed as before, and the VM decides.
    let foreign = importing()
        .task_state(finished("OK"))
        .present(ObservedVm {
            config: Some(VmConfig::default()),
            ..our_vm(Power::Stopped)
        })
        .run();
    assert!(foreign.finished_task.is_some(), "{:?}", foreign.step);
}

#[test]
fn a_task_is_announced_once_it_ran_15_seconds_and_said_when_it_ends() {
    let at = |now| {
        World::new()
            .created()
            .node("pve1")
            .present(our_vm(Power::Stopped))
            .task(TaskAction::Start, 90)
            .task_state(running(None))
            .at(now)
            .run()
    };
    let short = at(104);
    assert!(short.announced.is_empty(), "{:?}", short.announced);
    assert!(short.events.is_empty(), "{:?}", short.events);
    let long = at(105);
    assert_eq!(long.announced.len(), 1, "{:?}", long.announced);
    assert_eq!(long.announced[0].reason, "TaskStarted");
    assert!(long.announced[0].note.contains(":qmstart:100:"));
    assert_eq!(
        at(200).announced,
        long.announced,
        "the same words each time"
    );
}
