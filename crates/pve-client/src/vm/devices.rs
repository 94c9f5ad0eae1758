//! Devices: PCI and USB passthrough (`hostpciN`, `usbN`, by host address
//! or by cluster resource mapping), the VirtIO RNG (`rng0`) and what can be
//! hot-plugged (`hotplug`).
//!
//! A device named by `mapping=` is resolved on the node the VM starts on,
//! and setting it needs `Mapping.Use` on `/mapping/pci/<name>` (or
//! `/mapping/usb/<name>`) instead of root, which a `host=` device needs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use crate::vm::propstring::{self, Format, PropString};
use crate::vm::value::{InvalidValue, bool_text, indexed, parse_bool, split_list};

/// PCI devices a VM can have (`hostpci0` ... `hostpci15`).
pub const MAX_HOSTPCI: u32 = 16;
/// USB devices a VM can have (`usb0` ... `usb13`).
pub const MAX_USB: u32 = 14;

/// The index of a `hostpciN` key.
pub fn hostpci_index(key: &str) -> Option<u32> {
    indexed(key, "hostpci", MAX_HOSTPCI)
}

/// The index of a `usbN` key.
pub fn usb_index(key: &str) -> Option<u32> {
    indexed(key, "usb", MAX_USB)
}

/// A mapping ID (`pve-configid`): a letter, then letters, digits, `-`, `_`.
fn is_config_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_'))
}

/// A passed-through device's source: `host` (the default key) or
/// `mapping`, at least one of them.
type Source = (Option<String>, Option<String>);

/// Takes the source out of a device's property string.
fn take_source(p: &mut PropString, what: &'static str, s: &str) -> Result<Source, InvalidValue> {
    let host = p.default.take();
    let mapping = p.take("mapping");
    if let Some(m) = mapping.as_ref().filter(|m| !is_config_id(m)) {
        let reason = format!("mapping={m} is not a mapping ID");
        return Err(InvalidValue::new(what, s, reason));
    }
    if host.is_none() && mapping.is_none() {
        return Err(InvalidValue::new(
            what,
            s,
            "either host or mapping must be set",
        ));
    }
    Ok((host, mapping))
}

/// Writes a device: its host bare and first, its mapping among `pairs`.
fn render_device(
    host: Option<&str>,
    mapping: Option<&str>,
    mut pairs: BTreeMap<String, String>,
) -> String {
    if let Some(m) = mapping {
        pairs.insert("mapping".into(), m.to_owned());
    }
    propstring::render(host, &pairs)
}

/// Inserts a flag into property pairs.
fn put_flag(pairs: &mut BTreeMap<String, String>, key: &str, value: Option<bool>) {
    if let Some(v) = value {
        pairs.insert(key.into(), bool_text(v).into());
    }
}

const HOSTPCI: Format = Format {
    what: "hostpci",
    default_key: Some("host"),
    aliases: &[],
};

/// `hostpciN`: a host PCI device (`host=0000:01:00.0`) or a cluster
/// mapping (`mapping=gpu`), with how it appears in the guest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostPci {
    /// Host address(es), as written (root only).
    pub host: Option<String>,
    /// Cluster resource mapping name.
    pub mapping: Option<String>,
    /// As a PCIe device (q35 only).
    pub pcie: Option<bool>,
    /// Expose the device ROM (PVE's default: yes).
    pub rombar: Option<bool>,
    /// The guest's primary GPU.
    pub x_vga: Option<bool>,
    /// `mdev`, `romfile`, `device-id`, ... as written.
    pub options: BTreeMap<String, String>,
}

impl HostPci {
    /// A device by mapping name, nothing else set.
    pub fn mapped(name: &str) -> Self {
        Self {
            mapping: Some(name.to_owned()),
            ..Self::default()
        }
    }
}

impl FromStr for HostPci {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = HOSTPCI.parse(s)?;
        let err = |reason: String| InvalidValue::new("hostpci", s, reason);
        let (host, mapping) = take_source(&mut p, "hostpci", s)?;
        Ok(Self {
            host,
            mapping,
            pcie: p.take_with("pcie", parse_bool).map_err(err)?,
            rombar: p.take_with("rombar", parse_bool).map_err(err)?,
            x_vga: p.take_with("x-vga", parse_bool).map_err(err)?,
            options: p.pairs,
        })
    }
}

