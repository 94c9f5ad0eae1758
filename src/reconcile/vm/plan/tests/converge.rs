//! An existing VM: ownership, drift, disks, power, agent, observe-only.

use std::time::Duration;

use super::*;
use crate::api::ManagementPolicy::*;

fn with_config(power: Power, f: impl FnOnce(&mut VmConfig)) -> ObservedVm {
    let mut vm = our_vm(power);
    f(vm.config.as_mut().unwrap());
    vm
}

fn set(key: &str, value: &str) -> impl FnOnce(&mut VmConfig) {
    let (key, value) = (key.to_owned(), value.to_owned());
    move |c: &mut VmConfig| {
        c.current.insert(key, value);
    }
}

fn foreign() -> ObservedVm {
    with_config(Power::Running, |c| {
        c.current.insert(
            "description".into(),
            marker_line("default", "other", "another-uid"),
        );
        c.current.insert("memory".into(), "512".into());
    })
}

fn unmarked() -> ObservedVm {
    with_config(Power::Running, |c| {
        c.current.insert("description".into(), "hand made".into());
    })
}

#[test]
fn converge_table() {
    let available = Some((T, Reason::Available));
    let unavailable = Some((F, Reason::Unavailable));
    run_table(vec![
        (
            "matches the spec",
            World::new().created().present(our_vm(Power::Running)),
            expect("UpToDate", (T, Reason::ReconcileSuccess), available),
        ),
        (
            "another resource's VM is never touched",
            World::new().created().present(foreign()),
            expect("Wait", (F, Reason::NotOwned), unavailable),
        ),
        (
            "a hand-made VM at our spec.vmid is never touched",
            World::new()
                .pending()
                .spec(|s| s.vmid = Some(100))
                .present(unmarked()),
            expect("Wait", (F, Reason::NotOwned), unavailable),
        ),
        (
            "allocated VMID taken by another VM before our create: allocate again",
            World::new().pending().present(unmarked()),
            expect(
                "ForgetExternalName",
                (T, Reason::ReconcileSuccess),
                Some((F, Reason::Creating)),
            ),
        ),
        (
            "someone else is creating a VM with our VMID",
            World::new().created().present(ObservedVm {
                lock: Some("create".into()),
                config: None,
                ..our_vm(Power::Stopped)
            }),
            expect("Wait", (F, Reason::NotOwned), None),
        ),
        (
            "memory drift is corrected",
            World::new()
                .created()
                .present(with_config(Power::Running, set("memory", "1024"))),
            expect("Configure", (T, Reason::WaitingForTask), available),
        ),
        (
            "tag order and case are not drift",
            World::new()
                .created()
                .present(with_config(Power::Running, set("tags", "WEB;prod"))),
            expect("UpToDate", (T, Reason::ReconcileSuccess), available),
        ),
        (
            "a change waiting for reboot is not drift",
            World::new()
                .created()
                .present(with_config(Power::Running, |c| {
                    c.current.insert("memory".into(), "1024".into());
                    c.pending.insert("memory".into(), Some("2048".into()));
                })),
            expect("UpToDate", (T, Reason::ReconcileSuccess), available),
        ),
        (
            "disk smaller than the spec grows",
            World::new().created().present(with_config(
                Power::Running,
                set("scsi0", "local-lvm:vm-100-disk-0,size=2252M"),
            )),
            expect("ResizeDisk", (T, Reason::WaitingForTask), available),
        ),
        (
            "disk larger than the spec is reported, not shrunk",
            World::new().created().present(with_config(
                Power::Running,
                set("scsi0", "local-lvm:vm-100-disk-0,size=40G"),
            )),
            expect("UpToDate", (F, Reason::InvalidSpec), available),
        ),
        (
            "stopped VM that should run is started",
            World::new().created().present(our_vm(Power::Stopped)),
            expect("Start", (T, Reason::WaitingForTask), unavailable),
        ),
        (
            "running VM that should stop is shut down",
            World::new()
                .created()
                .spec(|s| s.power_state = crate::api::vm::PowerState::Stopped)
                .present(our_vm(Power::Running)),
            expect("Shutdown", (T, Reason::WaitingForTask), unavailable),
        ),
        (
            "after a failed shutdown it is stopped",
            World::new()
                .created()
                .spec(|s| s.power_state = crate::api::vm::PowerState::Stopped)
                .failed(TaskAction::Shutdown, 1, 99)
                .present(our_vm(Power::Running)),
            expect("Stop", (T, Reason::WaitingForTask), unavailable),
        ),
        (
            "locked by a backup: wait to correct drift",
            World::new().created().present(ObservedVm {
                lock: Some("backup".into()),
                ..with_config(Power::Running, set("cores", "4"))
            }),
            expect("Wait", (T, Reason::VmLocked), available),
        ),
        (
            // A ProxmoxSnapshot's task (issue 33): taking, rolling back or
            // deleting a snapshot locks the VM; its own pass waits.
            "locked by a snapshot task: wait to correct drift",
            World::new().created().present(ObservedVm {
                lock: Some("snapshot".into()),
                ..with_config(Power::Running, set("cores", "4"))
            }),
            expect("Wait", (T, Reason::VmLocked), available),
        ),
        (
            "locked by a rollback that stopped it: wait to start it",
            World::new().created().present(ObservedVm {
                lock: Some("rollback".into()),
                ..our_vm(Power::Stopped)
            }),
            expect("Wait", (T, Reason::VmLocked), unavailable),
        ),
        (
            "locked but nothing to do is fine",
            World::new().created().present(ObservedVm {
                lock: Some("backup".into()),
                ..our_vm(Power::Running)
            }),
            expect("UpToDate", (T, Reason::ReconcileSuccess), available),
        ),
        (
            "policies without Update: drift is left alone",
            World::new()
                .created()
                .policies(&[Observe, Create, Delete])
                .present(with_config(Power::Running, set("cores", "4"))),
            expect("UpToDate", (T, Reason::ReconcileSuccess), available),
        ),
        (
            "observe only: someone else's VM is observed, not refused",
            World::new()
                .vmid(100)
                .policies(&[Observe])
                .present(unmarked()),
            expect("UpToDate", (T, Reason::ReconcileSuccess), available),
        ),
        (
            "observe only: a stopped VM is reported, not started",
            World::new()
                .vmid(100)
                .policies(&[Observe])
                .present(our_vm(Power::Stopped)),
            expect("UpToDate", (T, Reason::ReconcileSuccess), unavailable),
        ),
        (
            "paused VM",
            World::new().created().present(our_vm(Power::Paused)),
            expect("UpToDate", (F, Reason::ReconcileError), unavailable),
        ),
        (
            "our VM moved (HA, by hand) off spec.node: followed, not blamed on the spec",
            World::new()
                .created()
                .spec(|s| s.node = Some("pve2".into()))
                .status(|s| s.at_provider.target_node = Some("pve2".into()))
                .present(our_vm(Power::Running)),
            expect("UpToDate", (T, Reason::OutsidePlacement), available),
        ),
        (
            "our VM moved outside allowedNodes: followed",
            World::new()
                .created()
                .spec(|s| s.allowed_nodes = vec!["pve2".into(), "pve3".into()])
                .present(our_vm(Power::Running)),
            expect("UpToDate", (T, Reason::OutsidePlacement), available),
        ),
    ]);
}

