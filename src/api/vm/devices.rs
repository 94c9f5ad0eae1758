//! Devices: PCI and USB passthrough by cluster resource mapping, the VirtIO
//! RNG, and what may be hot-plugged.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A PCI device passed through by cluster resource mapping (`hostpciN:
/// mapping=<name>`). Datacenter → Resource Mappings in Proxmox names the
/// device on each node; setting it needs `Mapping.Use` on
/// `/mapping/pci/<name>` (not root). Changes apply at the VM's next start.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PciDevice {
    /// Slot: `hostpci0` ... `hostpci15`.
    #[schemars(length(max = 9))]
    #[x_kube(validation = Rule::new("self.matches('^hostpci([0-9]|1[0-5])$')")
        .message("slot must be hostpci0 ... hostpci15"))]
    pub slot: String,
    /// The PCI resource mapping's name.
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[a-zA-Z][a-zA-Z0-9_-]*$')")
        .message("must be a resource mapping ID (a letter, then letters, digits, - and _)"))]
    pub mapping: String,
    /// As a PCI Express device (needs machine type q35).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<bool>,
    /// The guest's primary GPU (`x-vga`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_gpu: Option<bool>,
    /// Expose the device's ROM to the guest (Proxmox's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rombar: Option<bool>,
}

/// A USB device passed through by cluster resource mapping (`usbN:
/// mapping=<name>`, `Mapping.Use` on `/mapping/usb/<name>`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct UsbDevice {
    /// Slot: `usb0` ... `usb13`.
    #[schemars(length(max = 5))]
    #[x_kube(validation = Rule::new("self.matches('^usb([0-9]|1[0-3])$')")
        .message("slot must be usb0 ... usb13"))]
    pub slot: String,
    /// The USB resource mapping's name.
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[a-zA-Z][a-zA-Z0-9_-]*$')")
        .message("must be a resource mapping ID (a letter, then letters, digits, - and _)"))]
    pub mapping: String,
    /// A USB 3 device (irrelevant for Linux and Windows 8+ guests on
    /// machine versions 7.1 and later, where every device is on xHCI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usb3: Option<bool>,
}

/// A VirtIO random number generator (`rng0`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rng {
    /// The host's entropy source. `/dev/hwrng` needs `Mapping.Use` on
    /// `/mapping/hwrng`.
    #[serde(default)]
    pub source: RngSource,
    /// Bytes the guest may read per `periodMs` (Proxmox's default 1024; 0:
    /// no limit, not recommended with `/dev/random`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// The period of `maxBytes` in milliseconds (Proxmox's default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub period_ms: Option<u64>,
}

/// Entropy sources.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum RngSource {
    /// `/dev/urandom` (recommended).
    #[default]
    #[serde(rename = "/dev/urandom")]
    Urandom,
    /// `/dev/random`.
    #[serde(rename = "/dev/random")]
    Random,
    /// `/dev/hwrng`: the host's hardware RNG.
    #[serde(rename = "/dev/hwrng")]
    Hwrng,
}

/// What Proxmox may hot-plug into the running VM.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HotplugFeature {
    /// Network cards.
    Network,
    /// Disks (SCSI and VirtIO).
    Disk,
    /// CPUs (`vcpus`).
    Cpu,
    /// Memory (needs `cpu.numa`).
    Memory,
    /// USB devices.
    Usb,
    /// The cloud-init drive.
    Cloudinit,
}
