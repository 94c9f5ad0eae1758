//! Many teams in one cluster: what a spec may not reach (another resource's
//! owner marker, VMs that are not templates and their disks, host paths),
//! refused before anything is sent to Proxmox.

use super::*;
use crate::api::provider_config::CloneSources;
use serde_json::Value;

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

/// A resource about to clone VM 777, found as `template` says.
fn cloning_777(template: bool) -> World {
    World::new()
        .pending()
        .absent()
        .finalizer()
        .slot_granted("pve1")
        .spec(|s| {
            s.disks.clear();
            s.clone = Some(serde_json::from_value(json!({"templateVmid": 777})).unwrap());
        })
        .observe(move |o| {
            o.template = Some(TemplateLookup::Found {
                vmid: 777,
                node: "pve1".into(),
                template,
                pool: None,
                tags: vec![],
            })
        })
}

/// A resource whose disk imports `volume`.
fn importing(volume: &str) -> World {
    let volume = volume.to_owned();
    World::new().spec(move |s| {
        s.disks[0].image = None;
        s.disks[0].import_from = Some(volume);
    })
}

/// VM 777 as the cluster view shows it: a template or not, in `pool`,
/// with `tags`.
fn vm_777(template: bool, pool: Option<&str>, tags: &[&str]) -> TemplateLookup {
    TemplateLookup::Found {
        vmid: 777,
        node: "pve1".into(),
        template,
        pool: pool.map(str::to_owned),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
    }
}

/// A resource ready to create whose disk imports `volume`, a disk of VM
/// 777 found as `source` says.
fn importing_777(volume: &str, source: TemplateLookup) -> World {
    let volume = volume.to_owned();
    super::create::ready_to_create()
        .spec(move |s| {
            s.disks[0].image = None;
            s.disks[0].import_from = Some(volume);
        })
        .observe(move |o| {
            o.import_sources = [(777, source)].into();
        })
}

/// The provider config's `clonePolicy.allowNonTemplates` (JSON).
fn policy(allowed: Value) -> ProviderState {
    ProviderState::Ready {
        timing: Default::default(),
        limits: Default::default(),
        clones: Some(serde_json::from_value::<CloneSources>(allowed).unwrap()),
        downloads: None,
        endpoint_host: String::new(),
    }
}

