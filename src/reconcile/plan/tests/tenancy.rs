//! Many teams in one cluster: what a spec may not reach (another resource's
//! owner marker), refused before anything is sent to Proxmox.

use super::*;

/// Notes with another resource's marker line in them.
fn forged_notes() -> String {
    format!(
        "team notes\n{}",
        marker_line("other-team", "db", "uid-of-other-team")
    )
}

/// Our VM whose notes carry a forged marker above ours.
fn ours_with_forged_notes(power: Power) -> ObservedVm {
    let mut vm = our_vm(power);
    let ours = marker_line("default", "web", UID);
    vm.config.as_mut().unwrap().current.insert(
        "description".into(),
        format!("{}\n\n{ours}", forged_notes()),
    );
    vm
}

#[test]
fn tenancy_table() {
    let gone = Some((F, Reason::Deleting));
    run_table(vec![
        (
            "a description with an owner marker is refused",
            World::new().spec(|s| s.description = Some(forged_notes())),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "... also once the VM exists",
            World::new()
                .created()
                .spec(|s| s.description = Some(forged_notes()))
                .present(our_vm(Power::Running)),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "... but it can still be deleted",
            World::new()
                .created()
                .deleting()
                .spec(|s| s.description = Some(forged_notes()))
                .present(our_vm(Power::Running)),
            expect("Shutdown", (T, Reason::WaitingForTask), gone),
        ),
        (
            "our VM with a forged marker above ours is ours",
            World::new()
                .created()
                .present(ours_with_forged_notes(Power::Running)),
            expect(
                "UpToDate",
                (T, Reason::ReconcileSuccess),
                Some((T, Reason::Available)),
            ),
        ),
        (
            "... and is destroyed with its resource",
            World::new()
                .created()
                .deleting()
                .present(ours_with_forged_notes(Power::Stopped)),
            expect("Destroy", (T, Reason::WaitingForTask), gone),
        ),
    ]);
}

#[test]
fn a_forged_marker_is_refused_before_proxmox_naming_the_field() {
    let world = World::new().spec(|s| s.description = Some(forged_notes()));
    let Preflight::Decided(plan) = preflight(&world.vm, world.now) else {
        panic!("decided without Proxmox");
    };
    assert_eq!(plan.step, LocalStep::Idle(Idle::Refuse));
    let message = world.run();
    let message = synced_message(&message);
    assert!(
        message.contains("spec.forProvider.description")
            && message.contains("Managed by crossplane-provider-proxmox:"),
        "{message}"
    );
}
