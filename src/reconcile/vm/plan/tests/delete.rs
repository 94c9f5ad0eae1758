//! Deleting: shutdown → stop → destroy → verify gone; foreign VMs are left.

use super::*;

fn deleting() -> World {
    World::new().created().deleting()
}

#[test]
fn delete_table() {
    let gone = Some((F, Reason::Deleting));
    run_table(vec![
        (
            "running: graceful shutdown first",
            deleting().present(our_vm(Power::Running)),
            expect("Shutdown", (T, Reason::WaitingForTask), gone),
        ),
        (
            "running, stopOnDelete: stop at once",
            deleting()
                .spec(|p| p.lifecycle.stop_on_delete = Some(true))
                .present(our_vm(Power::Running)),
            expect("Stop", (T, Reason::WaitingForTask), gone),
        ),
        (
            "shutdown running: observe it",
            deleting()
                .task(TaskAction::Shutdown, 70)
                .task_state(TaskState::Running { progress: None })
                .present(our_vm(Power::Running)),
            expect("ObserveTask", (T, Reason::WaitingForTask), gone),
        ),
        (
            "shutdown timed out: stop hard in the same pass",
            deleting()
                .task(TaskAction::Shutdown, 70)
                .task_state(task_failed(
                    "VM quit/powerdown failed - got timeout",
                    vec![],
                ))
                .present(our_vm(Power::Running)),
            expect("Stop", (T, Reason::WaitingForTask), gone),
        ),
        (
            "a start that failed after the deletion: destroy now, no backoff",
            deleting()
                .task(TaskAction::Start, 70)
                .task_state(task_failed(
                    "PCI device mapping not found for 'gpu'",
                    vec![],
                ))
                .failed(TaskAction::Start, 2, 60)
                .present(our_vm(Power::Stopped)),
            expect("Destroy", (T, Reason::WaitingForTask), gone),
        ),
        (
            "a start still failing from before the deletion: destroy now",
            deleting()
                .failed(TaskAction::Start, 3, 95)
                .present(our_vm(Power::Stopped)),
            expect("Destroy", (T, Reason::WaitingForTask), gone),
        ),
        (
            "a failed destroy backs off while deleting",
            deleting()
                .task(TaskAction::Destroy, 70)
                .task_state(task_failed("can't lock file", vec![]))
                .present(our_vm(Power::Stopped)),
            expect("Wait", (F, Reason::TaskFailed), gone),
        ),
        (
            "a shutdown failure from before the deletion does not count",
            deleting()
                .failed(TaskAction::Shutdown, 1, 10)
                .present(our_vm(Power::Running)),
            expect("Shutdown", (T, Reason::WaitingForTask), gone),
        ),
        (
            "paused: stop (a paused VM cannot shut down)",
            deleting().present(our_vm(Power::Paused)),
            expect("Stop", (T, Reason::WaitingForTask), gone),
        ),
        (
            "stopped: destroy with purge",
            deleting().present(our_vm(Power::Stopped)),
            expect("Destroy", (T, Reason::WaitingForTask), gone),
        ),
        (
            "destroy finished and VM gone: release",
            deleting()
                .task(TaskAction::Destroy, 80)
                .task_state(task_ok())
                .absent(),
            expect("RemoveFinalizer", (T, Reason::ReconcileSuccess), gone),
        ),
        (
            "already gone is success",
            deleting().absent(),
            expect("RemoveFinalizer", (T, Reason::ReconcileSuccess), gone),
        ),
        (
            "never got a VMID",
            World::new().finalizer().deleting(),
            expect("RemoveFinalizer", (T, Reason::ReconcileSuccess), gone),
        ),
        (
            "not ours: let go, touch nothing",
            deleting().present(ObservedVm {
                config: Some(VmConfig {
                    current: [("description".to_owned(), "hand made".to_owned())].into(),
                    pending: Default::default(),
                }),
                ..our_vm(Power::Running)
            }),
            expect("RemoveFinalizer", (T, Reason::ReconcileSuccess), gone),
        ),
        (
            "our create still running: wait for it",
            World::new()
                .pending()
                .finalizer()
                .deleting()
                .present(ObservedVm {
                    lock: Some("create".into()),
                    config: None,
                    ..our_vm(Power::Stopped)
                }),
            expect("Wait", (T, Reason::WaitingForTask), gone),
        ),
        (
            "our create still running, recorded task: observe it",
            World::new()
                .pending()
                .finalizer()
                .deleting()
                .task(TaskAction::Create, 10)
                .task_state(TaskState::Running { progress: Some(10) }),
            expect("ObserveTask", (T, Reason::ImportingDisk), gone),
        ),
        (
            "locked by a backup",
            deleting().present(ObservedVm {
                lock: Some("backup".into()),
                ..our_vm(Power::Stopped)
            }),
            expect("Wait", (T, Reason::VmLocked), gone),
        ),
        (
            "node offline",
            deleting().present(our_vm(Power::Unknown)),
            expect("Wait", (F, Reason::ReconcileError), gone),
        ),
        (
            "destroy failed recently: back off",
            deleting()
                .failed(TaskAction::Destroy, 1, 95)
                .present(our_vm(Power::Stopped)),
            expect("Wait", (F, Reason::TaskFailed), gone),
        ),
    ]);
}

#[test]
fn letting_go_of_a_foreign_vm_says_so() {
    let plan = deleting()
        .present(ObservedVm {
            config: Some(VmConfig {
                current: [(
                    "description".to_owned(),
                    marker_line("x", "y", "someone-else"),
                )]
                .into(),
                pending: Default::default(),
            }),
            ..our_vm(Power::Running)
        })
        .run();
    assert_eq!(plan.step, Step::Kube(KubeWrite::RemoveFinalizer));
    assert!(
        plan.events
            .iter()
            .any(|e| e.warning && e.reason == "NotOwned")
    );
}
