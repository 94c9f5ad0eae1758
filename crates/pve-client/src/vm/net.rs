//! Network devices: `net0: virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10,firewall=1`.

use std::collections::BTreeMap;
use std::fmt;

use crate::vm::propstring;

/// NIC models PVE knows (`$nic_model_list`); the first `model=mac` pair.
const MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];

/// A VM network device.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Nic {
    /// `virtio`, `e1000`, ...
    pub model: String,
    /// MAC address, upper case; `None` lets PVE generate one.
    pub mac: Option<String>,
    pub bridge: Option<String>,
    /// VLAN tag.
    pub tag: Option<u16>,
    pub firewall: bool,
    pub link_down: bool,
    pub mtu: Option<u16>,
    /// Every other option (`queues`, `rate`, `trunks`, ...).
    pub options: BTreeMap<String, String>,
}

impl Nic {
    /// A NIC on `bridge` with the given model and a generated MAC.
    pub fn new(model: &str, bridge: &str) -> Self {
        Self {
            model: model.to_owned(),
            bridge: Some(bridge.to_owned()),
            ..Self::default()
        }
    }

    /// Parses a `netN` value. Unknown options are kept.
    pub fn parse(s: &str) -> Self {
        let (bare, pairs) = propstring::split(s);
        let mut nic = Nic::default();
        if let Some(model) = bare {
            nic.model = model;
        }
        for (k, v) in pairs {
            let key = k.to_ascii_lowercase();
            match key.as_str() {
                m if MODELS.contains(&m) && nic.model.is_empty() => {
                    nic.model = key.clone();
                    nic.mac = Some(v.to_ascii_uppercase()).filter(|m| !m.is_empty());
                }
                "model" => nic.model = v,
                "macaddr" => nic.mac = Some(v.to_ascii_uppercase()),
                "bridge" => nic.bridge = Some(v),
                "tag" => match v.parse() {
                    Ok(tag) => nic.tag = Some(tag),
                    Err(_) => {
                        nic.options.insert(k, v);
                    }
                },
                "firewall" => nic.firewall = v == "1",
                "link_down" => nic.link_down = v == "1",
                "mtu" => match v.parse() {
                    Ok(mtu) => nic.mtu = Some(mtu),
                    Err(_) => {
                        nic.options.insert(k, v);
                    }
                },
                _ => {
                    nic.options.insert(k, v);
                }
            }
        }
        nic
    }
}

impl fmt::Display for Nic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = match &self.mac {
            Some(mac) => format!("{}={mac}", self.model),
            None => self.model.clone(),
        };
        let mut ordered = Vec::new();
        if let Some(bridge) = &self.bridge {
            ordered.push(("bridge", bridge.clone()));
        }
        if let Some(tag) = self.tag {
            ordered.push(("tag", tag.to_string()));
        }
        if self.firewall {
            ordered.push(("firewall", "1".to_owned()));
        }
        if self.link_down {
            ordered.push(("link_down", "1".to_owned()));
        }
        if let Some(mtu) = self.mtu {
            ordered.push(("mtu", mtu.to_string()));
        }
        f.write_str(&propstring::join(Some(&first), &ordered, &self.options))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let n = Nic::parse("virtio=bc:24:11:00:00:01,bridge=vmbr0,tag=10,firewall=1");
        assert_eq!(n.model, "virtio");
        assert_eq!(n.mac.as_deref(), Some("BC:24:11:00:00:01"));
        assert_eq!(n.bridge.as_deref(), Some("vmbr0"));
        assert_eq!(n.tag, Some(10));
        assert!(n.firewall && !n.link_down);

        let explicit =
            Nic::parse("model=e1000,macaddr=AA:BB:CC:DD:EE:FF, bridge=vmbr1 ,queues=4,link_down=1");
        assert_eq!(explicit.model, "e1000");
        assert_eq!(explicit.mac.as_deref(), Some("AA:BB:CC:DD:EE:FF"));
        assert!(explicit.link_down);
        assert_eq!(
            explicit.options.get("queues").map(String::as_str),
            Some("4")
        );

        let bare = Nic::parse("virtio,bridge=vmbr0");
        assert_eq!(bare.model, "virtio");
        assert!(bare.mac.is_none());

        let odd = Nic::parse("virtio=BC:24:11:00:00:02,bridge=vmbr0,tag=notanumber,mtu=1500");
        assert_eq!(odd.tag, None);
        assert_eq!(
            odd.options.get("tag").map(String::as_str),
            Some("notanumber")
        );
        assert_eq!(odd.mtu, Some(1500));
    }

    #[test]
    fn round_trips_and_encodes() {
        for s in [
            "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10,firewall=1",
            "e1000,bridge=vmbr1",
            "vmxnet3=AA:BB:CC:DD:EE:FF,bridge=vmbr0,link_down=1,mtu=9000,queues=2,rate=12.5",
        ] {
            let n = Nic::parse(s);
            assert_eq!(n.to_string(), s, "encodes in canonical order");
            assert_eq!(Nic::parse(&n.to_string()), n);
        }
        assert_eq!(
            Nic::new("virtio", "vmbr0").to_string(),
            "virtio,bridge=vmbr0"
        );
    }
}
