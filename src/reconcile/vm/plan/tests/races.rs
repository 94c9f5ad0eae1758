//! Regressions of issue 9: what many resources, a lost write, a VM moved
//! by HA or a failing Proxmox must never make the plan do.

use std::time::Duration;

use super::*;
use crate::api::Condition;

/// A VM at our VMID that another resource created, on `node`.
fn foreign_on(node: &str) -> ObservedVm {
    let mut config = matching_config();
    config.current.insert(
        "description".into(),
        marker_line("default", "other", "another-uid"),
    );
    ObservedVm {
        node: node.into(),
        config: Some(config),
        ..our_vm(Power::Running)
    }
}

fn with_condition(
    world: World,
    type_: ConditionType,
    status: ConditionStatus,
    reason: Reason,
) -> World {
    world.status(|s| {
        s.conditions.push(Condition::new(
            type_,
            status,
            reason,
            "earlier",
            Time(at(0)),
        ))
    })
}

#[test]
fn a_vm_that_is_not_ours_never_lends_its_node() {
    // An allocated VMID was taken by another resource's VM on pve2: the
    // VMID is given up, and pve2 is not recorded as our node (the next
    // placement must not land there for that reason).
    let plan = World::new().pending().present(foreign_on("pve2")).run();
    assert_eq!(plan.step, Step::Kube(KubeWrite::ForgetExternalName));
    assert_eq!(plan.status.at_provider.node, None);
    assert_eq!(plan.status.at_provider.state, None);

    // A recorded placement survives the foreign VM.
    let placed = World::new()
        .pending()
        .node("pve3")
        .present(foreign_on("pve2"))
        .run();
    assert_eq!(placed.status.at_provider.node.as_deref(), Some("pve3"));

    // A VMID the user named: reported as not ours, node not taken either.
    let named = World::new()
        .spec(|s| s.vmid = Some(100))
        .pending()
        .present(foreign_on("pve2"))
        .run();
    assert_eq!(named.step, Step::Idle(Idle::Wait));
    assert_eq!(named.status.at_provider.node, None);
}

#[test]
fn observe_only_resources_describe_whatever_vm_they_observe() {
    let plan = World::new()
        .vmid(100)
        .policies(&[crate::api::ManagementPolicy::Observe])
        .present(foreign_on("pve2"))
        .run();
    assert_eq!(plan.status.at_provider.node.as_deref(), Some("pve2"));
}

#[test]
fn not_owned_is_a_warning_event_once_per_change() {
    let world = World::new()
        .spec(|s| s.vmid = Some(100))
        .created()
        .present(foreign_on("pve2"));
    let first = world.clone().run();
    let reasons: Vec<&str> = first.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["NotOwned"]);
    assert!(first.events[0].warning);
    let again = with_condition(world, ConditionType::Synced, F, Reason::NotOwned).run();
    assert!(again.events.is_empty(), "{:?}", again.events);
}

#[test]
fn ready_says_creating_until_the_vm_first_runs_as_requested() {
    // Created and recorded, not started yet: still Creating.
    let created = World::new().created().present(our_vm(Power::Stopped));
    let first = with_condition(created.clone(), ConditionType::Ready, F, Reason::Creating).run();
    assert_eq!(
        condition(&first, ConditionType::Ready).map(|c| (c.0, c.1)),
        Some((F, "Creating".into()))
    );
    // Once it has been Available, stopped means Unavailable.
    let later = with_condition(created, ConditionType::Ready, T, Reason::Available).run();
    assert_eq!(
        condition(&later, ConditionType::Ready).map(|c| (c.0, c.1)),
        Some((F, "Unavailable".into()))
    );
}

#[test]
fn a_transient_proxmox_error_is_reported_as_such_and_retried_with_backoff() {
    let plan = World::new()
        .created()
        .node("pve1")
        .observe_failed("transient error (HTTP 500): Internal Server Error")
        .run();
    assert_eq!(plan.step, Step::Idle(Idle::Wait));
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(4)));
    let synced = condition(&plan, ConditionType::Synced).unwrap();
    assert_eq!((synced.0, synced.1.as_str()), (F, "ReconcileError"));
    assert!(
        synced
            .2
            .starts_with("cannot observe VM 100 on Proxmox: transient error (HTTP 500)"),
        "{}",
        synced.2
    );
    assert!(
        !synced.2.contains("provider config"),
        "never blamed on the provider config: {}",
        synced.2
    );
    assert_eq!(
        condition(&plan, ConditionType::Ready),
        None,
        "Ready is kept"
    );
}

#[test]
fn a_vm_moved_outside_its_nodes_is_followed_and_said_once() {
    let world = World::new()
        .created()
        .node("pve1")
        .spec(|s| s.allowed_nodes = vec!["pve2".into()])
        .present(our_vm(Power::Running));
    let first = world.clone().run();
    assert_eq!(first.step, Step::Idle(Idle::UpToDate));
    assert_eq!(first.status.at_provider.node.as_deref(), Some("pve1"));
    assert_eq!(
        first.events.iter().map(|e| e.reason).collect::<Vec<_>>(),
        ["OutsidePlacement"]
    );
    let again = with_condition(world, ConditionType::Synced, T, Reason::OutsidePlacement).run();
    assert!(again.events.is_empty());
}

#[test]
fn a_create_refused_because_the_vmid_exists_gives_an_allocated_vmid_up() {
    // The token cannot see the VM that holds the VMID (no VM.Audit on it),
    // so the VM looks absent and only the create's refusal tells.
    let world = World::new()
        .pending()
        .absent()
        .node("pve1")
        .image(true)
        .finalizer()
        .slot_granted("pve1");
    let planned = world.run();
    assert_eq!(planned.step.name(), "CreateVm");
    let failed = settle(
        &world.input(),
        planned.clone(),
        Err(ActFailure::Taken(
            "already exists: unable to create VM 100 - VM 100 already exists on node 'pve1'".into(),
        )),
    );
    assert_eq!(failed.requeue_after, Some(Duration::ZERO));
    assert!(
        failed
            .status
            .at_provider
            .last_failure
            .as_ref()
            .unwrap()
            .vmid_taken
    );

    let next = world.clone().status(|s| *s = failed.status.clone()).run();
    assert_eq!(next.step, Step::Kube(KubeWrite::ForgetExternalName));
    assert_eq!(next.status.at_provider.last_failure, None);
    assert!(
        next.events
            .iter()
            .any(|e| e.reason == "VmidTaken" && e.warning)
    );

    // A VMID the spec names is reported, not given up.
    let named = world
        .spec(|s| s.vmid = Some(100))
        .status(|s| *s = failed.status.clone())
        .run();
    assert_eq!(named.step, Step::Idle(Idle::Wait));
    let synced = condition(&named, ConditionType::Synced).unwrap();
    assert_eq!((synced.0, synced.1.as_str()), (F, "NotOwned"));
}