#[test]
fn clone_and_import_sources() {
    let creating = Some((F, Reason::Creating));
    run_table(vec![
        (
            "a full clone of a VM that is not a template: nothing is cloned",
            cloning_777(false),
            expect("Wait", (F, Reason::NotATemplate), None),
        ),
        (
            "... once it is a template: cloned",
            cloning_777(true),
            expect("CloneVm", (T, Reason::WaitingForTask), None),
        ),
        (
            "importing the disk of a VM that is not a template: nothing is imported",
            importing_777("local-lvm:vm-777-disk-0", vm_777(false, None, &[])),
            expect("Wait", (F, Reason::NotATemplate), creating),
        ),
        (
            "... also on a directory storage",
            importing_777("local:777/vm-777-disk-0.qcow2", vm_777(false, None, &[])),
            expect("Wait", (F, Reason::NotATemplate), creating),
        ),
        (
            "... and of a linked clone",
            importing_777(
                "zfs:base-9000-disk-0/vm-777-disk-0",
                vm_777(false, None, &[]),
            ),
            expect("Wait", (F, Reason::NotATemplate), creating),
        ),
        (
            "... or of a VM that does not exist (a disk left behind)",
            importing_777("local-lvm:vm-777-disk-0", TemplateLookup::NotFound),
            expect("Wait", (F, Reason::NotATemplate), creating),
        ),
        (
            "... or of a VM not looked up",
            importing_777("local-lvm:vm-777-disk-0", TemplateLookup::NotFound)
                .observe(|o| o.import_sources.clear()),
            expect("Wait", (F, Reason::NotATemplate), creating),
        ),
        (
            "a template's disk is imported, as it would be cloned",
            importing_777("local-lvm:vm-777-disk-0", vm_777(true, None, &[])),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "a volume path with .. is refused before Proxmox",
            importing("local:import/../../777/vm-777-disk-0.qcow2"),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "a template's base volume can be imported",
            importing("local-lvm:base-9000-disk-0"),
            expect(
                "RecordExternalName",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "an import volume can be imported",
            importing("local:import/jammy.qcow2"),
            expect(
                "RecordExternalName",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
    ]);
    let message =
        synced_message(&importing_777("local-lvm:vm-777-disk-0", vm_777(false, None, &[])).run());
    assert!(
        message.contains("spec.forProvider.disks[0].importFrom")
            && message.contains("a disk of VM 777: VM 777 is not a template")
            && message.contains("clonePolicy.allowNonTemplates")
            && message.ends_with("nothing is imported until it is one"),
        "{message}"
    );
    let message = synced_message(&cloning_777(false).run());
    assert!(message.contains("VM 777 is not a template"), "{message}");
}

/// A resource with a serial port on `device`.
fn serial(device: &str) -> World {
    let port = json!([{"slot": "serial0", "device": device}]);
    World::new().spec(move |s| s.hardware.serial_ports = serde_json::from_value(port).unwrap())
}

#[test]
fn serial_devices_are_device_names() {
    let creating = Some((F, Reason::Creating));
    run_table(vec![
        (
            "a path leaving /dev is refused",
            serial("/dev/../etc/shadow"),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "... as is an empty part",
            serial("/dev//ttyS0"),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "a device by id is fine",
            serial("/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A1-if00-port0"),
            expect(
                "RecordExternalName",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
        (
            "a socket is fine",
            serial("socket"),
            expect(
                "RecordExternalName",
                (T, Reason::ReconcileSuccess),
                creating,
            ),
        ),
    ]);
    let message = synced_message(&serial("/dev/../etc/shadow").run());
    assert!(
        message.contains("spec.forProvider.serialPorts[0].device \"/dev/../etc/shadow\""),
        "{message}"
    );
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

#[test]
fn a_connection_secret_not_ours_is_said_on_synced_and_nothing_else_changes() {
    let why = "the connection Secret db-conn (writeConnectionSecretToRef) belongs to ProxmoxVM db (uid u-2)";
    let world = World::new().created().present(our_vm(Power::Running));
    let planned = world.run();
    let mut plan = planned.clone();
    connection_refused(&mut plan, &world.vm, world.now, why);
    assert_eq!(plan.step, planned.step, "the VM's step is unchanged");
    assert_eq!(plan.requeue_after, planned.requeue_after);
    let (status, reason, message) = condition(&plan, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "ConnectionSecretConflict"));
    assert!(message.contains(why), "{message}");
    assert_eq!(
        condition(&plan, ConditionType::Ready),
        condition(&planned, ConditionType::Ready),
        "Ready is the VM's"
    );

    // A VM problem stays first; the Secret is added to its message.
    let failing = World::new()
        .created()
        .spec(|s| s.description = Some(forged_notes()));
    let mut plan = failing.run();
    connection_refused(&mut plan, &failing.vm, failing.now, why);
    let (status, reason, message) = condition(&plan, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "InvalidSpec"));
    assert!(message.ends_with(&format!("; also: {why}")), "{message}");
}

/// What the API server says when RBAC refuses a read.
const REFUSED: &str = r#"configmaps "web-net" is forbidden: User "system:serviceaccount:crossplane-system:crossplane-provider-proxmox" cannot get resource "configmaps" in API group "" in the namespace "default""#;

#[test]
fn a_refused_kubernetes_request_is_a_condition_table() {
    let wait = |ready| expect("Wait", (F, Reason::Forbidden), ready);
    run_table(vec![
        (
            "a new resource whose config may not be read waits, Forbidden",
            World::new().forbidden(REFUSED),
            wait(None),
        ),
        (
            "... before its VMID is recorded",
            World::new().vmid(100).forbidden(REFUSED),
            wait(None),
        ),
        (
            "... and nothing is created meanwhile",
            World::new()
                .pending()
                .absent()
                .finalizer()
                .placed("pve1")
                .image(true)
                .forbidden(REFUSED),
            wait(None),
        ),
        (
            "an existing VM keeps its Ready",
            World::new()
                .created()
                .present(our_vm(Power::Running))
                .forbidden(REFUSED),
            wait(None),
        ),
        (
            "... and is not deleted from a partial view",
            World::new()
                .created()
                .deleting()
                .present(our_vm(Power::Running))
                .forbidden(REFUSED),
            wait(None),
        ),
        (
            "a pause still wins",
            World::new()
                .annotate("crossplane.io/paused", "true")
                .forbidden(REFUSED),
            expect("Paused", (F, Reason::ReconcilePaused), None),
        ),
    ]);
}

#[test]
fn the_forbidden_condition_names_the_request_and_says_what_to_do() {
    let plan = World::new()
        .created()
        .present(our_vm(Power::Running))
        .forbidden(REFUSED)
        .run();
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(4)));
    let message = synced_message(&plan);
    assert!(
        message.contains(REFUSED),
        "the API server's words: {message}"
    );
    assert!(
        message.contains("grant it in the provider's RBAC"),
        "{message}"
    );
    assert!(message.ends_with("retrying in 4s"), "{message}");
    assert_eq!(
        condition(&plan, ConditionType::Ready),
        None,
        "Ready is kept"
    );
}

#[test]
fn a_refused_connection_secret_write_is_forbidden_and_retried() {
    let world = World::new().created().present(our_vm(Power::Running));
    let planned = world.run();
    let mut plan = planned.clone();
    let refused = Forbidden {
        message: r#"secrets "web-conn" is forbidden: User "x" cannot create resource "secrets""#
            .into(),
        retry_in: std::time::Duration::from_secs(8),
    };
    write_refused(&mut plan, &world.vm, world.now, &refused);
    assert_eq!(plan.step, planned.step, "the VM's step is unchanged");
    let (status, reason, message) = condition(&plan, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "Forbidden"));
    assert!(
        message.contains("cannot create resource \"secrets\""),
        "{message}"
    );
    assert_eq!(
        condition(&plan, ConditionType::Ready),
        condition(&planned, ConditionType::Ready),
        "Ready is the VM's"
    );
    assert!(
        plan.requeue_after
            .is_some_and(|r| r <= std::time::Duration::from_secs(8)),
        "looked at again: {:?}",
        plan.requeue_after
    );
    // A VM problem already said is kept in the message.
    let failing = World::new()
        .created()
        .spec(|s| s.description = Some(forged_notes()));
    let mut plan = failing.run();
    write_refused(&mut plan, &failing.vm, failing.now, &refused);
    let message = synced_message(&plan);
    assert!(message.contains("; also: refused: "), "{message}");
}

/// The resource's own metadata write refused by RBAC (its finalizer, its
/// VMID): `Forbidden` as a refused read is, not a `ReconcileError`, and
/// tried again after the backoff.
#[test]
fn a_refused_metadata_write_is_forbidden_and_retried() {
    for world in [
        World::new().spec(|s| s.vmid = Some(100)),
        World::new().pending().absent().node("pve1").image(true),
    ] {
        let planned = world.run();
        let Step::Kube(write) = &planned.step else {
            panic!("a metadata write: {:?}", planned.step);
        };
        let refused = Forbidden {
            message: format!(
                r#"patching ProxmoxVM default/web to {}: proxmoxvms.proxmox.m.crossplane.io "web" is forbidden: User "x" cannot patch resource "proxmoxvms""#,
                write.describe()
            ),
            retry_in: std::time::Duration::from_secs(8),
        };
        let plan = settle(
            &world.input(),
            planned.clone(),
            Err(ActFailure::Forbidden(refused)),
        );
        let (status, reason, message) = condition(&plan, ConditionType::Synced).unwrap();
        assert_eq!((status, reason.as_str()), (F, "Forbidden"), "{message}");
        assert!(
            message.contains(r#"cannot patch resource "proxmoxvms""#)
                && message.contains(write.describe())
                && message.contains("grant it in the provider's RBAC"),
            "{message}"
        );
        assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(8)));
        assert_eq!(
            condition(&plan, ConditionType::Ready),
            condition(&planned, ConditionType::Ready),
            "Ready as planned"
        );
    }
}

