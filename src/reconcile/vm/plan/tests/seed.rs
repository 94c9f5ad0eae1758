//! `customCloudInit`: the seed ISO is uploaded, attached, replaced when its
//! data changes (the old one deleted once unused) and deleted with the VM.

use super::*;
use crate::api::vm::{CloudInitSource, CustomCloudInit};
use crate::reconcile::vm::nocloud::SeedFiles;
use crate::reconcile::vm::plan::SeedView;

const SECRET: &[u8] = b"#cloud-config\npassword: hunter2\n";

fn files(user_data: &[u8]) -> SeedFiles {
    let mut f = SeedFiles::default();
    f.insert("user-data", user_data.to_vec());
    f
}

/// The volume of the seed holding `user_data` for VM 100 named `web`.
fn volume(user_data: &[u8]) -> String {
    let digest = files(user_data).with_default_meta_data("web").digest();
    format!("local:iso/crossplane-ci-100-{}.iso", &digest[..16])
}

fn seeded(power: Power, user_data: &[u8], volumes: &[String]) -> World {
    let view = SeedView {
        node: "pve1".into(),
        data: Ok(files(user_data)),
        volumes: volumes.to_vec(),
        pid: (power == Power::Running).then_some(42),
        shared: false,
    };
    with_custom_cloud_init(World::new().created())
        .present(our_vm(power))
        .observe(|o| o.seed = Some(view))
}

/// `world` with `customCloudInit` user-data from Secret `seed`.
fn with_custom_cloud_init(world: World) -> World {
    world.spec(|s| {
        s.cloud_init = None;
        s.custom_cloud_init = Some(CustomCloudInit {
            user_data: Some(
                serde_json::from_value(
                    serde_json::json!({"secretKeyRef": {"name": "seed", "key": "user-data"}}),
                )
                .unwrap(),
            ),
            meta_data: None::<CloudInitSource>,
            network_config: None,
            vendor_data: None,
            storage: "local".into(),
            drive_slot: "ide3".into(),
        });
    })
}

fn attached(mut vm: ObservedVm, volume: &str) -> ObservedVm {
    let config = vm.config.as_mut().unwrap();
    config
        .current
        .insert("ide3".into(), format!("{volume},media=cdrom"));
    vm
}

#[test]
fn the_seed_is_uploaded_then_attached_before_the_first_start() {
    let upload = seeded(Power::Stopped, SECRET, &[]).run();
    let Step::Pve(PveCall::UploadSeed {
        node,
        storage,
        filename,
        files,
    }) = &upload.step
    else {
        panic!("{:?}", upload.step)
    };
    assert_eq!((node.as_str(), storage.as_str()), ("pve1", "local"));
    assert_eq!(format!("local:iso/{filename}"), volume(SECRET));
    assert!(files.has("meta-data"), "a default meta-data");
    let shown = format!("{:?} {:?}", upload.step, upload.status);
    assert!(
        !shown.contains("hunter2"),
        "the data is never shown: {shown}"
    );
    assert!(upload.pending_task.is_some(), "the upload is a task");

    let attach = seeded(Power::Stopped, SECRET, &[volume(SECRET)]).run();
    let Step::Pve(PveCall::Configure { changes, .. }) = &attach.step else {
        panic!("{:?}", attach.step)
    };
    assert_eq!(
        sent(&changes.set).get("ide3"),
        Some(&format!("{},media=cdrom", volume(SECRET)))
    );

    let start = seeded(Power::Stopped, SECRET, &[volume(SECRET)])
        .present(attached(our_vm(Power::Stopped), &volume(SECRET)))
        .run();
    assert!(
        matches!(start.step, Step::Pve(PveCall::Start { .. })),
        "{:?}",
        start.step
    );
}

#[test]
fn changed_data_is_a_new_iso_and_the_old_one_goes_once_unused() {
    let old = volume(SECRET);
    let new = volume(b"#cloud-config\n");
    assert_ne!(old, new);
    let running = attached(our_vm(Power::Running), &old);
    let upload = seeded(
        Power::Running,
        b"#cloud-config\n",
        std::slice::from_ref(&old),
    )
    .present(running.clone())
    .run();
    assert!(
        matches!(&upload.step, Step::Pve(PveCall::UploadSeed { filename, .. }) if new.ends_with(filename.as_str())),
        "{:?}",
        upload.step
    );
    // A CD-ROM's medium is swapped live; the running QEMU process is
    // recorded, since the guest reads the seed at boot.
    let swap = seeded(
        Power::Running,
        b"#cloud-config\n",
        &[old.clone(), new.clone()],
    )
    .present(running.clone())
    .run();
    assert!(
        matches!(&swap.step, Step::Pve(PveCall::Configure { .. })),
        "{:?}",
        swap.step
    );
    assert_eq!(swap.status.at_provider.seed_changed_under_pid, Some(42));
    assert_eq!(swap.status.at_provider.pending_changes, ["customCloudInit"]);
    // Attached but pending (a new IDE drive waits for the next start): the
    // old ISO is still in use.
    let mut pending = running.clone();
    pending
        .config
        .as_mut()
        .unwrap()
        .pending
        .insert("ide3".into(), Some(format!("{new},media=cdrom")));
    let waiting = seeded(
        Power::Running,
        b"#cloud-config\n",
        &[old.clone(), new.clone()],
    )
    .present(pending)
    .run();
    assert_eq!(
        waiting.step,
        Step::Idle(Idle::UpToDate),
        "{:?}",
        waiting.step
    );
    assert_eq!(waiting.status.at_provider.pending_changes, ["ide3"]);
    // Swapped under QEMU process 42: pending while it runs.
    let swapped = |pid: u64| {
        seeded(
            Power::Running,
            b"#cloud-config\n",
            std::slice::from_ref(&new),
        )
        .present(attached(our_vm(Power::Running), &new))
        .status(|s| s.at_provider.seed_changed_under_pid = Some(pid))
        .run()
    };
    let same = swapped(42);
    assert_eq!(same.step, Step::Idle(Idle::UpToDate), "{:?}", same.step);
    assert_eq!(same.status.at_provider.pending_changes, ["customCloudInit"]);
    let mut locked = attached(our_vm(Power::Running), &new);
    locked.lock = Some("backup".into());
    let waiting_out_a_backup = seeded(
        Power::Running,
        b"#cloud-config\n",
        std::slice::from_ref(&old),
    )
    .present(locked)
    .status(|s| s.at_provider.seed_changed_under_pid = Some(42))
    .run();
    assert_eq!(
        waiting_out_a_backup.status.at_provider.pending_changes,
        ["customCloudInit"],
        "still listed while the pass waits"
    );
    let restarted = swapped(41);
    assert!(restarted.status.at_provider.pending_changes.is_empty());
    assert_eq!(restarted.status.at_provider.seed_changed_under_pid, None);
    // The old ISO, no longer used, is deleted.
    let cleanup = seeded(
        Power::Running,
        b"#cloud-config\n",
        &[old.clone(), new.clone()],
    )
    .present(attached(our_vm(Power::Running), &new))
    .run();
    assert_eq!(
        cleanup.step,
        Step::Pve(PveCall::DeleteVolume {
            node: "pve1".into(),
            storage: "local".into(),
            volume: old,
        })
    );
}

