//! Properties of every plan: idempotent status writes, recorded tasks,
//! what preflight asks for, secrets kept out of logs.

use super::*;

#[test]
fn writing_the_planned_status_back_changes_nothing() {
    // The status a pass writes, read back on the next pass with nothing else
    // changed, must produce the same status: otherwise every write would
    // wake the watch again and the controller would spin.
    let worlds = [
        World::new().created().present(our_vm(Power::Running)),
        World::new()
            .pending()
            .absent()
            .node("pve1")
            .image(true)
            .finalizer(),
        World::new()
            .pending()
            .task(TaskAction::Create, 10)
            .task_state(TaskState::Running { progress: Some(42) }),
    ];
    for world in worlds {
        let first = world.run();
        let again = World {
            vm: ProxmoxVM {
                status: Some(first.status.clone()),
                ..world.vm.clone()
            },
            now: at(130),
            ..world.clone()
        };
        let second = again.run();
        let mut first_status = first.status.clone();
        // A step that starts a task records it only when settled.
        first_status.at_provider.task = second.status.at_provider.task.clone();
        assert_eq!(second.status, first_status, "step {:?}", first.step);
    }
}

#[test]
fn a_started_task_is_recorded_with_its_deadline() {
    let world = World::new()
        .pending()
        .absent()
        .node("pve1")
        .image(true)
        .finalizer()
        .slot_granted("pve1");
    let plan = world.run();
    assert_eq!(plan.step.name(), "CreateVm");
    assert!(
        plan.status.at_provider.task.is_none(),
        "nothing recorded before dispatch"
    );
    let upid = "UPID:pve1:0000AAAA:00000001:6B49D264:qmcreate:100:root@pam:";
    let plan = settle(
        &world.input(),
        plan,
        Ok(Done::Started(Upid::parse(upid).unwrap())),
    );
    let task = plan.status.at_provider.task.as_ref().expect("recorded");
    assert_eq!(task.upid, upid);
    assert!(
        plan.events.is_empty(),
        "said when it ends (or once it ran long): {:?}",
        plan.events
    );
    assert_eq!(task.action, TaskAction::Create);
    assert_eq!(task.type_, "qmcreate");
    assert_eq!(task.node, "pve1");
    assert_eq!(task.started_at.0, at(100));
    assert_eq!(task.deadline.0, at(700), "default 10 min timeout");
    assert_eq!(task.summary, "qmcreate");
}

#[test]
fn preflight_asks_for_what_the_plan_needs() {
    let needs = match preflight(
        &World::new().pending().node("pve1").password("7").vm,
        at(100),
    ) {
        Preflight::Observe(needs) => needs,
        Preflight::Decided(plan) => panic!("decided {:?}", plan.step),
    };
    assert_eq!(needs.vmid, Some(100));
    assert_eq!(needs.active_tasks_on.as_deref(), Some("pve1"));
    assert_eq!(needs.images.len(), 1);
    assert_eq!(needs.images[0].volume, image_volume());
    assert!(needs.placement.is_none(), "node already chosen");
    assert_eq!(needs.password, Some(("web-pw".into(), "password".into())));
    assert_eq!(
        needs.slot,
        Some(SlotRequest {
            node: Some("pve1".into()),
            kind: Heavy::Import
        })
    );

    let fresh = match preflight(&World::new().vm, at(100)) {
        Preflight::Observe(needs) => needs,
        Preflight::Decided(plan) => panic!("decided {:?}", plan.step),
    };
    assert!(fresh.placement.is_some() && fresh.vmid.is_none() && fresh.images.is_empty());
    assert!(fresh.slot.is_none(), "an import waits for its node");

    let created = match preflight(&World::new().created().node("pve1").vm, at(100)) {
        Preflight::Observe(needs) => needs,
        Preflight::Decided(plan) => panic!("decided {:?}", plan.step),
    };
    assert!(
        created.images.is_empty() && created.slot.is_none(),
        "no create ahead"
    );

    let paused = World::new().created().annotate(meta::PAUSED, "true");
    assert!(
        matches!(preflight(&paused.vm, at(100)), Preflight::Decided(p) if p.step == LocalStep::Idle(Idle::Paused))
    );
}

#[test]
fn secrets_never_show_in_debug_output() {
    let plan = World::new()
        .pending()
        .absent()
        .node("pve1")
        .image(true)
        .finalizer()
        .password("7")
        .slot_granted("pve1")
        .run();
    let Step::Pve(PveCall::CreateVm { params, .. }) = &plan.step else {
        panic!("want CreateVm, got {:?}", plan.step);
    };
    assert_eq!(sent(&params.settings)["cipassword"], "hunter2");
    let printed = format!("{plan:?}");
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(printed.contains("<redacted>"));
}

#[test]
fn a_started_task_is_named_by_the_type_proxmox_gave_it() {
    // An HA-managed VM is started by the HA manager: the task is a
    // `hastart`, not the `qmstart` a plain start would be.
    let world = World::new().created().present(our_vm(Power::Stopped));
    let plan = world.run();
    assert_eq!(plan.step.name(), "Start", "{:?}", plan.step);
    let upid = Upid::encode("pve1", 7, 7, 1_800_000_100, "hastart", "100", "root@pam").unwrap();
    let plan = settle(&world.input(), plan, Ok(Done::Started(upid)));
    let task = plan.status.at_provider.task.as_ref().expect("recorded");
    assert_eq!(
        (task.action, task.type_.as_str()),
        (TaskAction::Start, "hastart")
    );
    assert_eq!(task.summary, "hastart");
}
