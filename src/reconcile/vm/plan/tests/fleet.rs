//! Clones of an image's template (`clone.image`): what they wait for, the
//! node they are placed on, linked or full.

use super::*;

/// A VM cloning image `noble` (`full` as given), its VMID recorded, absent
/// on Proxmox, finalized, with the clone slot on pve2.
fn cloning(full: bool) -> World {
    World::new()
        .pending()
        .absent()
        .finalizer()
        .slot_granted("pve2")
        .spec(move |s| {
            s.disks.clear();
            s.clone =
                Some(serde_json::from_value(json!({"image": "noble", "full": full})).unwrap());
        })
}

fn template(node: &str, vmid: Option<u32>, ready: bool, linkable: bool) -> ImageTemplate {
    ImageTemplate {
        node: node.into(),
        vmid,
        ready,
        linkable,
    }
}

/// The image's templates: pve1 not ready yet, pve2 ready (VMID 9002).
fn templates(linkable: bool) -> ImageLookup {
    ImageLookup::Templates(vec![
        template("pve1", None, false, linkable),
        template("pve2", Some(9002), true, linkable),
    ])
}

/// The template on pve2, as the cluster view shows it.
fn found_on_pve2(w: World) -> World {
    w.observe(|o| {
        o.template = Some(TemplateLookup::Found {
            vmid: 9002,
            node: "pve2".into(),
            template: true,
            pool: None,
            tags: vec![],
        })
    })
}

fn clone_call(plan: &Plan) -> (u32, bool, Option<String>) {
    match &plan.step {
        Step::Pve(PveCall::CloneVm {
            template,
            full,
            target_node,
            ..
        }) => (*template, *full, target_node.clone()),
        other => panic!("not a clone: {other:?}"),
    }
}

#[test]
fn a_clone_of_an_image_waits_for_the_image_and_its_template() {
    let with = |image: ImageLookup| cloning(false).observe(move |o| o.image = Some(image));
    run_table(vec![
        (
            "no such image",
            with(ImageLookup::NotFound),
            expect("Wait", (F, Reason::ImageNotFound), None),
        ),
        (
            "an image without template",
            with(ImageLookup::NoTemplate),
            expect("Wait", (F, Reason::ImageHasNoTemplate), None),
        ),
        (
            "an image being deleted",
            with(ImageLookup::Deleting),
            expect("Wait", (T, Reason::ImageNotReady), None),
        ),
        (
            "no template anywhere yet",
            with(ImageLookup::Templates(vec![])),
            expect("Wait", (T, Reason::ImageNotReady), None),
        ),
        (
            "templates coming, none ready",
            with(ImageLookup::Templates(vec![template(
                "pve1", None, false, true,
            )])),
            expect("Wait", (T, Reason::TemplateNotReady), None),
        ),
        (
            "node pve1 asked: its template is not ready, pve2's does not help",
            with(templates(true)).spec(|s| s.node = Some("pve1".into())),
            expect("Wait", (T, Reason::TemplateNotReady), None),
        ),
        (
            "node pve3 asked: the image has no template there",
            with(templates(true)).spec(|s| s.node = Some("pve3".into())),
            expect("Wait", (T, Reason::ImageNotReady), None),
        ),
        (
            "only pve1 allowed, where it is not ready",
            with(templates(true)).spec(|s| s.allowed_nodes = vec!["pve1".into()]),
            expect("Wait", (T, Reason::TemplateNotReady), None),
        ),
    ]);
    // Woken by the image's status; the resync is only the fallback.
    let plan = with(ImageLookup::NotFound).run();
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(60)));
    assert!(
        synced_message(&plan).contains("ProxmoxImage default/noble does not exist"),
        "{}",
        synced_message(&plan)
    );
}

#[test]
fn a_clone_of_an_image_is_placed_where_its_template_is_ready_then_cloned_there() {
    let world = cloning(false).observe(|o| o.image = Some(templates(true)));
    // Placement (limited to pve2 by the reservation) chose pve2: recorded.
    let placing = world.clone().placed("pve2").run();
    assert_eq!(placing.step.name(), "SaveStatus");
    assert_eq!(placing.status.at_provider.node.as_deref(), Some("pve2"));
    // Placed: the template there is cloned, linked, on its own node.
    let cloned = found_on_pve2(world.node("pve2")).run();
    assert_eq!(clone_call(&cloned), (9002, false, None));
}

#[test]
fn a_clone_of_an_image_is_linked_only_when_asked_and_its_template_can_be() {
    let case = |full: bool, linkable: bool| {
        let plan = found_on_pve2(
            cloning(full)
                .spec(|s| s.node = Some("pve2".into()))
                .observe(move |o| o.image = Some(templates(linkable))),
        )
        .run();
        clone_call(&plan).1
    };
    assert!(!case(false, true), "linked: asked and possible");
    assert!(case(false, false), "full: the storage cannot snapshot");
    assert!(case(true, true), "full: asked");
    assert!(case(true, false), "full: asked and the only way");
}

#[test]
fn a_clone_of_an_image_checks_its_template_like_a_template_vmid() {
    // The image says ready, Proxmox does not show a template (yet): the
    // clone waits as for any VM that is not a template.
    let plan = cloning(false)
        .spec(|s| s.node = Some("pve2".into()))
        .observe(|o| {
            o.image = Some(templates(true));
            o.template = Some(TemplateLookup::Found {
                vmid: 9002,
                node: "pve2".into(),
                template: false,
                pool: None,
                tags: vec![],
            });
        })
        .run();
    assert_eq!(plan.step.name(), "Wait");
    assert_eq!(
        condition(&plan, ConditionType::Synced).unwrap().1,
        "NotATemplate"
    );
}