/// VM 777 (not a template) in `pool` with `tags`, cloned (`full`) under a
/// provider config whose clonePolicy allows `allowed` (JSON).
fn cloning_777_under(pool: Option<&str>, tags: &[&str], full: bool, allowed: Value) -> World {
    let pool = pool.map(str::to_owned);
    let tags: Vec<String> = tags.iter().map(|t| (*t).to_owned()).collect();
    let allowed: CloneSources = serde_json::from_value(allowed).unwrap();
    cloning_777(false)
        .spec(move |s| {
            s.clone =
                Some(serde_json::from_value(json!({"templateVmid": 777, "full": full})).unwrap());
        })
        .observe(move |o| {
            o.template = Some(TemplateLookup::Found {
                vmid: 777,
                node: "pve1".into(),
                template: false,
                pool,
                tags,
            })
        })
        .with_provider(ProviderState::Ready {
            timing: Default::default(),
            limits: Default::default(),
            clones: Some(allowed),
            downloads: None,
            endpoint_host: String::new(),
        })
}

#[test]
fn clone_policy_table() {
    let cloned = || expect("CloneVm", (T, Reason::WaitingForTask), None);
    let refused = || expect("Wait", (F, Reason::NotATemplate), None);
    let golden = || json!({"pools": ["golden"], "tags": ["clone-ok"], "vmidRanges": [{"min": 700, "max": 799}]});
    run_table(vec![
        (
            "a VM in an allowed pool is cloned",
            cloning_777_under(Some("golden"), &[], true, json!({"pools": ["golden"]})),
            cloned(),
        ),
        (
            "... one in another pool is not",
            cloning_777_under(Some("team-b"), &[], true, json!({"pools": ["golden"]})),
            refused(),
        ),
        (
            "... nor one in no pool",
            cloning_777_under(None, &[], true, json!({"pools": ["golden"]})),
            refused(),
        ),
        (
            "a VM with an allowed tag is cloned (tags regardless of case)",
            cloning_777_under(
                None,
                &["db", "Clone-OK"],
                true,
                json!({"tags": ["clone-ok"]}),
            ),
            cloned(),
        ),
        (
            "... one with other tags is not",
            cloning_777_under(None, &["db"], true, json!({"tags": ["clone-ok"]})),
            refused(),
        ),
        (
            "a VMID in an allowed range is cloned",
            cloning_777_under(
                None,
                &[],
                true,
                json!({"vmidRanges": [{"min": 700, "max": 799}]}),
            ),
            cloned(),
        ),
        (
            "... one outside it is not",
            cloning_777_under(
                None,
                &[],
                true,
                json!({"vmidRanges": [{"min": 9000, "max": 9099}]}),
            ),
            refused(),
        ),
        (
            "any one match is enough",
            cloning_777_under(Some("team-b"), &["db"], true, golden()),
            cloned(),
        ),
        (
            "an empty policy allows nothing beyond templates",
            cloning_777_under(Some("golden"), &["clone-ok"], true, json!({})),
            refused(),
        ),
        (
            "a linked clone needs a template, whatever the policy",
            cloning_777_under(Some("golden"), &[], false, golden()),
            refused(),
        ),
    ]);
    let linked = cloning_777_under(Some("golden"), &[], false, golden()).run();
    assert!(
        synced_message(&linked).contains("a linked clone (full: false) needs a template"),
        "{}",
        synced_message(&linked)
    );
    // The same rule, for the disks of VM 777 a disk imports.
    let imports = |source: TemplateLookup, allowed: Value| {
        importing_777("local-lvm:vm-777-disk-0", source).with_provider(policy(allowed))
    };
    let imported = || {
        expect(
            "CreateVm",
            (T, Reason::ImportingDisk),
            Some((F, Reason::Creating)),
        )
    };
    run_table(vec![
        (
            "the disk of a VM in an allowed pool is imported",
            imports(
                vm_777(false, Some("golden"), &[]),
                json!({"pools": ["golden"]}),
            ),
            imported(),
        ),
        (
            "... of one with an allowed tag too",
            imports(vm_777(false, None, &["Clone-OK"]), golden()),
            imported(),
        ),
        (
            "... not of one outside the policy",
            imports(
                vm_777(false, Some("team-b"), &["db"]),
                json!({"pools": ["golden"]}),
            ),
            refused(),
        ),
        (
            "... nor under an empty policy",
            imports(vm_777(false, Some("golden"), &[]), json!({})),
            refused(),
        ),
        (
            "a VM that does not exist only by its VMID range",
            imports(
                TemplateLookup::NotFound,
                json!({"vmidRanges": [{"min": 777, "max": 777}]}),
            ),
            imported(),
        ),
        (
            "... not by a pool (it has none)",
            imports(TemplateLookup::NotFound, json!({"pools": ["golden"]})),
            refused(),
        ),
    ]);
    let outside = imports(
        vm_777(false, Some("team-b"), &[]),
        json!({"pools": ["golden"]}),
    )
    .run();
    assert!(
        synced_message(&outside).contains("nothing is imported"),
        "{}",
        synced_message(&outside)
    );
    let other = cloning_777_under(Some("team-b"), &[], true, json!({"pools": ["golden"]})).run();
    assert!(
        synced_message(&other).contains("clonePolicy.allowNonTemplates"),
        "says what would allow it: {}",
        synced_message(&other)
    );
}

