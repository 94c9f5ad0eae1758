//! Sizes and references checked before a VM exists: vCPUs, memory, disks
//! on storage that cannot overprovision, bridges; addresses no VM can use;
//! annotations that are ignored or clamped.

use super::create::ready_to_create;
use super::*;
use crate::reconcile::vm::plan::{HostView, StorageView};

const GIB: u64 = 1 << 30;

/// Node pve1 as the cluster view and its network list show it: 16 CPUs,
/// 64 GiB, a thin pool `local-lvm` (400 GiB, 100 used), a thick VG `vg`
/// (50 GiB, 10 used), bridges vmbr0, the VNet `tenant1`, the
/// VLAN-aware VNet `tagged1` and `vb0f1e2d`, another namespace's VNet.
fn pve1() -> HostView {
    HostView {
        node: "pve1".into(),
        cpus: 16,
        memory: 64 * GIB,
        storages: [
            (
                "local-lvm".to_owned(),
                StorageView {
                    plugin: "lvmthin".into(),
                    total: 400 * GIB,
                    used: 100 * GIB,
                },
            ),
            (
                "vg".to_owned(),
                StorageView {
                    plugin: "lvm".into(),
                    total: 50 * GIB,
                    used: 10 * GIB,
                },
            ),
        ]
        .into(),
        bridges: Some(
            [
                "vmbr0".to_owned(),
                "tenant1".to_owned(),
                "tagged1".to_owned(),
                "vb0f1e2d".to_owned(),
            ]
            .into(),
        ),
        untagged_vnets: ["tenant1".to_owned(), "vb0f1e2d".to_owned()].into(),
        foreign_vnets: ["vb0f1e2d".to_owned()].into(),
    }
}

fn on_pve1(w: World) -> World {
    w.observe(|o| o.host = Some(pve1()))
}

fn cloning(w: World) -> World {
    w.spec(|s| {
        s.disks.clear();
        s.clone = Some(serde_json::from_value(json!({"templateVmid": 9000})).unwrap());
    })
    .observe(|o| {
        o.template = Some(TemplateLookup::Found {
            vmid: 9000,
            node: "pve1".into(),
            template: true,
            pool: None,
            tags: vec![],
        })
    })
}

#[test]
fn limits_table() {
    let creating = Some((F, Reason::Creating));
    let thick_disk = |size: &str| {
        let size = size.to_owned();
        move |s: &mut VmParameters| {
            s.disks[0].storage = "vg".into();
            s.disks[0].size = Some(size.as_str().into());
        }
    };
    run_table(vec![
        (
            "a spec that fits the node is created",
            on_pve1(ready_to_create()),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "more vCPUs than the node has CPUs",
            on_pve1(ready_to_create()).spec(|s| s.cpu.cores = 64),
            expect("Wait", (F, Reason::ExceedsNodeLimits), creating),
        ),
        (
            "sockets count too",
            on_pve1(ready_to_create()).spec(|s| {
                s.cpu.sockets = 2;
                s.cpu.cores = 9
            }),
            expect("Wait", (F, Reason::ExceedsNodeLimits), creating),
        ),
        (
            "more memory than the node has",
            on_pve1(ready_to_create()).spec(|s| s.memory = "64Ti".into()),
            expect("Wait", (F, Reason::ExceedsNodeLimits), creating),
        ),
        (
            "a disk bigger than the free space of thick storage",
            on_pve1(ready_to_create()).spec(thick_disk("41Gi")),
            expect("Wait", (F, Reason::ExceedsNodeLimits), creating),
        ),
        (
            "a disk that fits thick storage",
            on_pve1(ready_to_create()).spec(thick_disk("40Gi")),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "a huge disk on thin storage is created (with a Warning)",
            on_pve1(ready_to_create()).spec(|s| s.disks[0].size = Some("100Pi".into())),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "a bridge the node does not have",
            on_pve1(ready_to_create()).spec(|s| s.networks[0].bridge = "vmbr9".into()),
            expect("Wait", (F, Reason::BridgeNotFound), creating),
        ),
        (
            "a VNet the node has",
            on_pve1(ready_to_create()).spec(|s| s.networks[0].bridge = "tenant1".into()),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "another namespace's VNet, though the node has it",
            on_pve1(ready_to_create()).spec(|s| s.networks[0].bridge = "vb0f1e2d".into()),
            expect("Wait", (F, Reason::BridgeNotFound), creating),
        ),
        (
            "another namespace's VNet, the node's bridges unread",
            ready_to_create()
                .spec(|s| s.networks[0].bridge = "vb0f1e2d".into())
                .observe(|o| {
                    o.host = Some(HostView {
                        bridges: None,
                        ..pve1()
                    })
                }),
            expect("Wait", (F, Reason::BridgeNotFound), creating),
        ),
        (
            "a VLAN tag on a VNet that is not VLAN-aware",
            on_pve1(ready_to_create()).spec(|s| {
                s.networks[0].bridge = "tenant1".into();
                s.networks[0].vlan_tag = Some(20);
            }),
            expect("Wait", (F, Reason::BridgeNotFound), creating),
        ),
        (
            "a VLAN tag on a VLAN-aware VNet",
            on_pve1(ready_to_create()).spec(|s| {
                s.networks[0].bridge = "tagged1".into();
                s.networks[0].vlan_tag = Some(20);
            }),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "bridges that could not be read hold nothing up",
            ready_to_create()
                .spec(|s| s.networks[0].bridge = "vmbr9".into())
                .observe(|o| {
                    o.host = Some(HostView {
                        bridges: None,
                        ..pve1()
                    })
                }),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "figures of another node are not held against this one",
            ready_to_create().spec(|s| s.cpu.cores = 64).observe(|o| {
                o.host = Some(HostView {
                    node: "pve2".into(),
                    ..pve1()
                })
            }),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "figures the view does not show are not limits",
            ready_to_create().spec(|s| s.cpu.cores = 64).observe(|o| {
                o.host = Some(HostView {
                    cpus: 0,
                    memory: 0,
                    ..pve1()
                })
            }),
            expect("CreateVm", (T, Reason::ImportingDisk), creating),
        ),
        (
            "a clone too big for its node is not cloned",
            cloning(on_pve1(ready_to_create())).spec(|s| s.cpu.cores = 32),
            expect("Wait", (F, Reason::ExceedsNodeLimits), creating),
        ),
        (
            "a clone onto a missing bridge is not cloned",
            cloning(on_pve1(ready_to_create())).spec(|s| s.networks[0].bridge = "vmbr9".into()),
            expect("Wait", (F, Reason::BridgeNotFound), creating),
        ),
        (
            "a clone that fits is cloned",
            cloning(on_pve1(ready_to_create())),
            expect("CloneVm", (T, Reason::WaitingForTask), creating),
        ),
        (
            "no node big enough among the allowed ones",
            World::new().pending().absent().observe(|o| {
                o.placement = Some(Placement::NoNode {
                    why: "no online node has 64 CPUs".into(),
                    too_small: true,
                })
            }),
            expect("Wait", (F, Reason::ExceedsNodeLimits), creating),
        ),
    ]);
}

