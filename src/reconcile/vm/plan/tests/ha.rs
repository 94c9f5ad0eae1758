//! High availability: registered in the requested state, kept on its nodes
//! by a rule (PVE 9) or group (PVE 8), removed before the VM is destroyed.

use pve_client::HaAffinity;

use super::*;
use crate::api::vm::{HaState, HighAvailability, NodeAffinity};
use crate::reconcile::vm::plan::{AffinityView, HaCall, HaResourceView, HaView};

fn ha_call(plan: &Plan) -> &HaCall {
    match &plan.step {
        Step::Ha(call) => call,
        other => panic!("want an HA write, got {other:?}"),
    }
}

fn with_ha(strict: Option<bool>) -> World {
    World::new()
        .created()
        .spec(|s| {
            s.allowed_nodes = vec!["pve2".into(), "pve1".into()];
            s.ha = Some(HighAvailability {
                state: HaState::Started,
                node_affinity: strict.map(|strict| NodeAffinity { strict }),
            });
        })
        .present(our_vm(Power::Running))
}

fn view(rules: bool, resource: Option<(&str, Option<&str>)>, nodes: Option<&[&str]>) -> HaView {
    HaView {
        rules,
        resource: resource.map(|(state, group)| HaResourceView {
            state: state.into(),
            group: group.map(Into::into),
        }),
        affinity: nodes.map(|n| AffinityView {
            nodes: n.iter().map(|s| (*s).to_owned()).collect(),
            strict: true,
        }),
    }
}

#[test]
fn pve9_registers_the_resource_then_its_rule_one_write_a_pass() {
    let first = with_ha(Some(true))
        .observe(|o| o.ha = Some(view(true, None, None)))
        .run();
    let HaCall::AddResource(r) = ha_call(&first) else {
        panic!("{:?}", first.step)
    };
    assert_eq!((r.sid.as_str(), r.state.as_str()), ("vm:100", "started"));
    assert_eq!(r.group, None, "PVE 9 has no groups");
    assert!(
        first.pending_task.is_none(),
        "a synchronous write is no task"
    );
    assert_eq!(first.requeue_after, Some(Duration::ZERO));

    let second = with_ha(Some(true))
        .observe(|o| o.ha = Some(view(true, Some(("started", None)), None)))
        .run();
    assert_eq!(
        ha_call(&second),
        &HaCall::AddRule(HaAffinity {
            id: "crossplane-vm-100".into(),
            sid: "vm:100".into(),
            nodes: vec!["pve1".into(), "pve2".into()],
            strict: true,
            comment: Some("managed by crossplane-provider-proxmox: default/web".into()),
        })
    );

    let done = with_ha(Some(true))
        .observe(|o| o.ha = Some(view(true, Some(("started", None)), Some(&["pve1", "pve2"]))))
        .run();
    assert_eq!(done.step, Step::Idle(Idle::UpToDate), "{:?}", done.step);

    let moved_nodes = with_ha(Some(true))
        .spec(|s| s.allowed_nodes = vec!["pve1".into(), "pve3".into()])
        .observe(|o| o.ha = Some(view(true, Some(("started", None)), Some(&["pve1", "pve2"]))))
        .run();
    let HaCall::SetRule(a) = ha_call(&moved_nodes) else {
        panic!("{:?}", moved_nodes.step)
    };
    assert_eq!(a.nodes, ["pve1", "pve3"]);
}

#[test]
fn pve8_creates_the_group_first_and_binds_the_resource_to_it() {
    let first = with_ha(Some(true))
        .observe(|o| o.ha = Some(view(false, None, None)))
        .run();
    assert!(
        matches!(ha_call(&first), HaCall::AddGroup(a) if a.strict && a.nodes == ["pve1", "pve2"])
    );
    let second = with_ha(Some(true))
        .observe(|o| o.ha = Some(view(false, None, Some(&["pve1", "pve2"]))))
        .run();
    let HaCall::AddResource(r) = ha_call(&second) else {
        panic!("{:?}", second.step)
    };
    assert_eq!(r.group.as_deref(), Some("crossplane-vm-100"));
}

#[test]
fn a_changed_state_is_written_and_without_affinity_no_rule_is_made() {
    let plan = with_ha(None)
        .spec(|s| {
            s.ha.as_mut().unwrap().state = HaState::Ignored;
        })
        .observe(|o| o.ha = Some(view(true, Some(("started", None)), None)))
        .run();
    assert!(matches!(ha_call(&plan), HaCall::SetResource(r) if r.state == "ignored"));
    let done = with_ha(None)
        .observe(|o| o.ha = Some(view(true, Some(("started", None)), None)))
        .run();
    assert_eq!(done.step, Step::Idle(Idle::UpToDate), "{:?}", done.step);
}

#[test]
fn a_failed_write_backs_off() {
    let plan = with_ha(None)
        .observe(|o| o.ha = Some(view(true, None, None)))
        .failed(TaskAction::ConfigureHa, 1, 95)
        .run();
    assert_eq!(plan.step, Step::Idle(Idle::Wait));
}

#[test]
fn deleting_removes_the_vm_from_ha_before_stopping_it() {
    let deleting = |v: HaView| with_ha(Some(false)).deleting().observe(|o| o.ha = Some(v));
    let plan = deleting(view(true, Some(("started", None)), Some(&["pve1"]))).run();
    assert_eq!(
        ha_call(&plan),
        &HaCall::RemoveResource {
            sid: "vm:100".into()
        }
    );
    // PVE 9 purged the rule with the resource: on to the shutdown.
    let next = deleting(view(true, None, None)).run();
    assert!(
        matches!(next.step, Step::Pve(PveCall::Shutdown { .. })),
        "{:?}",
        next.step
    );
    // PVE 8 keeps the group: it goes next.
    let group = deleting(view(false, None, Some(&["pve1"]))).run();
    assert_eq!(
        ha_call(&group),
        &HaCall::RemoveGroup {
            id: "crossplane-vm-100".into()
        }
    );
}
