//! Property strings (`local-lvm:32,ssd=1`, `virtio,bridge=vmbr0`) parsed like
//! pve-common's `parse_property_string`, and the formats the simulator knows.

use std::collections::BTreeMap;

use super::format::Named;
use super::{Kind, Param, check_value};
use crate::sim::http::decode::RawValue;

/// A comma-separated `key=value` format.
#[derive(Debug)]
pub struct PropFormat {
    pub keys: &'static [Param],
}

impl PropFormat {
    fn key(&self, name: &str) -> Option<&'static Param> {
        self.keys.iter().find(|k| k.name == name)
    }

    /// Parses and checks `data`; errors are the text after `invalid format - `.
    pub fn parse(&self, path: &str, data: &str) -> Result<BTreeMap<String, String>, String> {
        let mut res = BTreeMap::new();
        let mut default_key: Option<&str> = None;
        for part in data.split(',') {
            if part.trim().is_empty() {
                continue;
            }
            match part.split_once('=') {
                Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                    if res.contains_key(k) {
                        return Err(format!(
                            "duplicate key in comma-separated list property: {k}\n"
                        ));
                    }
                    let mut key = k;
                    let mut schema = self.key(k);
                    if let Some(alias) = schema.and_then(|s| s.alias) {
                        if let Some(ka) = schema.and_then(|s| s.key_alias) {
                            if res.contains_key(ka) {
                                return Err(format!("key alias '{ka}' is already defined\n"));
                            }
                            res.insert(ka.to_owned(), k.to_owned());
                        }
                        key = alias;
                        schema = self.key(alias);
                    }
                    let Some(schema) = schema else {
                        return Err(format!(
                            "invalid key in comma-separated list property: {key}\n"
                        ));
                    };
                    let value = if schema.kind == Kind::Boolean {
                        parse_boolean(v).unwrap_or(v)
                    } else {
                        v
                    };
                    res.insert(key.to_owned(), value.to_owned());
                }
                None => {
                    if let Some(dk) = default_key {
                        return Err(format!(
                            "duplicate key in comma-separated list property: {dk}\n"
                        ));
                    }
                    let Some(dk) = self.keys.iter().find(|k| k.default_key) else {
                        return Err(
                            "value without key, but schema does not define a default key\n".into(),
                        );
                    };
                    default_key = Some(dk.name);
                    if res.contains_key(dk.name) {
                        return Err(format!(
                            "duplicate key in comma-separated list property: {}\n",
                            dk.name
                        ));
                    }
                    res.insert(dk.name.to_owned(), part.to_owned());
                }
                Some(_) => return Err("missing key in comma-separated list property\n".into()),
            }
        }
        let mut errors = BTreeMap::new();
        for spec in self.keys.iter().filter(|k| k.alias.is_none()) {
            let sub = format!("{path}.{}", spec.name);
            match res.get(spec.name) {
                None if !spec.optional => {
                    errors.insert(sub, "property is missing and it is not optional".to_owned());
                }
                None => {}
                Some(v) => {
                    if let Err(e) = check_value(&sub, spec, &RawValue::Text(v.clone())) {
                        errors.insert(sub, e);
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(res)
        } else {
            let mut msg = "format error\n".to_owned();
            for (k, e) in errors {
                msg.push_str(&format!("{k}: {e}\n"));
            }
            Err(msg)
        }
    }
}

/// `PVE::JSONSchema::parse_boolean`: property strings accept on/yes/true too.
fn parse_boolean(v: &str) -> Option<&'static str> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some("1"),
        "0" | "off" | "no" | "false" => Some("0"),
        _ => None,
    }
}

/// Renders a parsed property string back (default key first, bare).
pub fn print(map: &BTreeMap<String, String>, default_key: &str, order: &[&str]) -> String {
    let mut parts = Vec::new();
    if let Some(v) = map.get(default_key) {
        parts.push(v.clone());
    }
    for k in order {
        if *k != default_key
            && let Some(v) = map.get(*k)
        {
            parts.push(format!("{k}={v}"));
        }
    }
    for (k, v) in map {
        if k != default_key && !order.contains(&k.as_str()) {
            parts.push(format!("{k}={v}"));
        }
    }
    parts.join(",")
}

const FILE: Param = Param::string("file")
    .format(Named::VolumeIdOrQmPath)
    .default_key();
const VOLUME: Param = Param::alias("volume", "file");
const SIZE: Param = Param::string("size").format(Named::DiskSize).opt();
const IMPORT_FROM: Param = Param::string("import-from")
    .format(Named::VolumeIdOrAbsolutePath)
    .opt();
