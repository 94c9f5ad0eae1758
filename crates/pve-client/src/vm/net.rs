//! Network devices (`pve-qm-net`):
//! `net0: virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,tag=10`.
//!
//! The model is the format's default key and each model name is also a key
//! whose value is the MAC (`virtio=<mac>` is `model=virtio,macaddr=<mac>`).
//! PVE adds a MAC when none is given and re-prints the value, so what the
//! config shows is the canonical form [`Nic`] writes.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::vm::propstring::{self, Format};
use crate::vm::value::{InvalidValue, bool_text, parse_bool};

const FORMAT: Format = Format {
    what: "net",
    default_key: Some("model"),
    aliases: &[],
};

macro_rules! nic_models {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// NIC models (qemu-server's `$nic_model_list`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum NicModel { $($variant),* }

        impl NicModel {
            /// Every model.
            pub const ALL: &'static [NicModel] = &[$(NicModel::$variant),*];

            /// The name PVE uses.
            pub fn as_str(self) -> &'static str {
                match self { $(NicModel::$variant => $name),* }
            }
        }
    };
}

nic_models! {
    E1000 => "e1000",
    E1000_82540em => "e1000-82540em",
    E1000_82544gc => "e1000-82544gc",
    E1000_82545em => "e1000-82545em",
    E1000e => "e1000e",
    I82551 => "i82551",
    I82557b => "i82557b",
    I82559er => "i82559er",
    Ne2kIsa => "ne2k_isa",
    Ne2kPci => "ne2k_pci",
    Pcnet => "pcnet",
    Rtl8139 => "rtl8139",
    Virtio => "virtio",
    Vmxnet3 => "vmxnet3",
}

impl FromStr for NicModel {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NicModel::ALL
            .iter()
            .copied()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| InvalidValue::new("NIC model", s, "not a model PVE knows"))
    }
}

impl fmt::Display for NicModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A unicast MAC address (`mac-addr`). Compares by value, so case does not
/// matter; written in upper case, as PVE generates them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl FromStr for MacAddr {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| InvalidValue::new("MAC address", s, reason);
        let mut bytes = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut bytes {
            let part = parts.next().ok_or_else(|| err("not XX:XX:XX:XX:XX:XX"))?;
            if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err("not XX:XX:XX:XX:XX:XX"));
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| err("not hex"))?;
        }
        if parts.next().is_some() {
            return Err(err("not XX:XX:XX:XX:XX:XX"));
        }
        if bytes[0] & 1 == 1 {
            return Err(err("a group (multicast) address"));
        }
        Ok(Self(bytes))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02X}:{b:02X}:{c:02X}:{d:02X}:{e:02X}:{g:02X}")
    }
}

/// A VM network device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nic {
    pub model: NicModel,
    /// `None` lets PVE generate one.
    pub mac: Option<MacAddr>,
    /// `pve-bridge-id`; none gives a NATed user-mode network.
    pub bridge: Option<String>,
    /// VLAN tag, 1-4094.
    pub tag: Option<u16>,
    pub firewall: bool,
    pub link_down: bool,
    /// 1-65520 (VirtIO only).
    pub mtu: Option<u16>,
    /// Every other option (`queues`, `rate`, `trunks`, ...), as written.
    pub options: BTreeMap<String, String>,
}

impl Nic {
    /// A NIC on `bridge` with a MAC PVE generates.
    pub fn new(model: NicModel, bridge: &str) -> Self {
        Self {
            model,
            mac: None,
            bridge: Some(bridge.to_owned()),
            tag: None,
            firewall: false,
            link_down: false,
            mtu: None,
            options: BTreeMap::new(),
        }
    }

    /// Parses a `netN` value.
    pub fn parse(s: &str) -> Result<Self, InvalidValue> {
        s.parse()
    }
}

