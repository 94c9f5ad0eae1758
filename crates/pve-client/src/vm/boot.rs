//! Boot order (`pve-qm-boot`): `order=scsi0;ide2;net0`, or the deprecated
//! `legacy=` letters (`cdn`).

use std::fmt;
use std::str::FromStr;

use crate::vm::propstring::Format;
use crate::vm::value::{InvalidValue, split_list};

const FORMAT: Format = Format {
    what: "boot",
    default_key: Some("legacy"),
    aliases: &[],
};

/// `boot`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Boot {
    /// `[acdn]{1,4}`: floppy, disk, CD-ROM, network (deprecated).
    pub legacy: Option<String>,
    /// Devices to boot from, in order: drive slots, `netN`, `usbN`,
    /// `hostpciN`. Empty: not set.
    pub order: Vec<String>,
}

impl Boot {
    /// `order=<devices>`.
    pub fn order<I: IntoIterator<Item = S>, S: Into<String>>(devices: I) -> Self {
        Self {
            legacy: None,
            order: devices.into_iter().map(Into::into).collect(),
        }
    }
}

/// A boot device (`pve-qm-bootdev`): a drive slot (not efidisk/tpmstate), a
/// NIC, a USB or PCI device.
fn is_boot_device(d: &str) -> bool {
    d.parse::<crate::vm::DriveKey>().is_ok()
        || ["net", "usb", "hostpci"].iter().any(|p| {
            d.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

impl FromStr for Boot {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = FORMAT.parse(s)?;
        let err = |reason: String| InvalidValue::new("boot", s, reason);
        let legacy = p.default.take();
        if let Some(l) = &legacy {
            let letters = l.bytes().all(|b| matches!(b, b'a' | b'c' | b'd' | b'n'));
            if !letters || l.len() > 4 {
                return Err(err(format!("legacy {l:?} is not [acdn]{{1,4}}")));
            }
        }
        let order = p.take("order").map(|o| split_list(&o)).unwrap_or_default();
        if let Some(bad) = order.iter().find(|d| !is_boot_device(d)) {
            return Err(err(format!("{bad:?} is not a boot device")));
        }
        if let Some(key) = p.pairs.keys().next() {
            return Err(err(format!("unknown key {key}")));
        }
        Ok(Self { legacy, order })
    }
}

impl fmt::Display for Boot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order = (!self.order.is_empty()).then(|| format!("order={}", self.order.join(";")));
        let parts: Vec<&str> = self
            .legacy
            .iter()
            .chain(order.iter())
            .map(String::as_str)
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_legacy() {
        let b: Boot = "order=scsi0;ide2;net0".parse().unwrap();
        assert_eq!(b.order, ["scsi0", "ide2", "net0"]);
        assert_eq!(b.to_string(), "order=scsi0;ide2;net0");
        assert_eq!(Boot::order(["scsi0"]).to_string(), "order=scsi0");
        let legacy: Boot = "cdn".parse().unwrap();
        assert_eq!(legacy.to_string(), "cdn");
        for bad in [
            "order=scsi99",
            "order=efidisk0",
            "xyz",
            "acdna",
            "order=net0,order=net1",
        ] {
            assert!(bad.parse::<Boot>().is_err(), "{bad}");
        }
    }
}