pub(in super::super) fn configure_changes(plan: &Plan) -> &ConfigChanges {
    match &plan.step {
        Step::Pve(PveCall::Configure { changes, .. }) => changes,
        other => panic!("want Configure, got {other:?}"),
    }
}

#[test]
fn drift_sets_exactly_the_drifted_keys_against_the_digest() {
    let plan = World::new()
        .created()
        .present(with_config(Power::Running, |c| {
            c.current.insert("memory".into(), "1024".into());
            c.current.insert(
                "net0".into(),
                "virtio=BC:24:11:00:00:01,bridge=vmbr9".into(),
            );
            c.current.insert("tags".into(), "web".into());
        }))
        .run();
    let changes = configure_changes(&plan);
    let set = sent(&changes.set);
    let keys: Vec<&str> = set.keys().map(String::as_str).collect();
    assert_eq!(keys, ["memory", "net0", "tags"]);
    assert_eq!(set["memory"], "2048");
    assert_eq!(
        set["net0"], "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        "the MAC Proxmox generated is kept"
    );
    assert_eq!(changes.digest.as_deref(), Some("d1g3st"));
    assert!(changes.delete.is_empty(), "nothing is ever deleted");
}

#[test]
fn a_clone_is_configured_like_the_spec_says() {
    // A fresh clone of a bare template: no cloud-init drive, other sizes.
    let plan = World::new()
        .created()
        .spec(|s| {
            s.disks[0].image = None;
            s.clone = Some(serde_json::from_value(json!({"templateVmid": 9000})).unwrap());
        })
        .present(with_config(Power::Stopped, |c| {
            for key in ["ciuser", "sshkeys", "ipconfig0", "ide2", "agent", "tags"] {
                c.current.remove(key);
            }
            c.current.insert("cores".into(), "1".into());
        }))
        .run();
    let changes = configure_changes(&plan);
    let set = sent(&changes.set);
    for key in [
        "ciuser",
        "sshkeys",
        "ipconfig0",
        "ide2",
        "agent",
        "tags",
        "cores",
    ] {
        assert!(set.contains_key(key), "{key} missing from {:?}", set.keys());
    }
    assert_eq!(set["ide2"], "local-lvm:cloudinit");
}