impl fmt::Display for HostPci {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs = self.options.clone();
        put_flag(&mut pairs, "pcie", self.pcie);
        put_flag(&mut pairs, "rombar", self.rombar);
        put_flag(&mut pairs, "x-vga", self.x_vga);
        let text = render_device(self.host.as_deref(), self.mapping.as_deref(), pairs);
        f.write_str(&text)
    }
}

const USB: Format = Format {
    what: "usb",
    default_key: Some("host"),
    aliases: &[],
};

/// `usbN`: a host USB device or port, `spice`, or a cluster mapping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usb {
    pub host: Option<String>,
    pub mapping: Option<String>,
    pub usb3: Option<bool>,
    pub options: BTreeMap<String, String>,
}

impl Usb {
    /// A device by mapping name, nothing else set.
    pub fn mapped(name: &str) -> Self {
        Self {
            mapping: Some(name.to_owned()),
            ..Self::default()
        }
    }
}

impl FromStr for Usb {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = USB.parse(s)?;
        let err = |reason: String| InvalidValue::new("usb", s, reason);
        let (host, mapping) = take_source(&mut p, "usb", s)?;
        Ok(Self {
            host,
            mapping,
            usb3: p.take_with("usb3", parse_bool).map_err(err)?,
            options: p.pairs,
        })
    }
}

impl fmt::Display for Usb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs = self.options.clone();
        put_flag(&mut pairs, "usb3", self.usb3);
        let text = render_device(self.host.as_deref(), self.mapping.as_deref(), pairs);
        f.write_str(&text)
    }
}

/// Where the VirtIO RNG reads entropy on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RngSource {
    Urandom,
    Random,
    /// A hardware RNG (needs `Mapping.Use` on `/mapping/hwrng`).
    Hwrng,
}

impl RngSource {
    /// Every source.
    pub const ALL: [RngSource; 3] = [Self::Urandom, Self::Random, Self::Hwrng];

    /// The device path PVE uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Urandom => "/dev/urandom",
            Self::Random => "/dev/random",
            Self::Hwrng => "/dev/hwrng",
        }
    }
}

const RNG: Format = Format {
    what: "rng",
    default_key: Some("source"),
    aliases: &[],
};

/// `rng0`: `source=/dev/urandom,max_bytes=1024,period=1000`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    pub source: RngSource,
    /// Bytes per `period` the guest may read (PVE's default: 1024; 0: no
    /// limit).
    pub max_bytes: Option<u64>,
    /// Milliseconds.
    pub period: Option<u64>,
}

impl Rng {
    /// A source, PVE's defaults otherwise.
    pub fn new(source: RngSource) -> Self {
        Self {
            source,
            max_bytes: None,
            period: None,
        }
    }
}

impl FromStr for Rng {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = RNG.parse(s)?;
        let err = |reason: String| InvalidValue::new("rng", s, reason);
        let source = p.default.take().ok_or_else(|| err("no source".into()))?;
        let source = RngSource::ALL
            .into_iter()
            .find(|r| r.as_str() == source)
            .ok_or_else(|| err(format!("{source} is not a source PVE knows")))?;
        let number = |v: &str| {
            v.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| v.parse().ok())
                .flatten()
        };
        let max_bytes = p.take_with("max_bytes", number).map_err(err)?;
        let period = p.take_with("period", number).map_err(err)?;
        if let Some(key) = p.pairs.keys().next() {
            return Err(err(format!("{key} is not an rng option")));
        }
        Ok(Self {
            source,
            max_bytes,
            period,
        })
    }
}

impl fmt::Display for Rng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut pairs = BTreeMap::new();
        for (k, v) in [("max_bytes", self.max_bytes), ("period", self.period)] {
            if let Some(v) = v {
                pairs.insert(k.to_owned(), v.to_string());
            }
        }
        f.write_str(&propstring::render(Some(self.source.as_str()), &pairs))
    }
}

/// A hot-plug feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HotplugFeature {
    Network,
    Disk,
    Cpu,
    Memory,
    Usb,
    Cloudinit,
}

impl HotplugFeature {
    /// Every feature.
    pub const ALL: [HotplugFeature; 6] = [
        Self::Network,
        Self::Disk,
        Self::Cpu,
        Self::Memory,
        Self::Usb,
        Self::Cloudinit,
    ];