const IMAGE_FORMATS: &[&str] = &["raw", "qcow", "qed", "qcow2", "vmdk", "cloop"];

macro_rules! drive_format {
    ($($extra:expr),* $(,)?) => {
        PropFormat {
            keys: &[
                FILE,
                VOLUME,
                SIZE,
                IMPORT_FROM,
                Param::string("format").enums(IMAGE_FORMATS).opt(),
                Param::string("media").enums(&["cdrom", "disk"]).opt(),
                Param::string("cache").enums(&["none", "writethrough", "writeback", "unsafe", "directsync"]).opt(),
                Param::string("discard").enums(&["ignore", "on"]).opt(),
                Param::string("aio").enums(&["native", "threads", "io_uring"]).opt(),
                Param::boolean("backup").opt(),
                Param::boolean("replicate").opt(),
                Param::boolean("detect_zeroes").opt(),
                Param::boolean("snapshot").opt(),
                Param::boolean("shared").opt(),
                Param::string("serial").format(Named::Urlencoded).max_len(60).opt(),
                Param::string("werror").enums(&["enospc", "ignore", "report", "stop"]).opt(),
                Param::string("rerror").enums(&["ignore", "report", "stop"]).opt(),
                Param::integer("iops").opt(),
                Param::number("mbps").opt(),
                $($extra),*
            ],
        }
    };
}

pub static SCSI: PropFormat = drive_format!(
    Param::boolean("iothread").opt(),
    Param::boolean("ssd").opt(),
    Param::boolean("ro").opt(),
    Param::integer("queues").min(2).opt(),
);
pub static SATA: PropFormat = drive_format!(Param::boolean("ssd").opt());
pub static IDE: PropFormat = drive_format!(Param::boolean("ssd").opt());
pub static VIRTIO: PropFormat =
    drive_format!(Param::boolean("iothread").opt(), Param::boolean("ro").opt());

pub static EFIDISK: PropFormat = PropFormat {
    keys: &[
        FILE,
        VOLUME,
        SIZE,
        IMPORT_FROM,
        Param::string("efitype").enums(&["2m", "4m"]).opt(),
        Param::string("format").enums(IMAGE_FORMATS).opt(),
        Param::boolean("pre-enrolled-keys").opt(),
        Param::string("ms-cert")
            .enums(&["2011", "2023", "2023w", "2023k"])
            .opt(),
    ],
};

pub static TPMSTATE: PropFormat = PropFormat {
    keys: &[
        FILE,
        VOLUME,
        SIZE,
        IMPORT_FROM,
        Param::string("format")
            .enums(&["raw", "qcow2", "vmdk"])
            .opt(),
        Param::string("version").enums(&["v1.2", "v2.0"]).opt(),
    ],
};

pub static UNUSED: PropFormat = PropFormat {
    keys: &[
        Param::string("file")
            .format(Named::PveVolumeId)
            .default_key(),
        VOLUME,
    ],
};

