//! Hardware keys in the plan: created with the VM, compared as Proxmox
//! echoes them, corrected, kept pending, volumes added or reported.

use std::collections::BTreeMap;

use serde_json::json;

use super::super::tests::converge::configure_changes;
use super::super::tests::create::ready_to_create;
use super::super::tests::{F, T, World, condition, our_vm, sent, synced_message};
use super::super::{Power, PveCall, Step, VmConfig};
use super::HwWant;
use crate::api::{condition::ConditionType, vm::VmParameters};

/// The hardware part of a Windows-11-like spec with every device kind.
fn hardware(spec: &mut VmParameters) {
    let extra: VmParameters = serde_json::from_value(json!({
        "bios": "OVMF",
        "efiDisk": {"storage": "local-lvm", "preEnrolledKeys": true},
        "machine": {"type": "q35"},
        "tpmState": {"storage": "local-lvm"},
        "osType": "win11",
        "serialPorts": [{"slot": "serial0"}],
        "vga": {"type": "serial0"},
        "pciDevices": [{"slot": "hostpci0", "mapping": "gpu", "pcie": true}],
        "usbDevices": [{"slot": "usb1", "mapping": "token"}],
        "rng": {"source": "/dev/urandom", "maxBytes": 1024},
        "hotplug": ["network", "disk"],
        "balloon": {"minimum": "1Gi"},
        "protection": true,
        "startup": {"order": 2, "up": 30},
    }))
    .unwrap();
    spec.hardware = extra.hardware;
    spec.lifecycle = extra.lifecycle;
    spec.cpu.type_ = Some("host".into());
    spec.cpu.flags = vec!["+aes".into(), "-pcid".into()];
    spec.cpu.numa = Some(true);
}

/// What Proxmox shows for [`hardware`] after the create (PVE 9).
fn shown() -> BTreeMap<&'static str, &'static str> {
    [
        ("bios", "ovmf"),
        (
            "efidisk0",
            "local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=528K",
        ),
        ("machine", "pc-q35-9.2+pve1"),
        ("tpmstate0", "local-lvm:vm-100-disk-2,size=4M,version=v2.0"),
        ("ostype", "win11"),
        ("serial0", "socket"),
        ("vga", "serial0"),
        ("hostpci0", "mapping=gpu,pcie=1"),
        ("usb1", "mapping=token"),
        ("rng0", "source=/dev/urandom,max_bytes=1024"),
        ("hotplug", "disk,network"),
        ("balloon", "1024"),
        ("numa", "1"),
        ("cpu", "host,flags=-pcid;+aes"),
        ("protection", "1"),
        ("startup", "order=2,up=30"),
    ]
    .into()
}

/// Our VM with [`shown`] in its config, changed by `f`.
fn vm_showing(power: Power, f: impl FnOnce(&mut VmConfig)) -> super::super::ObservedVm {
    let mut vm = our_vm(power);
    let config = vm.config.as_mut().unwrap();
    for (k, v) in shown() {
        config.current.insert(k.into(), v.into());
    }
    f(config);
    vm
}

#[test]
fn the_create_carries_firmware_devices_and_lifecycle() {
    let plan = ready_to_create().spec(hardware).run();
    let Step::Pve(PveCall::CreateVm { params, .. }) = &plan.step else {
        panic!("want CreateVm, got {:?}", plan.step);
    };
    let sent = sent(&params.settings);
    let p = |k: &str| sent.get(k).map(String::as_str);
    assert_eq!(p("bios"), Some("ovmf"));
    assert_eq!(
        p("efidisk0"),
        Some("local-lvm:1,efitype=4m,pre-enrolled-keys=1")
    );
    assert_eq!(p("tpmstate0"), Some("local-lvm:1,version=v2.0"));
    assert_eq!(p("machine"), Some("q35"));
    assert_eq!(p("ostype"), Some("win11"));
    assert_eq!((p("serial0"), p("vga")), (Some("socket"), Some("serial0")));
    assert_eq!(p("hostpci0"), Some("mapping=gpu,pcie=1"));
    assert_eq!(p("usb1"), Some("mapping=token"));
    assert_eq!(p("rng0"), Some("/dev/urandom,max_bytes=1024"));
    assert_eq!(p("hotplug"), Some("network,disk"));
    assert_eq!(p("balloon"), Some("1024"));
    assert_eq!(
        (p("numa"), p("cpu")),
        (Some("1"), Some("host,flags=+aes;-pcid"))
    );
    assert_eq!(p("protection"), Some("1"));
    assert_eq!(p("startup"), Some("order=2,up=30"));
    assert!(
        condition(&plan, ConditionType::Warning).is_none(),
        "an EFI disk is declared: nothing to warn about"
    );
}

