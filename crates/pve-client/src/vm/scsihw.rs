//! The SCSI controller (`scsihw`).

use std::fmt;
use std::str::FromStr;

use crate::vm::value::InvalidValue;

/// SCSI controller models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScsiHw {
    /// PVE's default.
    Lsi,
    Lsi53c810,
    VirtioScsiPci,
    /// One controller per disk (what iothreads need).
    VirtioScsiSingle,
    Megasas,
    Pvscsi,
}

impl ScsiHw {
    /// Every controller.
    pub const ALL: [ScsiHw; 6] = [
        ScsiHw::Lsi,
        ScsiHw::Lsi53c810,
        ScsiHw::VirtioScsiPci,
        ScsiHw::VirtioScsiSingle,
        ScsiHw::Megasas,
        ScsiHw::Pvscsi,
    ];

    /// The name PVE uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ScsiHw::Lsi => "lsi",
            ScsiHw::Lsi53c810 => "lsi53c810",
            ScsiHw::VirtioScsiPci => "virtio-scsi-pci",
            ScsiHw::VirtioScsiSingle => "virtio-scsi-single",
            ScsiHw::Megasas => "megasas",
            ScsiHw::Pvscsi => "pvscsi",
        }
    }
}

impl FromStr for ScsiHw {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ScsiHw::ALL
            .into_iter()
            .find(|h| h.as_str() == s)
            .ok_or_else(|| InvalidValue::new("scsihw", s, "not a controller PVE knows"))
    }
}

impl fmt::Display for ScsiHw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back() {
        for hw in ScsiHw::ALL {
            assert_eq!(hw.to_string().parse(), Ok(hw));
        }
        assert!("virtio".parse::<ScsiHw>().is_err());
    }
}