    /// The name PVE uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Network => "network",
            Self::Disk => "disk",
            Self::Cpu => "cpu",
            Self::Memory => "memory",
            Self::Usb => "usb",
            Self::Cloudinit => "cloudinit",
        }
    }
}

/// `hotplug` (`pve-hotplug-features`): `network,disk,usb` (PVE's default,
/// also written `1`), `0` for none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hotplug(pub BTreeSet<HotplugFeature>);

impl Hotplug {
    /// What PVE hot-plugs when `hotplug` is not set.
    pub fn pve_default() -> Self {
        Self(
            [
                HotplugFeature::Network,
                HotplugFeature::Disk,
                HotplugFeature::Usb,
            ]
            .into(),
        )
    }

    /// Nothing is hot-plugged.
    pub fn none() -> Self {
        Self(BTreeSet::new())
    }

    pub fn has(&self, feature: HotplugFeature) -> bool {
        self.0.contains(&feature)
    }
}

impl FromStr for Hotplug {
    type Err = InvalidValue;

    /// As qemu-server's `parse_hotplug_features`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "0" => return Ok(Self::none()),
            "1" => return Ok(Self::pve_default()),
            _ => {}
        }
        split_list(s)
            .iter()
            .map(|f| {
                HotplugFeature::ALL
                    .into_iter()
                    .find(|h| h.as_str() == f)
                    .ok_or_else(|| {
                        InvalidValue::new("hotplug", s, format!("invalid hotplug feature '{f}'"))
                    })
            })
            .collect::<Result<BTreeSet<_>, _>>()
            .map(Self)
    }
}

impl fmt::Display for Hotplug {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("0");
        }
        let names: Vec<&str> = self.0.iter().map(|h| h.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passthrough_by_mapping_or_host() {
        let gpu: HostPci = "mapping=gpu,pcie=1,x-vga=1".parse().unwrap();
        assert_eq!(gpu.mapping.as_deref(), Some("gpu"));
        assert_eq!(
            (gpu.pcie, gpu.x_vga, gpu.rombar),
            (Some(true), Some(true), None)
        );
        assert_eq!(gpu.to_string(), "mapping=gpu,pcie=1,x-vga=1");
        let host: HostPci = "0000:01:00.0,rombar=0,mdev=x".parse().unwrap();
        assert_eq!(host.host.as_deref(), Some("0000:01:00.0"));
        assert_eq!(host.to_string(), "0000:01:00.0,mdev=x,rombar=0");
        assert_eq!(HostPci::mapped("nic").to_string(), "mapping=nic");
        for bad in ["pcie=1", "mapping=1x", "mapping=gpu,pcie=maybe"] {
            assert!(bad.parse::<HostPci>().is_err(), "{bad}");
        }
        let usb: Usb = "mapping=token,usb3=1".parse().unwrap();
        assert_eq!(
            (usb.mapping.as_deref(), usb.usb3),
            (Some("token"), Some(true))
        );
        assert_eq!(
            "spice".parse::<Usb>().unwrap().host.as_deref(),
            Some("spice")
        );
        assert!("usb3=1".parse::<Usb>().is_err());
        assert_eq!(hostpci_index("hostpci15"), Some(15));
        assert_eq!(usb_index("usb14"), None);
    }

    #[test]
    fn rng_and_hotplug() {
        let r: Rng = "source=/dev/urandom,max_bytes=1024,period=1000"
            .parse()
            .unwrap();
        assert_eq!(r.source, RngSource::Urandom);
        assert_eq!(r.to_string(), "/dev/urandom,max_bytes=1024,period=1000");
        assert_eq!(Rng::new(RngSource::Hwrng).to_string(), "/dev/hwrng");
        for bad in [
            "/dev/zero",
            "max_bytes=1",
            "/dev/random,period=x",
            "/dev/random,x=1",
        ] {
            assert!(bad.parse::<Rng>().is_err(), "{bad}");
        }
        assert_eq!("1".parse(), Ok(Hotplug::pve_default()));
        assert_eq!("0".parse(), Ok(Hotplug::none()));
        let h: Hotplug = "disk,network;cpu".parse().unwrap();
        assert_eq!(h.to_string(), "network,disk,cpu");
        assert!(h.has(HotplugFeature::Cpu) && !h.has(HotplugFeature::Usb));
        assert_eq!(Hotplug::none().to_string(), "0");
        assert!("network,sound".parse::<Hotplug>().is_err());
    }
}
