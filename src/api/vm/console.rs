//! The console: serial ports and the display.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A serial port (`serial0`..`serial3`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SerialPort {
    /// Slot: `serial0` ... `serial3`.
    #[schemars(length(max = 7))]
    #[x_kube(validation = Rule::new("self.matches('^serial[0-3]$')")
        .message("slot must be serial0 ... serial3"))]
    pub slot: String,
    /// `socket` (default): a port the web console (xterm.js) and `qm
    /// terminal` attach to. A host device such as `/dev/ttyS0` needs root:
    /// `/dev/` and names of letters, digits, `.`, `_` and `-` separated by
    /// `/` (no empty, `.` or `..` parts).
    #[serde(default = "socket")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(SERIAL_DEVICE)
        .message("serialPorts device must be socket or a device name under /dev/ such as /dev/ttyS0 (letters, digits, . _ - and /, no empty, . or .. parts)"))]
    pub device: String,
}

/// `socket`, or `/dev/` and path parts of `[A-Za-z0-9._-]` that are not
/// only dots (checked again by the plan: `plan::tenancy`).
const SERIAL_DEVICE: &str = "self == 'socket' || self.matches('^/dev/[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*)*$')";

fn socket() -> String {
    "socket".into()
}

/// The display adapter (`vga`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Vga {
    /// Adapter type. `serial0` (with `serialPorts: [{slot: serial0}]`) has
    /// no graphics card and makes the serial port the console.
    #[serde(rename = "type")]
    pub type_: VgaType,
    /// Video memory in MiB (4-512); no effect with a serial console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 4, max = 512))]
    pub memory: Option<u32>,
}

/// Display adapter types.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VgaType {
    /// Standard VGA (Proxmox's default).
    #[serde(rename = "std")]
    Std,
    /// The serial port `serial0` is the console; no graphics card.
    #[serde(rename = "serial0")]
    Serial0,
    /// `serial1` is the console.
    #[serde(rename = "serial1")]
    Serial1,
    /// `serial2` is the console.
    #[serde(rename = "serial2")]
    Serial2,
    /// `serial3` is the console.
    #[serde(rename = "serial3")]
    Serial3,
    /// VirtIO GPU.
    #[serde(rename = "virtio")]
    Virtio,
    /// VirtIO GPU with VirGL.
    #[serde(rename = "virtio-gl")]
    VirtioGl,
    /// SPICE (QXL).
    #[serde(rename = "qxl")]
    Qxl,
    /// SPICE, two monitors.
    #[serde(rename = "qxl2")]
    Qxl2,
    /// SPICE, three monitors.
    #[serde(rename = "qxl3")]
    Qxl3,
    /// SPICE, four monitors.
    #[serde(rename = "qxl4")]
    Qxl4,
    /// VMware compatible.
    #[serde(rename = "vmware")]
    Vmware,
    /// Cirrus (not recommended).
    #[serde(rename = "cirrus")]
    Cirrus,
    /// No display.
    #[serde(rename = "none")]
    None,
}

impl VgaType {
    /// The value of `vga`'s `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Std => "std",
            Self::Serial0 => "serial0",
            Self::Serial1 => "serial1",
            Self::Serial2 => "serial2",
            Self::Serial3 => "serial3",
            Self::Virtio => "virtio",
            Self::VirtioGl => "virtio-gl",
            Self::Qxl => "qxl",
            Self::Qxl2 => "qxl2",
            Self::Qxl3 => "qxl3",
            Self::Qxl4 => "qxl4",
            Self::Vmware => "vmware",
            Self::Cirrus => "cirrus",
            Self::None => "none",
        }
    }
}
