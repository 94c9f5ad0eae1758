//! Templates and protection: conversion once configured, a template that
//! linked clones use, a linked clone waiting for its template, protection
//! cleared only to destroy our VM when its resource is deleted.

use super::*;
use crate::api::ManagementPolicy::*;

/// A spec asking for a template (which never runs).
fn template_spec(w: World) -> World {
    w.spec(|s| {
        s.lifecycle.template = Some(true);
        s.power_state = crate::api::vm::PowerState::Stopped;
    })
}

fn a_template(power: Power) -> ObservedVm {
    ObservedVm {
        template: true,
        ..our_vm(power)
    }
}

fn protected(power: Power) -> ObservedVm {
    let mut vm = our_vm(power);
    let config = vm.config.as_mut().unwrap();
    config.current.insert("protection".into(), "1".into());
    vm
}

#[test]
fn templates() {
    let available = Some((T, Reason::Available));
    run_table(vec![
        (
            "configured and stopped: converted",
            template_spec(World::new().created()).present(our_vm(Power::Stopped)),
            expect("ConvertToTemplate", (T, Reason::WaitingForTask), available),
        ),
        (
            "running: shut down first",
            template_spec(World::new().created()).present(our_vm(Power::Running)),
            expect("Shutdown", (T, Reason::WaitingForTask), None),
        ),
        (
            "drift first, then the conversion",
            template_spec(World::new().created()).present(ObservedVm {
                config: Some({
                    let mut c = matching_config();
                    c.current.insert("memory".into(), "512".into());
                    c
                }),
                ..our_vm(Power::Stopped)
            }),
            expect("Configure", (T, Reason::WaitingForTask), available),
        ),
        (
            "not converted while something is wrong",
            // (A disk smaller than the VM's: disks only grow. Another
            // storage would be a disk move.)
            template_spec(World::new().created())
                .spec(|s| s.disks[0].size = Some(crate::api::quantity::Quantity("10Gi".into())))
                .present(our_vm(Power::Stopped)),
            expect("UpToDate", (F, Reason::InvalidSpec), available),
        ),
        (
            "converted: left as it is, never started",
            template_spec(World::new().created()).present(a_template(Power::Stopped)),
            expect("UpToDate", (T, Reason::ReconcileSuccess), available),
        ),
        (
            "a template the spec does not call one is not started",
            World::new().created().present(a_template(Power::Stopped)),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "the conversion runs: observed",
            template_spec(World::new().created())
                .task(TaskAction::Template, 70)
                .task_state(TaskState::Running { progress: None }),
            expect("ObserveTask", (T, Reason::WaitingForTask), None),
        ),
    ]);
}

#[test]
fn the_pass_that_sees_the_conversion_end_says_it_is_a_template() {
    // The conversion ended OK and the VM is a template now: the status
    // says so in this pass (a ProxmoxImage's clones go on from it).
    let ended = template_spec(World::new().created())
        .task(TaskAction::Template, 70)
        .task_state(task_ok())
        .present(a_template(Power::Stopped))
        .run();
    assert_eq!(ended.status.at_provider.task, None);
    assert_eq!(ended.status.at_provider.config.template, Some(true));
    // Not converted yet: nothing said.
    let before = template_spec(World::new().created())
        .present(our_vm(Power::Stopped))
        .run();
    assert_eq!(before.step.name(), "ConvertToTemplate");
    assert_eq!(before.status.at_provider.config.template, None);
}

#[test]
fn a_conversion_found_running_is_adopted() {
    let plan = template_spec(World::new().created())
        .present(our_vm(Power::Stopped))
        .active("qmtemplate", "100")
        .run();
    assert_eq!(plan.step.name(), "ObserveTask");
    let task = plan.status.at_provider.task.unwrap();
    assert_eq!(task.action, TaskAction::Template);
}

#[test]
fn a_template_with_linked_clones_is_held() {
    let deleting = || World::new().created().deleting();
    let held = deleting()
        .present(a_template(Power::Stopped))
        .observe(|o| o.linked_clones = Some(vec![101, 102]))
        .run();
    assert_eq!(held.step.name(), "Wait");
    assert_eq!(
        held.requeue_after,
        Some(std::time::Duration::from_secs(60)),
        "the resync interval"
    );
    let (status, reason, message) = condition(&held, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "TemplateInUse"));
    assert!(message.contains("VM 101, 102"), "{message}");
    assert!(
        held.events
            .iter()
            .any(|e| e.reason == "TemplateInUse" && e.warning),
        "{:?}",
        held.events
    );
    // Said once: the next pass with the same answer publishes nothing new.
    let again = deleting()
        .status(|s| s.conditions = held.status.conditions.clone())
        .present(a_template(Power::Stopped))
        .observe(|o| o.linked_clones = Some(vec![101, 102]))
        .run();
    assert!(again.events.is_empty(), "{:?}", again.events);

    let free = deleting()
        .present(a_template(Power::Stopped))
        .observe(|o| o.linked_clones = Some(vec![]))
        .run();
    assert_eq!(free.step.name(), "Destroy");
    let needs = match preflight(&deleting().vm, at(100)) {
        Preflight::Observe(needs) => needs,
        other => panic!("{other:?}"),
    };
    assert!(needs.linked_clones, "a deletion asks for the clones");
}