#[test]
fn disks_grow_to_the_spec_and_missing_ones_are_added() {
    let grow = World::new()
        .created()
        .present(with_config(
            Power::Running,
            set("scsi0", "local-lvm:vm-100-disk-0,size=2252M"),
        ))
        .run();
    assert_eq!(
        grow.step,
        Step::Pve(PveCall::ResizeDisk {
            node: "pve1".into(),
            vmid: 100,
            slot: "scsi0".into(),
            bytes: 20 << 30
        })
    );
    assert_eq!(
        grow.pending_task.as_ref().unwrap().target.as_deref(),
        Some("scsi0")
    );

    let add = World::new()
        .created()
        .spec(|s| {
            s.disks.push(
                serde_json::from_value(
                    json!({"slot": "scsi1", "storage": "local-lvm", "size": "1536Mi"}),
                )
                .unwrap(),
            )
        })
        .present(our_vm(Power::Running))
        .run();
    assert_eq!(sent(&configure_changes(&add).set)["scsi1"], "local-lvm:2");

    let shrink = World::new()
        .created()
        .present(with_config(
            Power::Running,
            set("scsi0", "local-lvm:vm-100-disk-0,size=40G"),
        ))
        .run();
    assert!(
        synced_message(&shrink).contains("disks only grow"),
        "{}",
        synced_message(&shrink)
    );
}

#[test]
fn pending_changes_are_reported() {
    let plan = World::new()
        .created()
        .present(with_config(Power::Running, |c| {
            c.current.insert("cores".into(), "1".into());
            c.pending.insert("cores".into(), Some("2".into()));
        }))
        .run();
    assert_eq!(plan.status.at_provider.pending_changes, ["cores"]);
    assert!(synced_message(&plan).contains("next reboot"));
}

#[test]
fn a_new_password_version_is_sent() {
    let plan = World::new()
        .created()
        .password("v2")
        .status(|s| s.at_provider.password_version = Some("v1".into()))
        .present(our_vm(Power::Running))
        .run();
    let changes = configure_changes(&plan);
    assert_eq!(
        sent(&changes.set).keys().collect::<Vec<_>>(),
        ["cipassword"]
    );
    assert_eq!(
        plan.status.at_provider.password_version.as_deref(),
        Some("v2")
    );

    let applied = World::new()
        .created()
        .password("v2")
        .status(|s| s.at_provider.password_version = Some("v2".into()))
        .present(our_vm(Power::Running))
        .run();
    assert_eq!(applied.step, Step::Idle(Idle::UpToDate));
}