/// A disk added to an existing VM imports another VM's disk only as a
/// create would (the same rule).
#[test]
fn a_disk_added_later_imports_another_vms_disk_only_as_it_could_be_cloned() {
    let adding = |source: TemplateLookup, provider: ProviderState| {
        World::new()
            .created()
            .present(our_vm(Power::Running))
            .spec(|s| {
                s.disks.push(
                    serde_json::from_value(json!({
                        "slot": "scsi1", "storage": "local-lvm",
                        "importFrom": "local-lvm:vm-777-disk-0",
                    }))
                    .unwrap(),
                );
            })
            .observe(move |o| o.import_sources = [(777, source)].into())
            .with_provider(provider)
    };
    let refused = adding(
        vm_777(false, Some("team-b"), &[]),
        policy(json!({"pools": ["golden"]})),
    )
    .run();
    let (status, reason, message) = condition(&refused, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "NotATemplate"), "{message}");
    assert!(
        message.contains("spec.forProvider.disks[1].importFrom") && message.contains("VM 777"),
        "{message}"
    );
    assert!(
        refused.step.pve().is_none(),
        "nothing sent: {:?}",
        refused.step
    );
    let allowed = adding(
        vm_777(false, Some("golden"), &[]),
        policy(json!({"pools": ["golden"]})),
    )
    .run();
    assert_eq!(
        allowed.step.name(),
        "Configure",
        "{:?}",
        condition(&allowed, ConditionType::Synced)
    );
}