#[test]
fn missing_data_is_reported_and_the_vm_not_started_without_it() {
    let plan = seeded(Power::Stopped, SECRET, &[])
        .observe(|o| {
            o.seed.as_mut().unwrap().data =
                Err("user-data: Secret default/seed does not exist".into())
        })
        .run();
    assert_eq!(plan.step, Step::Idle(Idle::UpToDate), "{:?}", plan.step);
    let message = synced_message(&plan);
    assert!(
        message.contains("customCloudInit user-data: Secret default/seed does not exist"),
        "{message}"
    );
    let (status, reason, _) = condition(&plan, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "SecretNotFound"));
}

#[test]
fn the_isos_go_with_the_vm() {
    let left = seeded(Power::Stopped, SECRET, &[volume(SECRET)])
        .deleting()
        .absent()
        .run();
    assert_eq!(
        left.step,
        Step::Pve(PveCall::DeleteVolume {
            node: "pve1".into(),
            storage: "local".into(),
            volume: volume(SECRET),
        })
    );
    let done = seeded(Power::Stopped, SECRET, &[])
        .deleting()
        .absent()
        .run();
    assert_eq!(done.step, Step::Kube(KubeWrite::RemoveFinalizer));
}

/// The seed attached on `local` (not shared), the spec moved to pve2.
fn attached_and_moved(shared: bool) -> World {
    let mut vm = our_vm(Power::Running);
    vm.config
        .as_mut()
        .unwrap()
        .current
        .insert("ide3".into(), format!("{},media=cdrom", volume(SECRET)));
    seeded(Power::Running, SECRET, &[volume(SECRET)])
        .present(vm)
        .observe(|o| o.seed.as_mut().unwrap().shared = shared)
        .spec(|s| s.node = Some("pve2".into()))
        .status(|s| s.at_provider.target_node = Some("pve1".into()))
}

#[test]
fn a_seed_on_local_storage_refuses_the_migration_proxmox_would_refuse() {
    let refused = attached_and_moved(false).run();
    assert_eq!(refused.step, Step::Idle(Idle::Refuse), "{:?}", refused.step);
    let (status, reason, message) = condition(&refused, ConditionType::Synced).unwrap();
    assert_eq!((status, reason.as_str()), (F, "InvalidSpec"));
    assert!(
        message.contains("seed ISO is on storage local, which is not shared"),
        "{message}"
    );
    // On shared ISO storage the same spec migrates.
    let migrates = attached_and_moved(true).run();
    assert_eq!(migrates.step.name(), "Migrate", "{:?}", migrates.step);
}

/// Issue 31: a VM whose `customCloudInit` inputs do not exist yet is not
/// created (it was, stopped, before they did); once they can be read the
/// seed is uploaded and the VM created.
#[test]
fn a_vm_is_not_created_before_its_cloud_init_inputs_exist() {
    let fresh = |data: Result<SeedFiles, String>| {
        let view = SeedView {
            node: "pve1".into(),
            data,
            volumes: vec![],
            pid: None,
            shared: false,
        };
        with_custom_cloud_init(World::new().pending().finalizer().node("pve1").image(true))
            .absent()
            .observe(|o| o.seed = Some(view))
    };
    let missing = fresh(Err("user-data: Secret default/seed does not exist".into())).run();
    assert!(
        matches!(missing.step, Step::Idle(_)),
        "nothing is sent: {:?}",
        missing.step
    );
    let (status, reason, _) = condition(&missing, ConditionType::Synced).unwrap();
    assert_eq!(
        (status, reason.as_str()),
        (F, "SecretNotFound"),
        "{}",
        synced_message(&missing)
    );
    assert!(
        synced_message(&missing).contains("user-data: Secret default/seed does not exist"),
        "{}",
        synced_message(&missing)
    );
    let readable = fresh(Ok(files(SECRET))).run();
    assert!(
        matches!(readable.step, Step::Pve(PveCall::UploadSeed { .. })),
        "{:?}",
        readable.step
    );
}
