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
            "importing another VM's disk is refused",
            importing("local-lvm:vm-777-disk-0"),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "... also on a directory storage",
            importing("local:777/vm-777-disk-0.qcow2"),
            expect("Refuse", (F, Reason::InvalidSpec), None),
        ),
        (
            "... and a volume path with ..",
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
    let message = synced_message(&importing("local-lvm:vm-777-disk-0").run());
    assert!(
        message.contains("spec.forProvider.disks[0].importFrom")
            && message.contains("a disk of VM 777"),
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
                r#"patching ProxmoxVM default/web to {}: proxmoxvms.proxmox.crossplane.io "web" is forbidden: User "x" cannot patch resource "proxmoxvms""#,
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
    let other = cloning_777_under(Some("team-b"), &[], true, json!({"pools": ["golden"]})).run();
    assert!(
        synced_message(&other).contains("clonePolicy.allowNonTemplates"),
        "says what would allow it: {}",
        synced_message(&other)
    );
}
