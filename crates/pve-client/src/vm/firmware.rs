//! Firmware and machine: `bios`, `machine` (`pve-qm-machine`), the EFI
//! vars disk `efidisk0` and the TPM state `tpmstate0`, after qemu-server's
//! `Machine.pm`, `OVMF.pm` and `Drive.pm`.
//!
//! `efidisk0` and `tpmstate0` are drive strings with their own options: a
//! create sends `local-lvm:1,efitype=4m,pre-enrolled-keys=1` (PVE ignores
//! the size and allocates what the firmware needs), the config then shows
//! `local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=1,size=528K` (PVE
//! 9 adds `ms-cert=2023k` when it enrolled the 2023 Microsoft keys).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::vm::drive::Drive;
use crate::vm::propstring::{self, Format};
use crate::vm::value::{InvalidValue, bool_text, parse_bool};

/// `bios`: SeaBIOS (PVE's default) or OVMF (UEFI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bios {
    SeaBios,
    Ovmf,
}

impl Bios {
    /// The value PVE uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Bios::SeaBios => "seabios",
            Bios::Ovmf => "ovmf",
        }
    }
}

impl FromStr for Bios {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "seabios" => Ok(Bios::SeaBios),
            "ovmf" => Ok(Bios::Ovmf),
            _ => Err(InvalidValue::new("bios", s, "not seabios or ovmf")),
        }
    }
}

impl fmt::Display for Bios {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The chipset of a machine type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chipset {
    /// `pc`, `pc-i440fx-<version>` (PVE's default on x86_64).
    I440fx,
    /// `q35`, `pc-q35-<version>`.
    Q35,
    /// `virt`, `virt-<version>` (aarch64).
    Virt,
}

/// A QEMU machine type: chipset, pinned version (`9.2`, `8.1+pve1`; none:
/// the newest the node runs), and the `.pxe` variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineType {
    pub chipset: Chipset,
    pub version: Option<String>,
    pub pxe: bool,
}

impl MachineType {
    /// The newest machine of a chipset.
    pub fn latest(chipset: Chipset) -> Self {
        Self {
            chipset,
            version: None,
            pxe: false,
        }
    }

    /// Whether the version is `<major>.<minor>[.<n>...]` with an optional
    /// `+pve<n>` revision, as PVE's pattern has it.
    fn valid_version(v: &str) -> bool {
        let (base, rev) = match v.split_once("+pve") {
            Some((base, rev)) => (base, Some(rev)),
            None => (v, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let parts: Vec<&str> = base.split('.').collect();
        parts.len() >= 2 && parts.iter().all(|p| digits(p)) && rev.is_none_or(digits)
    }

    /// The version without its `+pve<n>` revision (`9.2+pve1` → `9.2`).
    pub fn base_version(&self) -> Option<&str> {
        self.version
            .as_deref()
            .map(|v| v.split_once("+pve").map_or(v, |(base, _)| base))
    }
}

impl FromStr for MachineType {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| InvalidValue::new("machine type", s, reason);
        let (name, pxe) = match s.strip_suffix(".pxe") {
            Some(name) => (name, true),
            None => (s, false),
        };
        let (chipset, version) = match name {
            "pc" => (Chipset::I440fx, None),
            "q35" => (Chipset::Q35, None),
            "virt" => (Chipset::Virt, None),
            _ => {
                let (chipset, v) = if let Some(v) = name.strip_prefix("pc-i440fx-") {
                    (Chipset::I440fx, v)
                } else if let Some(v) = name.strip_prefix("pc-q35-") {
                    (Chipset::Q35, v)
                } else if let Some(v) = name.strip_prefix("virt-") {
                    (Chipset::Virt, v)
                } else if let Some(v) = name.strip_prefix("pc-") {
                    // `pc-<version>` is the old spelling of i440fx.
                    (Chipset::I440fx, v)
                } else {
                    return Err(err("not pc, q35 or virt (with an optional version)"));
                };
                if !Self::valid_version(v) {
                    return Err(err("the version is not <major>.<minor>[+pve<n>]"));
                }
                (chipset, Some(v.to_owned()))
            }
        };
        if pxe && (chipset == Chipset::Virt || version.is_none()) {
            return Err(err("only a versioned pc or q35 machine has a .pxe variant"));
        }
        Ok(Self {
            chipset,
            version,
            pxe,
        })
    }
}

impl fmt::Display for MachineType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.chipset, &self.version) {
            (Chipset::I440fx, None) => f.write_str("pc")?,
            (Chipset::I440fx, Some(v)) => write!(f, "pc-i440fx-{v}")?,
            (Chipset::Q35, None) => f.write_str("q35")?,
            (Chipset::Q35, Some(v)) => write!(f, "pc-q35-{v}")?,
            (Chipset::Virt, None) => f.write_str("virt")?,
            (Chipset::Virt, Some(v)) => write!(f, "virt-{v}")?,
        }
        if self.pxe {
            f.write_str(".pxe")?;
        }
        Ok(())
    }
}

/// The guest vIOMMU (`viommu=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Viommu {
    Intel,
    Virtio,
}

