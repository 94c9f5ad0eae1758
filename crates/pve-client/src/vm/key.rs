//! Numbered config keys: drive slots (`scsi0`, `ide2`), NICs (`net0`) and
//! their cloud-init addresses (`ipconfig0`).

use std::fmt;
use std::str::FromStr;

use crate::vm::value::{InvalidValue, indexed};

/// NICs a VM can have (`net0` ... `net31`), and as many `ipconfigN`.
pub const MAX_NETS: u32 = 32;

/// A disk bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bus {
    Ide,
    Sata,
    Scsi,
    Virtio,
}

impl Bus {
    /// Every bus.
    pub const ALL: [Bus; 4] = [Bus::Ide, Bus::Sata, Bus::Scsi, Bus::Virtio];

    /// The key prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            Bus::Ide => "ide",
            Bus::Sata => "sata",
            Bus::Scsi => "scsi",
            Bus::Virtio => "virtio",
        }
    }

    /// How many drives the bus takes (qemu-server's `$MAX_*_DISKS`).
    pub fn slots(self) -> u32 {
        match self {
            Bus::Ide => 4,
            Bus::Sata => 6,
            Bus::Scsi => 31,
            Bus::Virtio => 16,
        }
    }
}

/// A drive slot on a bus: `ide0`..`ide3`, `sata0`..`sata5`,
/// `scsi0`..`scsi30`, `virtio0`..`virtio15`. (`efidisk0`, `tpmstate0` and
/// `unusedN` hold volumes too, but are not drive slots.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriveKey {
    pub bus: Bus,
    pub index: u32,
}

impl DriveKey {
    /// `bus<index>`, if the bus has that slot.
    pub fn new(bus: Bus, index: u32) -> Option<Self> {
        (index < bus.slots()).then_some(Self { bus, index })
    }
}

impl FromStr for DriveKey {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Bus::ALL
            .iter()
            .find_map(|bus| {
                indexed(s, bus.as_str(), bus.slots()).map(|index| Self { bus: *bus, index })
            })
            .ok_or_else(|| InvalidValue::new("drive slot", s, "not a drive slot of a bus"))
    }
}

impl fmt::Display for DriveKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.bus.as_str(), self.index)
    }
}

/// The index of a NIC key (`net3` → 3).
pub fn net_index(key: &str) -> Option<u32> {
    indexed(key, "net", MAX_NETS)
}

/// The key of NIC `index` (3 → `net3`).
pub fn net_key(index: u32) -> String {
    format!("net{index}")
}

/// The index of an `ipconfigN` key.
pub fn ipconfig_index(key: &str) -> Option<u32> {
    indexed(key, "ipconfig", MAX_NETS)
}

/// The key of the addresses of NIC `index` (3 → `ipconfig3`).
pub fn ipconfig_key(index: u32) -> String {
    format!("ipconfig{index}")
}

/// Whether a config key holds a volume: a drive slot, `efidisk0`,
/// `tpmstate0` or `unusedN`.
pub fn is_disk_key(key: &str) -> bool {
    key.parse::<DriveKey>().is_ok()
        || key == "efidisk0"
        || key == "tpmstate0"
        || indexed(key, "unused", 256).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drive_slots_as_qemu_server_numbers_them() {
        for k in ["ide0", "ide3", "sata5", "scsi0", "scsi30", "virtio15"] {
            let key: DriveKey = k.parse().unwrap();
            assert_eq!(key.to_string(), k);
        }
        for k in [
            "ide4", "sata6", "scsi31", "virtio16", "scsi", "scsihw", "net0", "scsi01",
        ] {
            assert!(k.parse::<DriveKey>().is_err(), "{k}");
        }
        assert!(DriveKey::new(Bus::Ide, 2).is_some() && DriveKey::new(Bus::Ide, 4).is_none());
    }

    #[test]
    fn disk_keys() {
        for k in [
            "scsi0",
            "virtio15",
            "ide2",
            "efidisk0",
            "tpmstate0",
            "unused3",
        ] {
            assert!(is_disk_key(k), "{k}");
        }
        for k in [
            "scsi",
            "scsihw",
            "net0",
            "ipconfig0",
            "efidisk1",
            "unused256",
        ] {
            assert!(!is_disk_key(k), "{k}");
        }
        assert_eq!(net_index(&net_key(7)), Some(7));
        assert_eq!(ipconfig_index(&ipconfig_key(7)), Some(7));
        assert_eq!(ipconfig_index("ipconfig31"), Some(31));
        assert_eq!(ipconfig_index("ipconfig32"), None);
    }
}