pub const NET_MODELS: &[&str] = &[
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

pub static NET: PropFormat = PropFormat {
    keys: &[
        Param::string("model").enums(NET_MODELS).default_key(),
        Param::string("bridge").format(Named::PveBridgeId).opt(),
        Param::boolean("firewall").opt(),
        Param::boolean("link_down").opt(),
        Param::string("macaddr").format(Named::MacAddr).opt(),
        Param::integer("mtu").min(1).max(65520).opt(),
        Param::integer("queues").min(0).max(64).opt(),
        Param::number("rate").min(0).opt(),
        Param::integer("tag").min(1).max(4094).opt(),
        Param::string("trunks")
            .pattern(r"\d+(?:-\d+)?(?:;\d+(?:-\d+)?)*")
            .opt(),
        Param::key_alias("e1000", "macaddr", "model"),
        Param::key_alias("e1000-82540em", "macaddr", "model"),
        Param::key_alias("e1000-82544gc", "macaddr", "model"),
        Param::key_alias("e1000-82545em", "macaddr", "model"),
        Param::key_alias("e1000e", "macaddr", "model"),
        Param::key_alias("i82551", "macaddr", "model"),
        Param::key_alias("i82557b", "macaddr", "model"),
        Param::key_alias("i82559er", "macaddr", "model"),
        Param::key_alias("ne2k_isa", "macaddr", "model"),
        Param::key_alias("ne2k_pci", "macaddr", "model"),
        Param::key_alias("pcnet", "macaddr", "model"),
        Param::key_alias("rtl8139", "macaddr", "model"),
        Param::key_alias("virtio", "macaddr", "model"),
        Param::key_alias("vmxnet3", "macaddr", "model"),
    ],
};

pub static AGENT: PropFormat = PropFormat {
    keys: &[
        Param::boolean("enabled").default_key(),
        Param::boolean("freeze-fs").opt(),
        Param::alias("freeze-fs-on-backup", "freeze-fs"),
        Param::alias("guest-fsfreeze", "freeze-fs"),
        Param::boolean("fstrim_cloned_disks").opt(),
        Param::string("type").enums(&["virtio", "isa"]).opt(),
    ],
};

pub static MEMORY: PropFormat = PropFormat {
    keys: &[Param::integer("current").min(16).default_key()],
};

pub static VGA: PropFormat = PropFormat {
    keys: &[
        Param::string("type")
            .enums(&[
                "cirrus",
                "qxl",
                "qxl2",
                "qxl3",
                "qxl4",
                "none",
                "serial0",
                "serial1",
                "serial2",
                "serial3",
                "std",
                "virtio",
                "virtio-gl",
                "vmware",
            ])
            .default_key()
            .opt(),
        Param::integer("memory").min(4).max(512).opt(),
        Param::string("clipboard").enums(&["vnc"]).opt(),
    ],
};

pub static IPCONFIG: PropFormat = PropFormat {
    keys: &[
        Param::string("ip").format(Named::Ipv4Config).opt(),
        Param::string("gw").format(Named::Ipv4).opt(),
        Param::string("ip6").format(Named::Ipv6Config).opt(),
        Param::string("gw6").format(Named::Ipv6).opt(),
    ],
};

pub static BOOT: PropFormat = PropFormat {
    keys: &[
        Param::string("legacy")
            .pattern("[acdn]{1,4}")
            .default_key()
            .opt(),
        Param::string("order").format(Named::PveQmBootOrder).opt(),
    ],
};

pub static CICUSTOM: PropFormat = PropFormat {
    keys: &[
        Param::string("meta").format(Named::PveVolumeId).opt(),
        Param::string("network").format(Named::PveVolumeId).opt(),
        Param::string("user").format(Named::PveVolumeId).opt(),
        Param::string("vendor").format(Named::PveVolumeId).opt(),
    ],
};

pub static CPU: PropFormat = PropFormat {
    keys: &[
        Param::string("cputype")
            .pattern(r"[a-zA-Z0-9\-_.]+")
            .default_key()
            .opt(),
        Param::string("flags")
            .pattern(r"[+-]?[a-zA-Z0-9\-_.]+(;[+-]?[a-zA-Z0-9\-_.]+)*")
            .opt(),
        Param::boolean("hidden").opt(),
    ],
};

pub static SMBIOS1: PropFormat = PropFormat {
    keys: &[
        Param::string("uuid")
            .pattern(r"[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}")
            .opt(),
        Param::boolean("base64").opt(),
        Param::string("family").opt(),
        Param::string("manufacturer").opt(),
        Param::string("product").opt(),
        Param::string("serial").opt(),
        Param::string("sku").opt(),
        Param::string("version").opt(),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_drives_with_default_key_and_booleans() {
        let d = SCSI
            .parse(
                "scsi0",
                "local-lvm:0,import-from=local:import/x.qcow2,ssd=on",
            )
            .unwrap();
        assert_eq!(d["file"], "local-lvm:0");
        assert_eq!(d["import-from"], "local:import/x.qcow2");
        assert_eq!(d["ssd"], "1");
    }

    #[test]
    fn net_model_alias_sets_model_and_mac() {
        let n = NET
            .parse("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0")
            .unwrap();
        assert_eq!(n["model"], "virtio");
        assert_eq!(n["macaddr"], "BC:24:11:00:00:01");
    }

    #[test]
    fn errors_are_pve_format_errors() {
        let e = SCSI.parse("scsi0", "local-lvm:32,cache=fast").unwrap_err();
        assert_eq!(
            e,
            "format error\nscsi0.cache: value 'fast' does not have a value in the enumeration 'none, writethrough, writeback, unsafe, directsync'\n"
        );
        let e = NET.parse("net0", "bridge=vmbr0").unwrap_err();
        assert_eq!(
            e,
            "format error\nnet0.model: property is missing and it is not optional\n"
        );
        assert_eq!(
            SCSI.parse("scsi0", "a:1,bogus=1").unwrap_err(),
            "invalid key in comma-separated list property: bogus\n"
        );
    }
}