#[test]
fn what_proxmox_shows_matches_the_spec() {
    let plan = World::new()
        .created()
        .spec(hardware)
        .present(vm_showing(Power::Running, |_| {}))
        .run();
    assert_eq!(plan.step.name(), "UpToDate", "{}", synced_message(&plan));
    assert!(plan.status.at_provider.pending_changes.is_empty());
}

#[test]
fn drift_is_corrected_keeping_what_the_spec_leaves_open() {
    let plan = World::new()
        .created()
        .spec(hardware)
        .spec(|s| {
            s.hardware.machine.as_mut().unwrap().viommu = Some(crate::api::vm::Viommu::Virtio)
        })
        .present(vm_showing(Power::Stopped, |c| {
            c.current.remove("serial0");
            c.current.insert("vga".into(), "std".into());
            c.current.insert("cpu".into(), "host,hidden=1".into());
            c.current
                .insert("hostpci0".into(), "mapping=gpu,rombar=0".into());
            c.current.insert("startup".into(), "order=3".into());
        }))
        .run();
    let set = sent(&configure_changes(&plan).set);
    let keys: Vec<&str> = set.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["cpu", "hostpci0", "machine", "serial0", "startup", "vga"]
    );
    assert_eq!(
        set["cpu"], "host,flags=+aes;-pcid,hidden=1",
        "the model and hidden stay"
    );
    assert_eq!(
        set["hostpci0"], "mapping=gpu,pcie=1,rombar=0",
        "rombar is left open"
    );
    assert_eq!(
        set["machine"], "pc-q35-9.2+pve1,viommu=virtio",
        "the pinned version stays"
    );
    assert_eq!(
        (set["serial0"].as_str(), set["vga"].as_str()),
        ("socket", "serial0")
    );
}

#[test]
fn changes_for_the_next_start_are_pending() {
    let plan = World::new()
        .created()
        .spec(hardware)
        .present(vm_showing(Power::Running, |c| {
            c.current.remove("serial0");
            c.current.insert("vga".into(), "std".into());
            c.current.remove("efidisk0");
            for (k, v) in [
                ("serial0", "socket"),
                ("vga", "serial0"),
                (
                    "efidisk0",
                    "local-lvm:vm-100-disk-3,efitype=4m,pre-enrolled-keys=1,size=528K",
                ),
            ] {
                c.pending.insert(k.into(), Some(v.into()));
            }
        }))
        .run();
    assert_eq!(plan.step.name(), "UpToDate", "{}", synced_message(&plan));
    let mut pending = plan.status.at_provider.pending_changes.clone();
    pending.sort();
    assert_eq!(pending, ["efidisk0", "serial0", "vga"]);
}

#[test]
fn missing_volumes_are_added_and_different_ones_reported() {
    let missing = World::new()
        .created()
        .spec(hardware)
        .present(vm_showing(Power::Stopped, |c| {
            c.current.remove("efidisk0");
            c.current.remove("tpmstate0");
        }))
        .run();
    let set = sent(&configure_changes(&missing).set);
    assert_eq!(
        set["efidisk0"],
        "local-lvm:1,efitype=4m,pre-enrolled-keys=1"
    );
    assert_eq!(set["tpmstate0"], "local-lvm:1,version=v2.0");

    let other = World::new()
        .created()
        .spec(hardware)
        .present(vm_showing(Power::Running, |c| {
            c.current.insert(
                "efidisk0".into(),
                "local-lvm:vm-100-disk-1,size=128K".into(),
            );
            c.current.insert(
                "tpmstate0".into(),
                "other:vm-100-disk-2,version=v2.0".into(),
            );
        }))
        .run();
    assert_eq!(other.step.name(), "UpToDate");
    let synced = condition(&other, ConditionType::Synced).unwrap();
    assert_eq!((synced.0, synced.1.as_str()), (F, "InvalidSpec"));
    for part in [
        "the EFI disk (efidisk0) was created with type 2m and without pre-enrolled Secure Boot keys",
        "the TPM state (tpmstate0) is on storage other, the spec says local-lvm",
    ] {
        assert!(synced.2.contains(part), "{part:?} in {}", synced.2);
    }
}

