//! Creating: VMID, placement, image download, finalizer, create, clone.

use super::*;
use crate::api::ManagementPolicy::*;

/// VMID recorded, create pending, VM looked up and absent, node chosen,
/// image present, finalizer on, import slot taken: the next step is the
/// create itself.
pub(in super::super) fn ready_to_create() -> World {
    World::new()
        .pending()
        .absent()
        .node("pve1")
        .image(true)
        .finalizer()
        .slot_granted("pve1")
}

fn template(vmid: u32, node: &str) -> Option<TemplateLookup> {
    Some(TemplateLookup::Found {
        vmid,
        node: node.into(),
        template: true,
        pool: None,
        tags: vec![],
    })
}

fn cloning(w: World) -> World {
    w.spec(|s| {
        s.disks.clear();
        s.clone = Some(serde_json::from_value(json!({"templateName": "jammy"})).unwrap());
    })
}

#[test]
fn create_table() {
    let creating = Some((F, Reason::Creating));
    run_table(vec![
        (
            "fresh resource records the VMID the scheduler reserved",
            World::new(),
            expect(
                "RecordExternalName",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "fresh resource without a free VMID waits",
            World::new().observe(|o| {
                o.allocated_vmid = Some(VmidGrant::Unavailable("no free VMID in 100..=101".into()))
            }),
            expect("Wait", (F, Reason::ReconcileError), None),
        ),
        (
            "recorded VMID without pending mark",
            World::new().vmid(100).absent(),
            expect(
                "RecordExternalName",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "never create without having looked",
            World::new().pending().node("pve1").image(true).finalizer(),
            expect("Wait", (F, Reason::ReconcileError), creating),
        ),
        (
            "placement chose a node: record it first",
            World::new().pending().absent().placed("pve2"),
            expect("SaveStatus", (T, Reason::ReconcileSuccess), creating),
        ),
        (
            "no online node among allowedNodes",
            World::new()
                .pending()
                .absent()
                .spec(|s| s.allowed_nodes = vec!["pve3".into()])
                .observe(|o| {
                    o.placement = Some(Placement::NoNode {
                        why: "none of allowedNodes [\"pve3\"] is online".into(),
                        too_small: false,
                    })
                }),
            expect("Wait", (F, Reason::ReconcileError), creating),
        ),
        (
            "image missing: download first, no finalizer yet",
            World::new().pending().absent().node("pve1").image(false),
            expect("DownloadImage", (T, Reason::DownloadingImage), creating),
        ),
        (
            "image present: finalizer before the first create",
            World::new().pending().absent().node("pve1").image(true),
            expect("AddFinalizer", (T, Reason::ReconcileSuccess), creating),
        ),
        (
            "everything ready: create",
            ready_to_create(),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "password Secret missing",
            ready_to_create().password("1").observe(|o| {
                o.password = Some(PasswordState::Missing(
                    "Secret default/web-pw not found".into(),
                ))
            }),
            expect("Wait", (F, Reason::SecretNotFound), creating),
        ),
        (
            "import slots on the node are full",
            ready_to_create().slot_busy("pve1", 60),
            expect("Wait", (T, Reason::WaitingForCapacity), creating),
        ),
        (
            "waiting for a slot for over 10 minutes says it is stalled",
            ready_to_create().slot_busy("pve1", 601),
            expect("Wait", (F, Reason::CapacityStalled), creating),
        ),
        (
            "no slot taken this pass: never dispatch",
            ready_to_create().observe(|o| o.slot = None),
            expect("Wait", (F, Reason::ReconcileError), creating),
        ),
        (
            "create failed 5 s ago: back off",
            ready_to_create().failed(TaskAction::Create, 1, 95),
            expect("Wait", (F, Reason::TaskFailed), creating),
        ),
        (
            "create failed 11 s ago: try again, same VMID",
            ready_to_create().failed(TaskAction::Create, 1, 89),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "failed download backs off the download only",
            World::new()
                .pending()
                .absent()
                .node("pve1")
                .image(false)
                .failed(TaskAction::DownloadImage, 3, 80),
            expect("Wait", (F, Reason::TaskFailed), creating),
        ),
        (
            "VM vanished after it was created: mark a new create pending",
            World::new().created().absent().node("pve1"),
            expect(
                "RecordExternalName",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "observe only, VM absent: report, never create",
            World::new().vmid(100).absent().policies(&[Observe]),
            expect(
                "Wait",
                (F, Reason::ReconcileError),
                Some((F, Reason::Unavailable)),
            ),
        ),
        (
            "observe only, no VMID",
            World::new().policies(&[Observe]),
            expect(
                "Refuse",
                (F, Reason::InvalidSpec),
                Some((F, Reason::Unavailable)),
            ),
        ),
        (
            "clone from a template found by name",
            cloning(World::new().pending().absent().finalizer())
                .observe(|o| o.template = template(9000, "pve2"))
                .slot_granted("pve2"),
            expect("CloneVm", (T, Reason::WaitingForTask), creating),
        ),
        (
            "clone template missing",
            cloning(World::new().pending().absent().finalizer())
                .observe(|o| o.template = Some(TemplateLookup::NotFound)),
            expect("Wait", (F, Reason::TemplateNotFound), creating),
        ),
        (
            "clone template name ambiguous",
            cloning(World::new().pending().absent().finalizer())
                .observe(|o| o.template = Some(TemplateLookup::Ambiguous(vec![9000, 9001]))),
            expect("Wait", (F, Reason::TemplateNotFound), creating),
        ),
        (
            "clone slots full",
            cloning(World::new().pending().absent().finalizer())
                .observe(|o| o.template = template(9000, "pve2"))
                .slot_busy("pve2", 5),
            expect("Wait", (T, Reason::WaitingForCapacity), creating),
        ),
    ]);
}

#[test]
fn placement_is_recorded_before_anything_lands_on_a_node() {
    let plan = World::new().pending().absent().placed("pve2").run();
    assert_eq!(plan.step, Step::Idle(Idle::SaveStatus));
    assert_eq!(plan.status.at_provider.node.as_deref(), Some("pve2"));
}

/// A VM whose create needs nothing looked up on its node (it imports a
/// volume already there) is placed, given its import slot and created in
/// one pass, the placement written with the create's record; waiting for
/// the slot, one write says both.
#[test]
fn a_vm_needing_nothing_on_its_node_is_placed_and_created_in_one_pass() {
    let world = World::new().pending().absent().finalizer().spec(|s| {
        s.disks[0].image = None;
        s.disks[0].import_from = Some("local:import/jammy.qcow2".into());
    });
    let needs = match preflight(&world.vm, world.now) {
        Preflight::Observe(needs) => needs,
        Preflight::Decided(p) => panic!("{:?}", p.step),
    };
    assert!(needs.placement.is_some(), "placed this pass");
    let slot = needs.slot.expect("its slot taken where it is placed");
    assert_eq!((slot.kind, slot.node), (Heavy::Import, None));

    let placed = world.placed("pve2");
    let plan = placed.clone().slot_granted("pve2").run();
    let Step::Pve(PveCall::CreateVm { node, .. }) = &plan.step else {
        panic!("{:?}", plan.step);
    };
    assert_eq!(node, "pve2");
    assert_eq!(plan.status.at_provider.node.as_deref(), Some("pve2"));

    let plan = placed.slot_busy("pve2", 1).run();
    assert_eq!(plan.step, Step::Idle(Idle::Wait));
    assert_eq!(plan.status.at_provider.node.as_deref(), Some("pve2"));
    let synced = crate::api::condition::find(&plan.status.conditions, ConditionType::Synced);
    assert_eq!(
        synced.map(|c| c.reason.as_str()),
        Some(Reason::WaitingForCapacity.as_str())
    );

    // An image to download there: the placement is recorded first.
    let plan = World::new()
        .pending()
        .absent()
        .finalizer()
        .placed("pve2")
        .run();
    assert_eq!(plan.step, Step::Idle(Idle::SaveStatus));
}

#[test]
fn the_create_goes_to_spec_node_whatever_the_status_recorded() {
    // A status written before the fix could hold a node borrowed from a VM
    // that is not ours: `node` wins.
    let plan = ready_to_create()
        .spec(|s| s.node = Some("pve3".into()))
        .slot_granted("pve3")
        .run();
    let Step::Pve(PveCall::CreateVm { node, .. }) = &plan.step else {
        panic!("{:?}", plan.step);
    };
    assert_eq!(node, "pve3");
    assert_eq!(plan.status.at_provider.node.as_deref(), Some("pve3"));
}

#[test]
fn a_recorded_node_outside_allowed_nodes_is_placed_again() {
    let world = World::new()
        .pending()
        .absent()
        .node("pve1")
        .spec(|s| s.allowed_nodes = vec!["pve2".into()]);
    let needs = match preflight(&world.vm, world.now) {
        Preflight::Observe(needs) => needs,
        Preflight::Decided(p) => panic!("{:?}", p.step),
    };
    let request = needs.placement.expect("a placement is needed");
    assert_eq!(request.allowed, ["pve2"]);
    let plan = world.placed("pve2").run();
    assert_eq!(plan.step, Step::Idle(Idle::SaveStatus));
    assert_eq!(plan.status.at_provider.node.as_deref(), Some("pve2"));
}

#[test]
fn clones_stay_on_the_template_node_unless_the_spec_forbids_it() {
    let plan = cloning(World::new().pending().absent().finalizer())
        .observe(|o| o.template = template(9000, "pve2"))
        .slot_granted("pve2")
        .run();
    let Step::Pve(PveCall::CloneVm {
        source_node,
        target_node,
        ..
    }) = &plan.step
    else {
        panic!("{:?}", plan.step);
    };
    assert_eq!((source_node.as_str(), target_node), ("pve2", &None));

    // allowedNodes leaves the template's node out: placement chooses, and
    // the clone goes there as `target`.
    let world = cloning(World::new().pending().absent().finalizer())
        .spec(|s| s.allowed_nodes = vec!["pve3".into()])
        .observe(|o| o.template = template(9000, "pve2"));
    let placed = world.clone().placed("pve3").run();
    assert_eq!(placed.step, Step::Idle(Idle::SaveStatus));
    let plan = world.node("pve3").slot_granted("pve2").run();
    let Step::Pve(PveCall::CloneVm { target_node, .. }) = &plan.step else {
        panic!("{:?}", plan.step);
    };
    assert_eq!(target_node.as_deref(), Some("pve3"));
}

#[test]
fn download_names_a_content_addressed_file() {
    let plan = World::new()
        .pending()
        .absent()
        .node("pve1")
        .image(false)
        .run();
    let Step::Pve(PveCall::DownloadImage {
        node,
        storage,
        url,
        file_name,
        checksum,
        ..
    }) = &plan.step
    else {
        panic!("want DownloadImage, got {:?}", plan.step);
    };
    assert_eq!((node.as_str(), storage.as_str()), ("pve1", "local"));
    assert_eq!(url, "https://images.example/jammy.img");
    assert_eq!(file_name, "jammy-abababababab.qcow2");
    assert_eq!(checksum.len(), 64);
    assert_eq!(
        plan.pending_task.as_ref().unwrap().target.as_deref(),
        Some(image_volume().as_str())
    );
}

#[test]
fn the_create_carries_everything_and_the_owner_marker() {
    let plan = ready_to_create().password("v7").run();
    let Step::Pve(PveCall::CreateVm { node, vmid, params }) = &plan.step else {
        panic!("want CreateVm, got {:?}", plan.step);
    };
    assert_eq!((node.as_str(), *vmid), ("pve1", 100));
    let sent = sent(&params.settings);
    let p = |k: &str| sent.get(k).cloned();
    assert_eq!(
        p("scsi0").as_deref(),
        Some(format!("local-lvm:0,import-from={}", image_volume()).as_str())
    );
    assert_eq!(p("boot").as_deref(), Some("order=scsi0"));
    assert_eq!(p("ide2").as_deref(), Some("local-lvm:cloudinit"));
    assert_eq!(p("memory").as_deref(), Some("2048"));
    assert_eq!(p("cores").as_deref(), Some("2"));
    assert_eq!(p("net0").as_deref(), Some("virtio,bridge=vmbr0"));
    assert_eq!(p("ipconfig0").as_deref(), Some("ip=dhcp"));
    assert_eq!(
        p("sshkeys").as_deref(),
        Some("ssh-ed25519%20AAAAkey%20me%40laptop")
    );
    assert_eq!(p("agent").as_deref(), Some("1"));
    assert_eq!(p("tags").as_deref(), Some("web;prod"));
    assert_eq!(p("scsihw").as_deref(), Some("virtio-scsi-single"));
    assert_eq!(p("cipassword").as_deref(), Some("hunter2"));
    assert_eq!(p("description"), Some(marker_line("default", "web", UID)));
    assert!(!sent.contains_key("vmid"), "vmid is its own field");
    assert_eq!(
        plan.status.at_provider.password_version.as_deref(),
        Some("v7")
    );
}

#[test]
fn a_clone_names_source_target_and_marker() {
    let plan = cloning(World::new().pending().absent().finalizer())
        .spec(|s| s.node = Some("pve1".into()))
        .observe(|o| o.template = template(9000, "pve2"))
        .slot_granted("pve2")
        .run();
    let Step::Pve(PveCall::CloneVm {
        source_node,
        template: source,
        vmid,
        target_node,
        full,
        description,
        name,
        ..
    }) = &plan.step
    else {
        panic!("want CloneVm, got {:?}", plan.step);
    };
    assert_eq!((source_node.as_str(), *source, *vmid), ("pve2", 9000, 100));
    assert_eq!(target_node.as_deref(), Some("pve1"));
    assert!(*full);
    assert_eq!(name, "web");
    assert!(description.contains(UID));
    assert_eq!(
        plan.pending_task.as_ref().unwrap().node,
        "pve2",
        "the clone task runs on the source node"
    );

    let same_node = cloning(World::new().pending().absent().finalizer())
        .observe(|o| o.template = template(9000, "pve2"))
        .slot_granted("pve2")
        .run();
    let Step::Pve(PveCall::CloneVm { target_node, .. }) = &same_node.step else {
        panic!("want CloneVm, got {:?}", same_node.step);
    };
    assert_eq!(*target_node, None);
    assert_eq!(same_node.status.at_provider.node.as_deref(), Some("pve2"));
}

#[test]
fn a_missing_password_secret_waits_for_its_creation_to_wake_it() {
    let plan = ready_to_create()
        .password("1")
        .observe(|o| {
            o.password = Some(PasswordState::Missing(
                "Secret ns/web-pw does not exist".into(),
            ))
        })
        .run();
    let (status, reason, message) = condition(&plan, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "SecretNotFound"));
    assert!(message.contains("ns/web-pw does not exist"), "{message}");
    assert_eq!(
        plan.requeue_after,
        Some(std::time::Duration::from_secs(60)),
        "the resync interval: the Secret's creation wakes it (metadata watch)"
    );
}

/// A VM to be created on pve1 whose disk image is missing there: its
/// download is next.
fn image_missing() -> World {
    World::new().pending().absent().node("pve1").image(false)
}

/// A disk image URL whose host name resolved (on the provider's side) to
/// a refused address: `NotAllowed` as the address would be, no download.
#[test]
fn a_download_whose_name_resolves_to_a_refused_address_is_not_sent() {
    let why = "spec.forProvider.disks[0].image.url names host images.example, which resolves (on the provider's side) to 127.0.0.1";
    let plan = image_missing()
        .observe(|o| {
            o.resolved_refusals
                .insert("https://images.example/jammy.img".into(), why.into());
        })
        .run();
    assert!(
        !matches!(plan.step, Step::Pve(PveCall::DownloadImage { .. })),
        "{:?}",
        plan.step
    );
    let synced = find(&plan.status.conditions, ConditionType::Synced).unwrap();
    assert_eq!(synced.reason, "NotAllowed");
    assert_eq!(synced.message.as_deref(), Some(why));
}

/// Issue 31 for a VM's own `disks[].image` download, as for a
/// ProxmoxImage: a file Proxmox reports larger than the storage's free
/// space is `InsufficientStorage` naming the field and both sizes, with
/// nothing sent and a look again after the resync; one that fits, or whose
/// size is unknown, is downloaded.
#[test]
fn a_disk_image_larger_than_the_free_space_is_not_downloaded() {
    use crate::reconcile::downloads::Room;
    let gib = 1u64 << 30;
    let url = "https://images.example/jammy.img";
    // (row, room, downloaded)
    let rows: Vec<(&str, Option<Room>, bool)> = vec![
        (
            "200 GiB into 100 GiB free",
            Some(Room {
                size: 200 * gib,
                avail: 100 * gib,
            }),
            false,
        ),
        (
            "exactly the free space",
            Some(Room {
                size: gib,
                avail: gib,
            }),
            true,
        ),
        ("a size Proxmox cannot tell", None, true),
    ];
    for (row, room, downloaded) in rows {
        let plan = image_missing()
            .observe(|o| {
                if let Some(room) = room {
                    o.rooms.insert(url.into(), room);
                }
            })
            .run();
        assert_eq!(
            matches!(plan.step, Step::Pve(PveCall::DownloadImage { .. })),
            downloaded,
            "{row}: {:?}",
            plan.step
        );
        if downloaded {
            continue;
        }
        let synced = find(&plan.status.conditions, ConditionType::Synced).unwrap();
        assert_eq!(synced.reason, "InsufficientStorage", "{row}");
        let message = synced.message.clone().unwrap_or_default();
        let room = room.unwrap();
        for part in [
            "spec.forProvider.disks[0].image.url".to_owned(),
            room.size.to_string(),
            room.avail.to_string(),
        ] {
            assert!(message.contains(&part), "{row}: {message}");
        }
        assert_eq!(
            plan.requeue_after,
            Some(std::time::Duration::from_secs(60)),
            "{row}: looked at again after the resync"
        );
    }
}

/// A resource far back in line for a slot looks again by itself less
/// often (a freed slot wakes its next waiter anyway); near the front every
/// 30 s; never later than 5 minutes.
#[test]
fn a_waiter_further_back_in_line_rechecks_less_often() {
    let secs = |s| Some(Duration::from_secs(s));
    let cases = [
        (0, secs(30)),
        (7, secs(30)),
        (8, secs(60)),
        (80, secs(300)),
        (5000, secs(300)),
    ];
    for (ahead, want) in cases {
        let plan = ready_to_create().slot_busy_behind("pve1", 60, ahead).run();
        assert_eq!(plan.requeue_after, want, "{ahead} ahead");
    }
    // The line is measured in rounds of the node's slots (4 here).
    let recheck = super::super::create::capacity_recheck;
    assert_eq!(recheck(15, 4), Duration::from_secs(30));
    assert_eq!(recheck(16, 4), Duration::from_secs(60));
}