fn is_bridge_id(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl FromStr for Nic {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = FORMAT.parse(s)?;
        let err = |reason: String| InvalidValue::new("net", s, reason);
        let mut model = p.default.take();
        let mut mac = p.take("macaddr");
        // `<model>=<mac>`: the model through its key alias.
        for m in NicModel::ALL {
            if let Some(value) = p.take(m.as_str())
                && (model.replace(m.as_str().to_owned()).is_some() || mac.replace(value).is_some())
            {
                return Err(err("the model or MAC is given twice".into()));
            }
        }
        let model = model
            .ok_or_else(|| err("no model".into()))?
            .parse()
            .map_err(|e: InvalidValue| err(e.reason))?;
        let mac = mac
            .map(|m| m.parse::<MacAddr>())
            .transpose()
            .map_err(|e| err(e.reason))?;
        let bridge = p
            .take_with("bridge", |b| is_bridge_id(b).then(|| b.to_owned()))
            .map_err(err)?;
        let tag = p
            .take_with("tag", |t| t.parse().ok().filter(|t| (1..=4094).contains(t)))
            .map_err(err)?;
        let firewall = p.take_with("firewall", parse_bool).map_err(err)?;
        let link_down = p.take_with("link_down", parse_bool).map_err(err)?;
        let mtu = p
            .take_with("mtu", |m| {
                m.parse().ok().filter(|m| (1..=65520).contains(m))
            })
            .map_err(err)?;
        Ok(Self {
            model,
            mac,
            bridge,
            tag,
            firewall: firewall.unwrap_or(false),
            link_down: link_down.unwrap_or(false),
            mtu,
            options: p.pairs,
        })
    }
}

impl fmt::Display for Nic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = match &self.mac {
            Some(mac) => format!("{}={mac}", self.model),
            None => self.model.to_string(),
        };
        let mut pairs = self.options.clone();
        let mut set = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                pairs.insert(k.to_owned(), v);
            }
        };
        set("bridge", self.bridge.clone());
        set("tag", self.tag.map(|t| t.to_string()));
        set(
            "firewall",
            self.firewall.then(|| bool_text(true).to_owned()),
        );
        set(
            "link_down",
            self.link_down.then(|| bool_text(true).to_owned()),
        );
        set("mtu", self.mtu.map(|m| m.to_string()));
        f.write_str(&propstring::render(Some(&first), &pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_spellings_of_model_and_mac() {
        let n = Nic::parse("virtio=bc:24:11:00:00:01,bridge=vmbr0,tag=10,firewall=1").unwrap();
        assert_eq!(n.model, NicModel::Virtio);
        assert_eq!(n.mac.unwrap().to_string(), "BC:24:11:00:00:01");
        assert_eq!((n.bridge.as_deref(), n.tag), (Some("vmbr0"), Some(10)));
        assert!(n.firewall && !n.link_down);

        let named = Nic::parse(
            "model=e1000,macaddr=AA:BB:CC:DD:EE:FE, bridge=vmbr1 ,queues=4,link_down=on",
        )
        .unwrap();
        assert_eq!(named.model, NicModel::E1000);
        assert!(named.link_down);
        assert_eq!(named.options["queues"], "4");
        assert_eq!(
            named.to_string(),
            "e1000=AA:BB:CC:DD:EE:FE,bridge=vmbr1,link_down=1,queues=4"
        );

        let bare = Nic::parse("virtio,bridge=vmbr0").unwrap();
        assert!(bare.mac.is_none());
        assert_eq!(bare, Nic::new(NicModel::Virtio, "vmbr0"));
    }

    #[test]
    fn refuses_what_pve_refuses() {
        for bad in [
            "bridge=vmbr0",
            "virtio=BC:24:11:00:00:01,e1000=BC:24:11:00:00:02",
            "virtio=BC:24:11:00:00:01,macaddr=BC:24:11:00:00:02",
            "virtio,model=e1000",
            "tulip,bridge=vmbr0",
            "virtio=01:24:11:00:00:01",
            "virtio=BC:24:11:00:00",
            "virtio,tag=0",
            "virtio,tag=4095",
            "virtio,firewall=maybe",
            "virtio,bridge=vm br0",
            "virtio,mtu=70000",
        ] {
            assert!(Nic::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn writes_as_pve_prints() {
        for s in [
            "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,tag=10",
            "e1000,bridge=vmbr1",
            "vmxnet3=AA:BB:CC:DD:EE:FE,bridge=vmbr0,link_down=1,mtu=9000,queues=2,rate=12.5",
        ] {
            assert_eq!(Nic::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            Nic::parse("virtio,bridge=vmbr0,tag=10,firewall=0")
                .unwrap()
                .to_string(),
            "virtio,bridge=vmbr0,tag=10"
        );
    }
}