#[test]
fn another_namespaces_vnet_is_refused_naming_the_field() {
    let plan = on_pve1(ready_to_create())
        .spec(|s| s.networks[0].bridge = "vb0f1e2d".into())
        .run();
    let message = synced_message(&plan);
    assert!(
        message.contains("spec.forProvider.networks[0].bridge \"vb0f1e2d\" is the VNet of a ProxmoxVNet of another namespace"),
        "{message}"
    );
    assert!(
        !matches!(plan.step, Step::Pve(_)),
        "nothing sent: {:?}",
        plan.step
    );
}

#[test]
fn limits_are_named_in_the_message() {
    let plan = on_pve1(ready_to_create())
        .spec(|s| {
            s.cpu.cores = 64;
            s.memory = "64Ti".into();
            s.networks[0].bridge = "vmbr9".into();
        })
        .run();
    let message = synced_message(&plan);
    for part in [
        "refused before the VM exists",
        "spec.forProvider.cpu asks for 64 vCPUs (sockets 1 × cores 64) but node pve1 has 16 CPUs",
        "MAX 16 vcpus allowed per VM on this node",
        "spec.forProvider.memory 64 TiB is more than node pve1's 64 GiB of memory",
        "spec.forProvider.networks[0].bridge \"vmbr9\" is neither a bridge nor a VNet of node pve1 (it has tagged1, tenant1, vb0f1e2d, vmbr0)",
        "nothing is created",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert!(
        plan.events.iter().any(|e| e.reason == "ExceedsNodeLimits"),
        "{:?}",
        plan.events
    );
    let thick = on_pve1(ready_to_create())
        .spec(|s| {
            s.disks[0].storage = "vg".into();
            s.disks[0].size = Some("41Gi".into());
        })
        .run();
    assert!(
        synced_message(&thick).contains(
            "spec.forProvider.disks[0] 41 GiB on storage vg (lvm, which cannot overprovision) need 41 GiB but it has 40 GiB free of 50 GiB"
        ),
        "{}",
        synced_message(&thick)
    );
}

#[test]
fn thin_storage_overprovisioned_is_a_warning() {
    let plan = on_pve1(ready_to_create())
        .spec(|s| s.disks[0].size = Some("100Pi".into()))
        .run();
    let (status, reason, message) = condition(&plan, ConditionType::Warning).expect("a Warning");
    assert_eq!((status, reason.as_str()), (T, "Overprovisioned"));
    assert!(
        message.contains(
            "the disks on storage local-lvm (lvmthin) are 100 PiB, more than it has free (of 400 GiB)"
        ),
        "{message}"
    );
    // The free space moves with every other VM's writes: the Warning does
    // not (issue 17: its message changing made idle VMs write their status).
    let fuller = on_pve1(ready_to_create())
        .observe(|o| {
            if let Some(host) = o.host.as_mut()
                && let Some(pool) = host.storages.get_mut("local-lvm")
            {
                pool.used = 250 * GIB;
            }
        })
        .spec(|s| s.disks[0].size = Some("100Pi".into()))
        .run();
    assert_eq!(
        condition(&fuller, ConditionType::Warning),
        Some((status, reason, message))
    );
    let fits = on_pve1(ready_to_create()).run();
    assert_eq!(condition(&fits, ConditionType::Warning), None);
}

#[test]
fn addresses_no_vm_can_use_are_refused() {
    let with_ip = |ip: &str, gateway: Option<&str>| {
        let (ip, gateway) = (ip.to_owned(), gateway.map(str::to_owned));
        World::new().spec(move |s| {
            let c = &mut s.cloud_init.as_mut().unwrap().ip_configs[0];
            c.ip = Some(ip);
            c.gateway = gateway;
        })
    };
    for (ip, gateway, refused) in [
        (
            "10.0.0.255/24",
            Some("10.0.0.1"),
            Some("is the broadcast address of its subnet"),
        ),
        (
            "10.0.1.255/23",
            None,
            Some("is the broadcast address of its subnet"),
        ),
        (
            "10.0.0.5/24",
            Some("10.0.0.5"),
            Some("gateway 10.0.0.5 is the VM's own address"),
        ),
        ("10.0.0.5/24", Some("10.0.0.1"), None),
        ("10.0.0.255/23", Some("10.0.0.1"), None),
        ("192.0.2.11/31", None, None),
    ] {
        let plan = with_ip(ip, gateway).run();
        let message = synced_message(&plan);
        match refused {
            Some(why) => {
                assert_eq!(plan.step.name(), "Refuse", "{ip}");
                assert!(
                    message.contains("spec.forProvider.cloudInit.ipConfigs[0]")
                        && message.contains(why),
                    "{ip}: {message}"
                );
            }
            None => assert_ne!(plan.step.name(), "Refuse", "{ip}: {message}"),
        }
    }
    let plan = World::new()
        .spec(|s| {
            let c = &mut s.cloud_init.as_mut().unwrap().ip_configs[0];
            c.ip = None;
            c.ip6 = Some("fd00::5/64".into());
            c.gateway6 = Some("fd00::5".into());
        })
        .run();
    assert!(
        synced_message(&plan).contains("gateway6 fd00::5 is the VM's own address (ip6)"),
        "{}",
        synced_message(&plan)
    );
}

#[test]
fn ignored_and_clamped_annotations_are_a_warning() {
    for (key, value, says) in [
        (
            meta::POLL_INTERVAL,
            "banana",
            "\"banana\" is not a Go duration (such as 30s or 5m): ignored",
        ),
        (
            meta::POLL_INTERVAL,
            "0s",
            "\"0s\" is shorter than 5s: 5s is used",
        ),
        (
            meta::PAUSED,
            "yes",
            "\"yes\" is neither \"true\" nor \"false\"",
        ),
    ] {
        let plan = World::new()
            .created()
            .present(our_vm(Power::Running))
            .annotate(key, value)
            .run();
        let (status, reason, message) =
            condition(&plan, ConditionType::Warning).expect("a Warning");
        assert_eq!(
            (status, reason.as_str()),
            (T, "InvalidAnnotation"),
            "{value}"
        );
        assert!(message.contains(key) && message.contains(says), "{message}");
    }
    for (key, value) in [(meta::POLL_INTERVAL, "30s"), (meta::PAUSED, "false")] {
        let plan = World::new()
            .created()
            .present(our_vm(Power::Running))
            .annotate(key, value)
            .run();
        assert_eq!(condition(&plan, ConditionType::Warning), None, "{value}");
    }
}

/// An existing VM whose spec puts a NIC on another namespace's VNet (a
/// change of `bridge`, or a NIC added): nothing of the spec is carried
/// out, the field named; the same VM on its own VNet is converged.
#[test]
fn an_existing_vm_is_not_moved_onto_another_namespaces_vnet() {
    let foreign = |o: &mut Observation| o.foreign_vnets = ["vb0f1e2d".to_owned()].into();
    let existing = || {
        World::new()
            .created()
            .present(our_vm(Power::Running))
            .observe(foreign)
    };
    // The NIC changed onto the other namespace's VNet (its config still
    // on vmbr0): a config write would follow without the check.
    let moved = existing()
        .spec(|s| s.networks[0].bridge = "vb0f1e2d".into())
        .run();
    assert_eq!(moved.step, Step::Idle(Idle::Wait), "{:?}", moved.step);
    let message = synced_message(&moved);
    assert!(
        message.contains("spec.forProvider.networks[0].bridge \"vb0f1e2d\" is the VNet of a ProxmoxVNet of another namespace")
            && message.contains("nothing of the spec is changed"),
        "{message}"
    );
    assert_eq!(
        condition(&moved, ConditionType::Synced).map(|c| (c.0, c.1)),
        Some((F, Reason::BridgeNotFound.as_str().to_owned()))
    );
    // A NIC of its own VNet: the other namespace's list does not matter.
    let own = existing().run();
    assert_eq!(own.step, Step::Idle(Idle::UpToDate), "{:?}", own.step);
}
