//! ProxmoxVM rules of the firmware, console, device and lifecycle fields.

use serde_json::{Value, json};

use super::{assert_verdict, refusals, schema_of, vm};
use crate::api::ProxmoxVM;
use kube::CustomResourceExt;

/// An EFI disk as the API server defaults it.
fn efi(keys: bool, type_: &str) -> Value {
    json!({"storage": "local-lvm", "type": type_, "preEnrolledKeys": keys})
}

#[test]
fn firmware_console_and_device_rules() {
    let schema = schema_of(ProxmoxVM::crd());
    let stopped = |mut fp: Value| {
        fp["powerState"] = json!("Stopped");
        fp
    };
    // (case, forProvider, None = accepted | Some(part of the refusal message))
    let cases: Vec<(&str, Value, Option<&str>)> = vec![
        (
            "windows 11",
            json!({"bios": "OVMF", "efiDisk": efi(true, "4m"), "machine": {"type": "q35"},
                   "tpmState": {"storage": "local-lvm", "version": "v2.0"}, "osType": "win11"}),
            None,
        ),
        (
            "efi disk without OVMF",
            json!({"efiDisk": efi(false, "4m")}),
            Some("efiDisk needs bios: OVMF"),
        ),
        (
            "efi disk with SeaBIOS",
            json!({"bios": "SeaBIOS", "efiDisk": efi(false, "4m")}),
            Some("efiDisk needs bios: OVMF"),
        ),
        (
            "secure boot keys on 2m",
            json!({"bios": "OVMF", "efiDisk": efi(true, "2m")}),
            Some("preEnrolledKeys (Secure Boot) needs type 4m"),
        ),
        (
            "efi disk storage",
            json!({"bios": "OVMF", "efiDisk": {"storage": "local lvm", "type": "4m", "preEnrolledKeys": false}}),
            Some("must be a Proxmox storage ID"),
        ),
        (
            "pinned machine version",
            json!({"machine": {"type": "q35", "version": "9.2+pve1"}}),
            None,
        ),
        (
            "machine version typo",
            json!({"machine": {"type": "q35", "version": "9"}}),
            Some("must be a QEMU machine version"),
        ),
        (
            "intel vIOMMU on i440fx",
            json!({"machine": {"type": "i440fx", "viommu": "intel"}}),
            Some("the Intel vIOMMU needs machine type q35"),
        ),
        (
            "serial console",
            json!({"serialPorts": [{"slot": "serial0", "device": "socket"}], "vga": {"type": "serial0"}}),
            None,
        ),
        (
            "serial slot out of range",
            json!({"serialPorts": [{"slot": "serial4", "device": "socket"}]}),
            Some("slot must be serial0 ... serial3"),
        ),
        (
            "serial device",
            json!({"serialPorts": [{"slot": "serial1", "device": "tty0"}]}),
            Some("serialPorts device must be socket or a device name under /dev/"),
        ),
        (
            "serial device by id",
            json!({"serialPorts": [{"slot": "serial1", "device": "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A1-if00-port0"}]}),
            None,
        ),
        (
            "serial device leaving /dev",
            json!({"serialPorts": [{"slot": "serial1", "device": "/dev/../etc/shadow"}]}),
            Some("serialPorts device must be socket or a device name under /dev/"),
        ),
        (
            "serial device with a . part",
            json!({"serialPorts": [{"slot": "serial1", "device": "/dev/./ttyS0"}]}),
            Some("serialPorts device must be socket or a device name under /dev/"),
        ),
        (
            "serial device with an empty part",
            json!({"serialPorts": [{"slot": "serial1", "device": "/dev/serial//x"}]}),
            Some("serialPorts device must be socket or a device name under /dev/"),
        ),
        (
            "gpu by mapping",
            json!({"machine": {"type": "q35"}, "pciDevices": [{"slot": "hostpci0", "mapping": "gpu", "pcie": true, "primaryGpu": true}]}),
            None,
        ),
        (
            "pcie on i440fx",
            json!({"pciDevices": [{"slot": "hostpci0", "mapping": "gpu", "pcie": true}]}),
            Some("pcie passthrough needs machine type q35"),
        ),
        (
            "pci slot",
            json!({"pciDevices": [{"slot": "hostpci16", "mapping": "gpu"}]}),
            Some("slot must be hostpci0 ... hostpci15"),
        ),
        (
            "mapping name",
            json!({"usbDevices": [{"slot": "usb0", "mapping": "1-token"}]}),
            Some("must be a resource mapping ID"),
        ),
        (
            "usb slot",
            json!({"usbDevices": [{"slot": "usb14", "mapping": "token"}]}),
            Some("slot must be usb0 ... usb13"),
        ),
        (
            "cpu flags",
            json!({"cpu": {"cores": 2, "sockets": 1, "type": "host", "flags": ["+aes", "-pcid", "+nested-virt"], "numa": true}}),
            None,
        ),
        (
            "a flag Proxmox refuses per VM",
            json!({"cpu": {"cores": 1, "sockets": 1, "flags": ["+avx512f"]}}),
            Some("each flag is + or - followed by one Proxmox allows"),
        ),
        (
            "a flag without sign",
            json!({"cpu": {"cores": 1, "sockets": 1, "flags": ["aes"]}}),
            Some("each flag is + or - followed by one Proxmox allows"),
        ),
        (
            "memory hotplug without numa",
            json!({"cpu": {"cores": 1, "sockets": 1}, "hotplug": ["memory", "cpu"]}),
            Some("memory hotplug needs cpu.numa: true"),
        ),
        (
            "memory hotplug with numa",
            json!({"cpu": {"cores": 1, "sockets": 1, "numa": true}, "hotplug": ["memory"]}),
            None,
        ),
        (
            "balloon within memory",
            json!({"memory": "4Gi", "balloon": {"enabled": true, "minimum": "1Gi"}}),
            None,
        ),
        (
            "balloon above memory",
            json!({"memory": "1Gi", "balloon": {"enabled": true, "minimum": "2Gi"}}),
            Some("balloon.minimum cannot be more than memory"),
        ),
        (
            "no balloon device",
            json!({"balloon": {"enabled": false}}),
            None,
        ),
        (
            "a minimum without the device",
            json!({"balloon": {"enabled": false, "minimum": "1Gi"}}),
            Some("minimum needs the balloon device"),
        ),
        (
            "template while running",
            json!({"powerState": "Running", "template": true}),
            Some("a template never runs"),
        ),
        ("template stopped", stopped(json!({"template": true})), None),
        (
            "protected with startup order",
            json!({"protection": true, "onBoot": true, "startup": {"order": 1, "up": 30, "down": 60}}),
            None,
        ),
    ];
    for (name, for_provider, want) in cases {
        let got = refusals(&schema, &vm(for_provider), None);
        assert_verdict(name, &got, want);
    }
}

#[test]
fn a_template_stays_a_template() {
    let schema = schema_of(ProxmoxVM::crd());
    let fp = |template: Option<bool>| {
        let mut fp = json!({"powerState": "Stopped"});
        if let Some(t) = template {
            fp["template"] = json!(t);
        }
        fp
    };
    // (case, old, new, verdict)
    let cases = [
        ("becomes a template", fp(None), fp(Some(true)), None),
        (
            "unset",
            fp(Some(true)),
            fp(Some(false)),
            Some("template cannot be unset"),
        ),
        (
            "removed",
            fp(Some(true)),
            fp(None),
            Some("template cannot be unset"),
        ),
        ("stays", fp(Some(true)), fp(Some(true)), None),
    ];
    for (name, old, new, want) in cases {
        let got = refusals(&schema, &vm(new), Some(&vm(old)));
        assert_verdict(name, &got, want);
    }
}