impl Viommu {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "intel" => Some(Self::Intel),
            "virtio" => Some(Self::Virtio),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Intel => "intel",
            Self::Virtio => "virtio",
        }
    }
}

const MACHINE: Format = Format {
    what: "machine",
    default_key: Some("type"),
    aliases: &[],
};

/// `machine`: `q35`, `pc-q35-9.2+pve1,viommu=intel`, ... Absent, PVE runs
/// the newest i440fx machine (and pins a Windows guest's version when it
/// is created).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    pub type_: Option<MachineType>,
    pub viommu: Option<Viommu>,
    /// `aw-bits`, `enable-s3`, `enable-s4`, ... as written.
    pub options: BTreeMap<String, String>,
}

impl Machine {
    /// The chipset the VM runs (i440fx when no type is set).
    pub fn chipset(&self) -> Chipset {
        self.type_.as_ref().map_or(Chipset::I440fx, |t| t.chipset)
    }
}

impl FromStr for Machine {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = MACHINE.parse(s)?;
        let err = |reason: String| InvalidValue::new("machine", s, reason);
        let type_ = p
            .default
            .take()
            .map(|t| t.parse::<MachineType>())
            .transpose()
            .map_err(|e| err(e.reason))?;
        Ok(Self {
            type_,
            viommu: p.take_with("viommu", Viommu::parse).map_err(err)?,
            options: p.pairs,
        })
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs = self.options.clone();
        if let Some(v) = self.viommu {
            pairs.insert("viommu".into(), v.as_str().into());
        }
        let type_ = self.type_.as_ref().map(ToString::to_string);
        f.write_str(&propstring::render(type_.as_deref(), &pairs))
    }
}

/// The OVMF vars layout (`efitype=`). PVE's default is `2m`; Secure Boot
/// needs `4m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EfiType {
    TwoMb,
    FourMb,
}

impl EfiType {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "2m" => Some(Self::TwoMb),
            "4m" => Some(Self::FourMb),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::TwoMb => "2m",
            Self::FourMb => "4m",
        }
    }
}

/// Takes a drive's `media` out: `efidisk0` and `tpmstate0` have none.
fn no_media(drive: &Drive, what: &'static str, s: &str) -> Result<(), InvalidValue> {
    match drive.media {
        None => Ok(()),
        Some(_) => Err(InvalidValue::new(what, s, "media is not an option")),
    }
}

/// `efidisk0`: the volume holding the OVMF vars, its layout and whether
/// the Microsoft Secure Boot keys were enrolled when it was created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EfiDisk {
    /// The volume (`file`, `size`, `import-from`, and `format`, `ms-cert`
    /// among its options).
    pub drive: Drive,
    pub efitype: Option<EfiType>,
    pub pre_enrolled_keys: Option<bool>,
}

impl EfiDisk {
    /// A new EFI disk on `storage` (PVE allocates what the vars need).
    pub fn alloc(storage: &str, efitype: EfiType, pre_enrolled_keys: bool) -> Self {
        Self {
            drive: Drive::alloc(storage, 1),
            efitype: Some(efitype),
            pre_enrolled_keys: Some(pre_enrolled_keys),
        }
    }

    /// The layout PVE uses when none is written.
    pub fn efitype_or_default(&self) -> EfiType {
        self.efitype.unwrap_or(EfiType::TwoMb)
    }

    /// Whether the Secure Boot keys were enrolled (PVE's default: no).
    pub fn keys_enrolled(&self) -> bool {
        self.pre_enrolled_keys.unwrap_or(false)
    }
}

impl FromStr for EfiDisk {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut drive = Drive::parse(s).map_err(|e| InvalidValue::new("efidisk", s, e.reason))?;
        no_media(&drive, "efidisk", s)?;
        let err = |reason: String| InvalidValue::new("efidisk", s, reason);
        let mut take = |key: &str| drive.options.remove(key);
        let efitype = take("efitype")
            .map(|v| EfiType::parse(&v).ok_or_else(|| err(format!("efitype={v} is not valid"))))
            .transpose()?;
        let keys = take("pre-enrolled-keys")
            .map(|v| {
                parse_bool(&v).ok_or_else(|| err(format!("pre-enrolled-keys={v} is no boolean")))
            })
            .transpose()?;
        Ok(Self {
            drive,
            efitype,
            pre_enrolled_keys: keys,
        })
    }
}

impl fmt::Display for EfiDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut drive = self.drive.clone();
        if let Some(t) = self.efitype {
            drive.options.insert("efitype".into(), t.as_str().into());
        }
        if let Some(k) = self.pre_enrolled_keys {
            drive
                .options
                .insert("pre-enrolled-keys".into(), bool_text(k).into());
        }
        drive.fmt(f)
    }
}

/// The TPM interface (`version=`). PVE's default is `v1.2`; Windows 11
/// needs `v2.0`. It cannot change once the state exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TpmVersion {
    V1_2,
    V2_0,
}

impl TpmVersion {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "v1.2" => Some(Self::V1_2),
            "v2.0" => Some(Self::V2_0),
            _ => None,
        }
    }

    /// The value PVE uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1_2 => "v1.2",
            Self::V2_0 => "v2.0",
        }
    }
}