#[test]
fn guest_agent_addresses_never_block_ready() {
    let no_answer = ObservedVm {
        agent: AgentState::NoAnswer("QEMU guest agent is not running".into()),
        ..our_vm(Power::Running)
    };
    let plan = World::new().created().present(no_answer).run();
    assert_eq!(plan.step, Step::Idle(Idle::UpToDate));
    assert_eq!(condition(&plan, ConditionType::Ready).unwrap().0, T);
    let agent = condition(&plan, ConditionType::GuestAgent).unwrap();
    assert_eq!((agent.0, agent.1.as_str()), (F, "AgentNotResponding"));
    assert_eq!(
        plan.requeue_after,
        Some(Duration::from_secs(15)),
        "asked again soon"
    );

    let answering = ObservedVm {
        agent: AgentState::Interfaces(vec![GuestInterface {
            name: "eth0".into(),
            mac: Some("bc:24:11:00:00:01".into()),
            addresses: vec!["fe80::1".into(), "10.0.0.5".into()],
        }]),
        ..our_vm(Power::Running)
    };
    let plan = World::new().created().present(answering).run();
    let at = &plan.status.at_provider;
    assert_eq!(at.ip_address.as_deref(), Some("10.0.0.5"));
    assert_eq!(at.mac_addresses, ["BC:24:11:00:00:01"]);
    assert_eq!(condition(&plan, ConditionType::GuestAgent).unwrap().0, T);
    assert_eq!(
        plan.requeue_after,
        Some(Duration::from_secs(60)),
        "resync interval"
    );
}

#[test]
fn connection_details_are_offered_when_asked_for() {
    let mut world = World::new().created().present(ObservedVm {
        agent: AgentState::Interfaces(vec![GuestInterface {
            name: "eth0".into(),
            mac: None,
            addresses: vec!["10.0.0.5".into()],
        }]),
        ..our_vm(Power::Running)
    });
    assert_eq!(world.run().connection, None);
    world.vm.spec.write_connection_secret_to_ref = Some(crate::api::meta::LocalSecretReference {
        name: "web-conn".into(),
    });
    let data = world.run().connection.expect("asked for");
    assert_eq!(data["vmid"], "100");
    assert_eq!(data["ipAddress"], "10.0.0.5");
    assert_eq!(data["user"], "ubuntu");
    assert_eq!(data["node"], "pve1");
}

#[test]
fn poll_interval_annotation_overrides_the_resync() {
    let settled = ObservedVm {
        agent: AgentState::Interfaces(vec![]),
        ..our_vm(Power::Running)
    };
    let plan = World::new()
        .created()
        .annotate(meta::POLL_INTERVAL, "5m")
        .present(settled.clone())
        .run();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(300)));
    let floor = World::new()
        .created()
        .annotate(meta::POLL_INTERVAL, "1ms")
        .present(settled)
        .run();
    assert_eq!(floor.requeue_after, Some(Duration::from_secs(5)));
}

#[test]
fn observe_only_never_writes_to_proxmox() {
    let observe = |w: World| w.vmid(100).policies(&[Observe]);
    let worlds = [
        observe(World::new()).absent(),
        observe(World::new()).present(our_vm(Power::Stopped)),
        observe(World::new()).present(with_config(Power::Running, set("memory", "1024"))),
        observe(World::new()).present(unmarked()),
        observe(World::new()).present(foreign()),
        observe(World::new())
            .finalizer()
            .deleting()
            .present(our_vm(Power::Running)),
        observe(World::new())
            .active("qmstart", "100")
            .present(our_vm(Power::Stopped)),
        observe(World::new()).present(ObservedVm {
            lock: Some("create".into()),
            config: None,
            ..our_vm(Power::Stopped)
        }),
    ];
    for world in worlds {
        let plan = world.run();
        assert!(
            plan.step.pve().is_none() && plan.step != Step::Kube(KubeWrite::AddFinalizer),
            "observe-only planned {:?}",
            plan.step
        );
    }
}
