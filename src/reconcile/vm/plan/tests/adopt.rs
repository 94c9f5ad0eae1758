//! Taking over a VM this resource did not create
//! (`proxmox.crossplane.io/adopt`), and `LateInitialize`.

use super::*;
use crate::api::ManagementPolicy::{LateInitialize, Observe};

/// A VM made by hand at VMID 100: the spec's config with notes of its
/// own, or another resource's marker.
fn hand_made(description: &str) -> ObservedVm {
    let mut config = matching_config();
    config
        .current
        .insert("description".into(), description.to_owned());
    ObservedVm {
        config: Some(config),
        ..our_vm(Power::Running)
    }
}

fn observed_as(world: World) -> World {
    world.spec(|s| s.vmid = Some(100)).vmid(100)
}

#[test]
fn an_unmarked_vm_is_taken_over_only_with_the_opt_in() {
    let asked = |w: World| w.annotate(meta::ADOPT, "true");
    let cases = vec![
        (
            "no opt-in: NotOwned, the message names it",
            observed_as(World::new()).finalizer(),
            "NotOwned",
        ),
        (
            "opt-in, no finalizer yet: the finalizer first",
            asked(observed_as(World::new())),
            "AddFinalizer",
        ),
        (
            "opt-in: the marker written",
            asked(observed_as(World::new())).finalizer(),
            "Configure",
        ),
        (
            "opt-in without Update: NotOwned, saying why",
            asked(observed_as(World::new()))
                .finalizer()
                .policies(&[Observe, crate::api::ManagementPolicy::Create]),
            "NotOwned",
        ),
        (
            "opt-in only says \"true\"",
            observed_as(World::new())
                .annotate(meta::ADOPT, "yes")
                .finalizer(),
            "NotOwned",
        ),
    ];
    for (name, world, want) in cases {
        let plan = world.present(hand_made("built by hand")).run();
        let got = match &plan.step {
            Step::Pve(PveCall::Configure { changes, .. }) => {
                let set = sent(&changes.set);
                assert_eq!(
                    set.keys().collect::<Vec<_>>(),
                    ["description"],
                    "{name}: only the marker is written"
                );
                let written = &set["description"];
                assert!(
                    written.starts_with("built by hand\n\n")
                        && written.ends_with(&marker_line("default", "web", UID)),
                    "{name}: {written:?}"
                );
                assert_eq!(changes.digest.as_deref(), Some("d1g3st"), "{name}");
                "Configure".to_owned()
            }
            Step::Kube(KubeWrite::AddFinalizer) => "AddFinalizer".to_owned(),
            Step::Idle(Idle::Wait) => synced_reason(&plan),
            other => format!("{other:?}"),
        };
        assert_eq!(got, want, "{name}: {}", synced_message(&plan));
        if want == "NotOwned" {
            assert!(
                synced_message(&plan).contains(meta::ADOPT),
                "{name}: {}",
                synced_message(&plan)
            );
        }
    }
}

#[test]
fn a_vm_with_another_resources_marker_is_never_taken_over() {
    let theirs = marker_line("other", "db", "their-uid");
    let plan = observed_as(World::new())
        .annotate(meta::ADOPT, "true")
        .finalizer()
        .present(hand_made(&format!("their notes\n\n{theirs}")))
        .run();
    assert_eq!(plan.step, Step::Idle(Idle::Wait));
    assert_eq!(synced_reason(&plan), "NotOwned");
    let message = synced_message(&plan);
    assert!(
        message.contains("ProxmoxVM other/db uid=their-uid"),
        "{message}"
    );
    assert!(message.contains("never takes over"), "{message}");
    assert_eq!(plan.status.at_provider.config, Default::default());
}

#[test]
fn once_marked_it_goes_on_as_after_a_create() {
    // The marker written: ours, the creation recorded, then up to date.
    let plan = observed_as(World::new())
        .annotate(meta::ADOPT, "true")
        .finalizer()
        .present(our_vm(Power::Running))
        .run();
    assert_eq!(plan.step, Step::Kube(KubeWrite::RecordCreateSucceeded));
}

#[test]
fn observing_shows_the_config_in_the_spec_shape() {
    let plan = observed_as(World::new())
        .policies(&[Observe])
        .present(hand_made("built by hand"))
        .run();
    let at = &plan.status.at_provider.config;
    assert_eq!(at.name.as_deref(), Some("web"));
    assert_eq!(at.memory.as_deref(), Some("2Gi"));
    assert_eq!(at.description.as_deref(), Some("built by hand"));
    assert_eq!(at.disks.len(), 1);
    assert_eq!(plan.step, Step::Idle(Idle::UpToDate));
}

#[test]
fn late_initialize_fills_unset_fields_once_and_only_when_named() {
    let empty = |w: World| w.spec(|s| *s = serde_json::from_value(json!({"vmid": 100})).unwrap());
    let named = empty(observed_as(World::new()))
        .policies(&[Observe, LateInitialize])
        .present(hand_made("built by hand"))
        .run();
    let Step::Kube(KubeWrite::LateInitialize(fields)) = &named.step else {
        panic!("{:?}", named.step);
    };
    assert_eq!(fields["name"], "web");
    assert_eq!(fields["description"], "built by hand");
    assert_eq!(fields["disks"][0]["size"], "20Gi");
    assert!(fields.get("memory").is_none(), "a schema default is set");

    let not_named = empty(observed_as(World::new()))
        .policies(&[Observe])
        .present(hand_made("built by hand"))
        .run();
    assert_eq!(not_named.step, Step::Idle(Idle::UpToDate));

    // Filled in: nothing more to fill, the VM is observed.
    let filled = observed_as(World::new())
        .spec(|s| {
            s.name = Some("web".into());
            s.description = Some("built by hand".into());
            s.scsi_controller = Some(crate::api::vm::ScsiController::VirtioScsiSingle);
        })
        .policies(&[Observe, LateInitialize])
        .present(hand_made("built by hand"))
        .run();
    assert!(
        !matches!(filled.step, Step::Kube(KubeWrite::LateInitialize(_))),
        "{:?}",
        filled.step
    );
}

fn synced_reason(plan: &Plan) -> String {
    condition(plan, ConditionType::Synced)
        .map(|c| c.1)
        .unwrap_or_default()
}