/// `tpmstate0`: the volume holding a software TPM's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TpmState {
    pub drive: Drive,
    pub version: Option<TpmVersion>,
}

impl TpmState {
    /// A new TPM state on `storage` (PVE allocates 4 MiB).
    pub fn alloc(storage: &str, version: TpmVersion) -> Self {
        Self {
            drive: Drive::alloc(storage, 1),
            version: Some(version),
        }
    }

    /// The version PVE uses when none is written.
    pub fn version_or_default(&self) -> TpmVersion {
        self.version.unwrap_or(TpmVersion::V1_2)
    }
}

impl FromStr for TpmState {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut drive = Drive::parse(s).map_err(|e| InvalidValue::new("tpmstate", s, e.reason))?;
        no_media(&drive, "tpmstate", s)?;
        let version = drive
            .options
            .remove("version")
            .map(|v| {
                TpmVersion::parse(&v).ok_or_else(|| {
                    InvalidValue::new("tpmstate", s, format!("version={v} is not valid"))
                })
            })
            .transpose()?;
        Ok(Self { drive, version })
    }
}

impl fmt::Display for TpmState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut drive = self.drive.clone();
        if let Some(v) = self.version {
            drive.options.insert("version".into(), v.as_str().into());
        }
        drive.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_types_as_pve_spells_them() {
        let cases = [
            ("pc", Chipset::I440fx, None, "pc"),
            ("q35", Chipset::Q35, None, "q35"),
            (
                "pc-q35-9.2+pve1",
                Chipset::Q35,
                Some("9.2+pve1"),
                "pc-q35-9.2+pve1",
            ),
            (
                "pc-i440fx-8.1",
                Chipset::I440fx,
                Some("8.1"),
                "pc-i440fx-8.1",
            ),
            ("pc-8.1", Chipset::I440fx, Some("8.1"), "pc-i440fx-8.1"),
            ("virt-9.0", Chipset::Virt, Some("9.0"), "virt-9.0"),
        ];
        for (text, chipset, version, shown) in cases {
            let t: MachineType = text.parse().unwrap();
            assert_eq!(
                (t.chipset, t.version.as_deref()),
                (chipset, version),
                "{text}"
            );
            assert_eq!(t.to_string(), shown);
        }
        let pxe: MachineType = "pc-q35-8.1.pxe".parse().unwrap();
        assert!(pxe.pxe && pxe.base_version() == Some("8.1"));
        for bad in [
            "q36",
            "pc-q35-9",
            "pc-q35-x.1",
            "pc-q35-9.2+pvex",
            "virt-9.0.pxe",
            "q35.pxe",
            "",
        ] {
            assert!(bad.parse::<MachineType>().is_err(), "{bad}");
        }
        let m: Machine = "type=pc-q35-9.2+pve1,viommu=intel,aw-bits=39"
            .parse()
            .unwrap();
        assert_eq!(m.chipset(), Chipset::Q35);
        assert_eq!(m.viommu, Some(Viommu::Intel));
        assert_eq!(m.to_string(), "pc-q35-9.2+pve1,aw-bits=39,viommu=intel");
        assert_eq!(Machine::default().chipset(), Chipset::I440fx);
        assert!("q35,viommu=amd".parse::<Machine>().is_err());
    }

    #[test]
    fn firmware_volumes() {
        let efi: EfiDisk =
            "local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=528K"
                .parse()
                .unwrap();
        assert_eq!(efi.efitype, Some(EfiType::FourMb));
        assert!(efi.keys_enrolled());
        assert_eq!(efi.drive.size, Some(528 << 10));
        assert_eq!(efi.drive.options["ms-cert"], "2023k");
        assert_eq!(
            EfiDisk::alloc("local-lvm", EfiType::FourMb, true).to_string(),
            "local-lvm:1,efitype=4m,pre-enrolled-keys=1"
        );
        let old: EfiDisk = "local:100/vm-100-disk-1.qcow2,size=128K".parse().unwrap();
        assert_eq!(
            (old.efitype_or_default(), old.keys_enrolled()),
            (EfiType::TwoMb, false)
        );
        assert!("local-lvm:1,efitype=8m".parse::<EfiDisk>().is_err());
        assert!("local-lvm:1,media=cdrom".parse::<EfiDisk>().is_err());

        let tpm: TpmState = "local-lvm:vm-100-disk-2,size=4M,version=v2.0"
            .parse()
            .unwrap();
        assert_eq!(tpm.version, Some(TpmVersion::V2_0));
        assert_eq!(
            TpmState::alloc("local-lvm", TpmVersion::V2_0).to_string(),
            "local-lvm:1,version=v2.0"
        );
        let bare: TpmState = "local-lvm:vm-100-disk-2".parse().unwrap();
        assert_eq!(bare.version_or_default(), TpmVersion::V1_2);
        assert!("local-lvm:1,version=v3".parse::<TpmState>().is_err());
        assert_eq!("ovmf".parse(), Ok(Bios::Ovmf));
        assert!("uefi".parse::<Bios>().is_err());
    }
}
