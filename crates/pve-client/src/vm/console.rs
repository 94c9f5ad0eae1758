//! The console: serial ports (`serialN`) and the display (`vga`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::vm::propstring::{self, Format};
use crate::vm::value::{InvalidValue, indexed};

/// Serial ports a VM can have (`serial0` ... `serial3`).
pub const MAX_SERIALS: u32 = 4;

/// The index of a `serialN` key.
pub fn serial_index(key: &str) -> Option<u32> {
    indexed(key, "serial", MAX_SERIALS)
}

/// `serialN`: a socket (`qm terminal`, the web console's xterm.js) or a
/// host device (root only). qemu-server's pattern is `(/dev/.+|socket)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SerialPort {
    Socket,
    /// `/dev/ttyS0`, ...
    Device(String),
}

impl FromStr for SerialPort {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "socket" => Ok(Self::Socket),
            _ if s.len() > 5 && s.starts_with("/dev/") => Ok(Self::Device(s.to_owned())),
            _ => Err(InvalidValue::new("serial", s, "not socket or /dev/...")),
        }
    }
}

impl fmt::Display for SerialPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Socket => f.write_str("socket"),
            Self::Device(path) => f.write_str(path),
        }
    }
}

/// The display adapter (`vga`'s `type`). PVE's default is `std`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VgaType {
    Cirrus,
    Qxl,
    Qxl2,
    Qxl3,
    Qxl4,
    None,
    /// No display card; the console is serial port N.
    Serial(u32),
    Std,
    Virtio,
    VirtioGl,
    Vmware,
}

impl VgaType {
    /// Every type with a fixed name (the serial ones are `serial0`..`serial3`).
    const NAMED: [(VgaType, &'static str); 10] = [
        (VgaType::Cirrus, "cirrus"),
        (VgaType::Qxl, "qxl"),
        (VgaType::Qxl2, "qxl2"),
        (VgaType::Qxl3, "qxl3"),
        (VgaType::Qxl4, "qxl4"),
        (VgaType::None, "none"),
        (VgaType::Std, "std"),
        (VgaType::Virtio, "virtio"),
        (VgaType::VirtioGl, "virtio-gl"),
        (VgaType::Vmware, "vmware"),
    ];
}

impl FromStr for VgaType {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(i) = serial_index(s) {
            return Ok(Self::Serial(i));
        }
        Self::NAMED
            .iter()
            .find(|(_, name)| *name == s)
            .map(|(t, _)| *t)
            .ok_or_else(|| InvalidValue::new("vga type", s, "not a display type PVE knows"))
    }
}

impl fmt::Display for VgaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Self::Serial(i) = self {
            return write!(f, "serial{i}");
        }
        let name = Self::NAMED
            .iter()
            .find(|(t, _)| t == self)
            .map_or("std", |(_, n)| n);
        f.write_str(name)
    }
}

const VGA: Format = Format {
    what: "vga",
    default_key: Some("type"),
    aliases: &[],
};

/// `vga`: `serial0`, `std,memory=32`, `virtio,clipboard=vnc`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vga {
    pub type_: Option<VgaType>,
    /// MiB (4 to 512).
    pub memory: Option<u32>,
    /// `clipboard`, ... as written.
    pub options: BTreeMap<String, String>,
}

impl Vga {
    /// A display of `type_` and nothing else.
    pub fn of(type_: VgaType) -> Self {
        Self {
            type_: Some(type_),
            ..Self::default()
        }
    }

    /// The type the VM runs with (`std` when none is written).
    pub fn type_or_default(&self) -> VgaType {
        self.type_.unwrap_or(VgaType::Std)
    }
}

impl FromStr for Vga {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = VGA.parse(s)?;
        let err = |reason: String| InvalidValue::new("vga", s, reason);
        let type_ = p
            .default
            .take()
            .map(|t| t.parse::<VgaType>())
            .transpose()
            .map_err(|e| err(e.reason))?;
        let memory = p
            .take_with("memory", |m| {
                m.parse::<u32>().ok().filter(|m| (4..=512).contains(m))
            })
            .map_err(err)?;
        Ok(Self {
            type_,
            memory,
            options: p.pairs,
        })
    }
}

impl fmt::Display for Vga {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs = self.options.clone();
        if let Some(m) = self.memory {
            pairs.insert("memory".into(), m.to_string());
        }
        let type_ = self.type_.map(|t| t.to_string());
        f.write_str(&propstring::render(type_.as_deref(), &pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_ports_and_displays() {
        assert_eq!("socket".parse(), Ok(SerialPort::Socket));
        assert_eq!(
            "/dev/ttyS0".parse(),
            Ok(SerialPort::Device("/dev/ttyS0".into()))
        );
        for bad in ["", "sock", "/dev/", "tty"] {
            assert!(bad.parse::<SerialPort>().is_err(), "{bad}");
        }
        assert_eq!(serial_index("serial3"), Some(3));
        assert_eq!(serial_index("serial4"), None);

        let v: Vga = "serial0".parse().unwrap();
        assert_eq!(v, Vga::of(VgaType::Serial(0)));
        let v: Vga = "type=virtio,memory=64,clipboard=vnc".parse().unwrap();
        assert_eq!((v.type_, v.memory), (Some(VgaType::Virtio), Some(64)));
        assert_eq!(v.to_string(), "virtio,clipboard=vnc,memory=64");
        assert_eq!(Vga::default().type_or_default(), VgaType::Std);
        for bad in ["serial4", "vga", "std,memory=2", "std,memory=x"] {
            assert!(bad.parse::<Vga>().is_err(), "{bad}");
        }
    }
}