#[test]
fn protection_is_cleared_only_to_destroy_our_vm() {
    let gone = Some((F, Reason::Deleting));
    run_table(vec![
        (
            "deleting, running: shut down as usual",
            World::new()
                .created()
                .deleting()
                .present(protected(Power::Running)),
            expect("Shutdown", (T, Reason::WaitingForTask), gone),
        ),
        (
            "deleting, stopped: clear the protection",
            World::new()
                .created()
                .deleting()
                .present(protected(Power::Stopped)),
            expect("Configure", (T, Reason::WaitingForTask), gone),
        ),
        (
            "deleting without Delete: orphaned, untouched",
            World::new()
                .created()
                .deleting()
                .policies(&[Observe, Create, Update])
                .present(protected(Power::Stopped)),
            expect("RemoveFinalizer", (T, Reason::ReconcileSuccess), None),
        ),
        (
            "not deleting: the spec's protection stands",
            World::new()
                .created()
                .spec(|s| s.lifecycle.protection = Some(true))
                .present(protected(Power::Running)),
            expect("UpToDate", (T, Reason::ReconcileSuccess), None),
        ),
    ]);
    let plan = World::new()
        .created()
        .deleting()
        .present(protected(Power::Stopped))
        .run();
    let Step::Pve(PveCall::Configure { changes, .. }) = &plan.step else {
        panic!("{:?}", plan.step)
    };
    assert_eq!(changes.delete, ["protection"]);
    assert!(changes.set.keys().is_empty());
    assert_eq!(changes.digest.as_deref(), Some("d1g3st"));
    assert!(plan.events.iter().any(|e| e.reason == "ClearingProtection"));
}

#[test]
fn a_linked_clone_waits_for_its_template() {
    let cloning = |full: bool, template: bool| {
        World::new()
            .pending()
            .absent()
            .finalizer()
            .slot_granted("pve1")
            .spec(move |s| {
                s.disks.clear();
                s.clone = Some(
                    serde_json::from_value(json!({"templateName": "golden", "full": full}))
                        .unwrap(),
                );
            })
            .observe(move |o| {
                o.template = Some(TemplateLookup::Found {
                    vmid: 9000,
                    node: "pve1".into(),
                    template,
                    pool: None,
                    tags: vec![],
                })
            })
    };
    // Not on Proxmox yet, or not a template yet: the same to the plan.
    let coming = |full: bool| {
        cloning(full, false).observe(|o| {
            o.template = Some(TemplateLookup::Coming {
                resource: "ns/golden".into(),
            })
        })
    };
    run_table(vec![
        (
            "linked, a plain VM no ProxmoxVM declares a template: missing",
            cloning(false, false),
            expect("Wait", (F, Reason::NotATemplate), None),
        ),
        (
            "linked, a ProxmoxVM with template: true builds it: wait, no error",
            coming(false),
            expect("Wait", (T, Reason::WaitingForTemplate), None),
        ),
        (
            "full, a ProxmoxVM with template: true builds it: wait too",
            coming(true),
            expect("Wait", (T, Reason::WaitingForTemplate), None),
        ),
        (
            "linked, a template: clone",
            cloning(false, true),
            expect("CloneVm", (T, Reason::WaitingForTask), None),
        ),
        (
            "full clone of a plain VM: wait, nothing is cloned",
            cloning(true, false),
            expect("Wait", (F, Reason::NotATemplate), None),
        ),
        (
            "full clone of a template: clone",
            cloning(true, true),
            expect("CloneVm", (T, Reason::WaitingForTask), None),
        ),
    ]);
}

#[test]
fn a_clone_waiting_for_its_template_is_woken_and_only_falls_back_to_the_resync() {
    let world = World::new().pending().absent().finalizer().spec(|s| {
        s.disks.clear();
        s.clone =
            Some(serde_json::from_value(json!({"templateName": "golden", "full": false})).unwrap());
    });
    let waiting = world
        .clone()
        .observe(|o| {
            o.template = Some(TemplateLookup::Coming {
                resource: "ns/golden".into(),
            })
        })
        .run();
    let (status, reason, message) = condition(&waiting, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (T, "WaitingForTemplate"));
    assert!(message.contains("ProxmoxVM ns/golden"), "{message}");
    assert_eq!(
        waiting.requeue_after,
        Some(std::time::Duration::from_secs(60)),
        "the resync interval: the template's resource wakes it"
    );
    assert_eq!(
        condition(&waiting, ConditionType::Ready).unwrap().1,
        "Creating"
    );
    // A template that truly does not exist is still looked for by itself.
    let missing = world
        .observe(|o| o.template = Some(TemplateLookup::NotFound))
        .run();
    let (status, reason, _) = condition(&missing, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "TemplateNotFound"));
    assert_eq!(
        missing.requeue_after,
        Some(std::time::Duration::from_secs(30))
    );
}
