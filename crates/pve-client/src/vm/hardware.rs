//! The virtual hardware settings of [`super::VmParams`]: firmware, machine,
//! console and devices, kept together so the settings struct stays small.

use std::collections::BTreeMap;

use crate::vm::value::bool_text;
use crate::vm::{Bios, EfiDisk, HostPci, Hotplug, Machine, Rng, SerialPort, TpmState, Usb, Vga};

/// Virtual hardware for create and config updates. `None` (or an empty
/// map) leaves a key out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hardware {
    pub bios: Option<Bios>,
    pub machine: Option<Machine>,
    pub efidisk0: Option<EfiDisk>,
    pub tpmstate0: Option<TpmState>,
    /// `serialN` by N.
    pub serial: BTreeMap<u32, SerialPort>,
    pub vga: Option<Vga>,
    /// `hostpciN` by N.
    pub hostpci: BTreeMap<u32, HostPci>,
    /// `usbN` by N.
    pub usb: BTreeMap<u32, Usb>,
    pub numa: Option<bool>,
    /// Balloon target in MiB; 0 removes the balloon device.
    pub balloon: Option<u64>,
    pub hotplug: Option<Hotplug>,
    pub rng0: Option<Rng>,
}

impl Hardware {
    /// The keys and values that are set.
    pub(crate) fn pairs(&self) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = [
            ("bios", self.bios.map(|b| b.to_string())),
            ("machine", self.machine.as_ref().map(ToString::to_string)),
            ("efidisk0", self.efidisk0.as_ref().map(ToString::to_string)),
            (
                "tpmstate0",
                self.tpmstate0.as_ref().map(ToString::to_string),
            ),
            ("vga", self.vga.as_ref().map(ToString::to_string)),
            ("numa", self.numa.map(|b| bool_text(b).to_owned())),
            ("balloon", self.balloon.map(|b| b.to_string())),
            ("hotplug", self.hotplug.as_ref().map(ToString::to_string)),
            ("rng0", self.rng0.as_ref().map(ToString::to_string)),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_owned(), v?)))
        .collect();
        out.extend(
            self.serial
                .iter()
                .map(|(i, s)| (format!("serial{i}"), s.to_string())),
        );
        out.extend(
            self.hostpci
                .iter()
                .map(|(i, d)| (format!("hostpci{i}"), d.to_string())),
        );
        out.extend(
            self.usb
                .iter()
                .map(|(i, d)| (format!("usb{i}"), d.to_string())),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::{EfiType, TpmVersion, VgaType};

    #[test]
    fn hardware_encodes_every_key() {
        let mut hw = Hardware {
            bios: Some(Bios::Ovmf),
            machine: Some("q35".parse().unwrap()),
            efidisk0: Some(EfiDisk::alloc("local-lvm", EfiType::FourMb, true)),
            tpmstate0: Some(TpmState::alloc("local-lvm", TpmVersion::V2_0)),
            vga: Some(Vga::of(VgaType::Serial(0))),
            numa: Some(true),
            balloon: Some(0),
            hotplug: Some(Hotplug::none()),
            rng0: Some("/dev/urandom".parse().unwrap()),
            ..Hardware::default()
        };
        hw.serial.insert(0, SerialPort::Socket);
        hw.hostpci.insert(1, HostPci::mapped("gpu"));
        hw.usb.insert(2, Usb::mapped("token"));
        let pairs = hw.pairs();
        let get = |k: &str| pairs.get(k).map(String::as_str);
        assert_eq!(get("bios"), Some("ovmf"));
        assert_eq!(get("machine"), Some("q35"));
        assert_eq!(
            get("efidisk0"),
            Some("local-lvm:1,efitype=4m,pre-enrolled-keys=1")
        );
        assert_eq!(get("tpmstate0"), Some("local-lvm:1,version=v2.0"));
        assert_eq!(get("serial0"), Some("socket"));
        assert_eq!(get("vga"), Some("serial0"));
        assert_eq!(get("hostpci1"), Some("mapping=gpu"));
        assert_eq!(get("usb2"), Some("mapping=token"));
        assert_eq!(
            (get("numa"), get("balloon"), get("hotplug")),
            (Some("1"), Some("0"), Some("0"))
        );
        assert_eq!(get("rng0"), Some("/dev/urandom"));
        assert!(Hardware::default().pairs().is_empty());
    }
}
