//! The virtual hardware of `spec.forProvider` (flattened into it): firmware,
//! machine, console and devices.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::{
    Bios, EfiDisk, HotplugFeature, Machine, OsType, PciDevice, Rng, SerialPort, TpmState,
    UsbDevice, Vga,
};
use crate::api::quantity::Quantity;

/// Firmware, machine, console and devices. Fields left out are not
/// managed. Proxmox applies most of them at the VM's next start; until
/// then they are listed in `status.atProvider.pendingChanges`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Hardware {
    /// Firmware: `SeaBIOS` (Proxmox's default) or `OVMF` (UEFI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bios: Option<Bios>,

    /// The UEFI vars disk (`efidisk0`); needs `bios: OVMF`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efi_disk: Option<EfiDisk>,

    /// QEMU machine type. Left out: not managed (Proxmox's default is the
    /// newest i440fx).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,

    /// A software TPM (`tpmstate0`), e.g. for Windows 11.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm_state: Option<TpmState>,

    /// Guest OS type (`ostype`); Proxmox tunes the VM for it (Hyper-V
    /// enlightenments for Windows, for one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<OsType>,

    /// Serial ports, by slot. Cloud images want `serial0` (and `vga:
    /// {type: serial0}`): they log to it, and Debian 12 and Ubuntu cloud
    /// images can panic at boot after their disk was grown when the VM has
    /// no serial port. Ports removed from this list are left on the VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["slot".into()]))]
    pub serial_ports: Vec<SerialPort>,

    /// The display adapter (`vga`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vga: Option<Vga>,

    /// PCI devices passed through by cluster resource mapping, by slot.
    /// Devices removed from this list are left on the VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["slot".into()]))]
    pub pci_devices: Vec<PciDevice>,

    /// USB devices passed through by cluster resource mapping, by slot.
    /// Devices removed from this list are left on the VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 14))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["slot".into()]))]
    pub usb_devices: Vec<UsbDevice>,

    /// A VirtIO random number generator (`rng0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rng: Option<Rng>,

    /// What Proxmox may hot-plug into the running VM; `[]` turns hot-plug
    /// off. Left out: not managed (Proxmox's default is network, disk,
    /// usb).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 6))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub hotplug: Option<Vec<HotplugFeature>>,

    /// Memory ballooning. Left out: not managed (Proxmox's default is a
    /// balloon device that never takes memory away).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balloon: Option<Balloon>,
}

/// The balloon device (`balloon`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.enabled || !has(self.minimum)")
    .message("minimum needs the balloon device (enabled: true)"))]
pub struct Balloon {
    /// The balloon device (and the memory statistics it reports). `false`
    /// removes it (`balloon: 0`), e.g. for PCI passthrough.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The least memory the balloon may leave the guest when the host
    /// runs short (a quantity, rounded up to MiB; at most `memory`). Left
    /// out: `memory`, so the guest never loses memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<Quantity>,
}

fn yes() -> bool {
    true
}
