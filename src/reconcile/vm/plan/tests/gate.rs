//! Pause, management policies, provider config, identity, act failures.

use std::time::Duration;

use super::*;
use crate::api::ManagementPolicy::*;

#[test]
fn gate_table() {
    let available = |s: &mut ProxmoxVMStatus| {
        let c =
            crate::api::Condition::new(ConditionType::Ready, T, Reason::Available, "", Time(at(1)));
        s.conditions.push(c);
    };
    run_table(vec![
        (
            "paused by annotation keeps Ready as it was",
            World::new()
                .created()
                .annotate(meta::PAUSED, "true")
                .status(available)
                .present(our_vm(Power::Stopped)),
            expect(
                "Paused",
                (F, Reason::ReconcilePaused),
                Some((T, Reason::Available)),
            ),
        ),
        (
            "empty policies pause",
            World::new().created().policies(&[]),
            expect("Paused", (F, Reason::ReconcilePaused), None),
        ),
        (
            "paused even while deleting",
            World::new()
                .created()
                .deleting()
                .annotate(meta::PAUSED, "true"),
            expect("Paused", (F, Reason::ReconcilePaused), None),
        ),
        (
            "policies without Observe",
            World::new().policies(&[Create, Delete]),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "provider config missing: no finalizer, no Proxmox",
            World::new()
                .pending()
                .with_provider(ProviderState::NotFound {
                    message: "ClusterProviderConfig \"default\" not found".into(),
                }),
            expect("Wait", (F, Reason::ProviderConfigNotFound), None),
        ),
        (
            "provider unusable",
            World::new()
                .created()
                .with_provider(ProviderState::Unusable {
                    message: "Secret crossplane-system/pve not found".into(),
                }),
            expect("Wait", (F, Reason::ReconcileError), None),
        ),
        (
            "deleted before anything was created: nothing to clean",
            World::new().deleting(),
            expect(
                "Wait",
                (T, Reason::ReconcileSuccess),
                Some((F, Reason::Deleting)),
            ),
        ),
        (
            "orphan: policies lack Delete",
            World::new()
                .created()
                .deleting()
                .policies(&[Observe, Create, Update, LateInitialize]),
            expect(
                "RemoveFinalizer",
                (T, Reason::ReconcileSuccess),
                Some((F, Reason::Deleting)),
            ),
        ),
        (
            "external name that is not a VMID",
            World::new().annotate(meta::EXTERNAL_NAME, "web-1"),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "external name below the VMID range",
            World::new().vmid(99),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "external name disagrees with spec.vmid",
            World::new().vmid(100).spec(|s| s.vmid = Some(101)),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "spec.vmid is recorded first",
            World::new().spec(|s| s.vmid = Some(4242)),
            expect(
                "RecordExternalName",
                (T, Reason::ReconcileSuccess),
                Some((F, Reason::Creating)),
            ),
        ),
    ]);
}

#[test]
fn orphaning_touches_nothing_and_says_so() {
    let plan = World::new()
        .created()
        .deleting()
        .policies(&[Observe, Create, Update])
        .run();
    assert_eq!(plan.step, Step::Kube(KubeWrite::RemoveFinalizer));
    assert!(plan.events.iter().any(|e| e.reason == "Orphaned"));
}

#[test]
fn spec_vmid_marks_a_create_pending_only_when_creating() {
    let plan = World::new().spec(|s| s.vmid = Some(4242)).run();
    assert_eq!(
        plan.step,
        Step::Kube(KubeWrite::RecordExternalName {
            vmid: 4242,
            create_pending: true
        })
    );
    let observe = World::new()
        .spec(|s| s.vmid = Some(4242))
        .policies(&[Observe])
        .run();
    assert_eq!(
        observe.step,
        Step::Kube(KubeWrite::RecordExternalName {
            vmid: 4242,
            create_pending: false
        })
    );
}

#[test]
fn act_failures() {
    let world = World::new()
        .pending()
        .absent()
        .node("pve1")
        .image(true)
        .finalizer()
        .slot_granted("pve1");
    let planned = world.run();
    assert_eq!(planned.step.name(), "CreateVm");

    let conflict = settle(&world.input(), planned.clone(), Err(ActFailure::Conflict));
    assert_eq!(conflict.requeue_after, Some(Duration::ZERO));
    assert_eq!(conflict.status.at_provider.last_failure, None);

    let failed = settle(
        &world.input(),
        planned.clone(),
        Err(ActFailure::Failed(
            "500 unable to create VM 100 - VM 100 already exists on node 'pve2'".into(),
        )),
    );
    assert_eq!(failed.step, Step::Idle(Idle::Wait));
    assert_eq!(failed.requeue_after, Some(Duration::from_secs(10)));
    let failure = failed
        .status
        .at_provider
        .last_failure
        .as_ref()
        .expect("recorded");
    assert_eq!((failure.action, failure.count), (TaskAction::Create, 1));
    let (status, reason, message) = condition(&failed, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "ReconcileError"));
    assert!(message.contains("already exists"), "{message}");
    assert!(failed.status.at_provider.task.is_none());

    let locked = settle(
        &world.input(),
        planned.clone(),
        Err(ActFailure::Locked("VM is locked (backup)".into())),
    );
    let (_, reason, _) = condition(&locked, ConditionType::Synced).unwrap();
    assert_eq!(reason, "VmLocked");
}