#[test]
fn ovmf_without_an_efi_disk_is_a_warning() {
    let ovmf = |s: &mut VmParameters| s.hardware.bios = Some(crate::api::vm::Bios::OVMF);
    let plan = World::new()
        .created()
        .spec(ovmf)
        .present(our_vm(Power::Running))
        .run();
    let (status, reason, message) = condition(&plan, ConditionType::Warning).unwrap();
    assert_eq!((status, reason.as_str()), (T, "NoEfiDisk"));
    assert!(message.contains("temporary"), "{message}");

    // A VM that has one (e.g. from its template) is fine; so is a spec
    // that declares one. A warning no longer true goes away.
    let has_one = World::new()
        .created()
        .spec(ovmf)
        .status(|s| s.conditions = plan.status.conditions.clone())
        .present(our_vm(Power::Running))
        .observe(|o| {
            if let super::super::VmState::Present(vm) = &mut o.vm {
                vm.config.as_mut().unwrap().current.insert(
                    "efidisk0".into(),
                    "local-lvm:base-9000-disk-1/vm-100-disk-1,efitype=4m,size=528K".into(),
                );
            }
        })
        .run();
    assert!(condition(&has_one, ConditionType::Warning).is_none());
}

#[test]
fn absent_keys_read_as_proxmox_defaults() {
    let defaults = [
        (HwWant::Bios(pve_client::vm::Bios::SeaBios), true),
        (HwWant::Bios(pve_client::vm::Bios::Ovmf), false),
        (HwWant::OsType("other"), true),
        (HwWant::Numa(false), true),
        (HwWant::Protection(false), true),
        (HwWant::Protection(true), false),
        (
            HwWant::Hotplug(pve_client::vm::Hotplug::pve_default()),
            true,
        ),
        (
            HwWant::Balloon {
                target: None,
                memory: 2048,
            },
            true,
        ),
        (
            HwWant::Balloon {
                target: Some(0),
                memory: 2048,
            },
            false,
        ),
        (
            HwWant::Machine {
                chipset: pve_client::vm::Chipset::I440fx,
                version: None,
                viommu: None,
            },
            true,
        ),
    ];
    for (want, same) in defaults {
        assert_eq!(want.matches(None), same, "{want:?}");
    }
    let q35 = |version: Option<&str>| HwWant::Machine {
        chipset: pve_client::vm::Chipset::Q35,
        version: version.map(str::to_owned),
        viommu: None,
    };
    assert!(q35(None).matches(Some("pc-q35-8.1")));
    assert!(q35(Some("9.2")).matches(Some("pc-q35-9.2+pve1")));
    assert!(!q35(Some("9.2+pve1")).matches(Some("pc-q35-9.2")));
    assert!(!q35(None).matches(Some("pc")));
    let balloon_all = HwWant::Balloon {
        target: None,
        memory: 2048,
    };
    assert!(balloon_all.matches(Some("2048")) && !balloon_all.matches(Some("1024")));
    assert_eq!(
        HwWant::Serial {
            index: 2,
            port: pve_client::vm::SerialPort::Socket
        }
        .key(),
        "serial2"
    );
}

#[test]
fn the_spec_reads_as_one_key_each() {
    let mut params: VmParameters = serde_json::from_value(json!({})).unwrap();
    hardware(&mut params);
    let keys: Vec<String> = super::wants(&params)
        .unwrap()
        .iter()
        .map(HwWant::key)
        .collect();
    assert_eq!(
        keys,
        [
            "bios",
            "machine",
            "ostype",
            "serial0",
            "vga",
            "hostpci0",
            "usb1",
            "rng0",
            "hotplug",
            "balloon",
            "numa",
            "cpu",
            "protection",
            "startup"
        ]
    );
}
