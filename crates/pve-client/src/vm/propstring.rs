//! PVE "property strings" (`default-value,key=value,key=value`), read and
//! written as pve-common's `parse_property_string` and
//! `print_property_string` do.
//!
//! Reading: items are separated by `,`; an item without `=` is the value of
//! the format's default key; a key given twice (also through an alias, or
//! bare and by name) is refused, as is an empty key or value. Unlike PVE,
//! spaces around items, keys and values are ignored (PVE never writes them).
//!
//! Writing: the default key's value bare and first, then every other key
//! in sorted order, which is how PVE writes the values it re-prints (drives
//! after allocation, NICs after adding a MAC).

use std::collections::BTreeMap;

use crate::vm::value::InvalidValue;

/// A property string, read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PropString {
    /// The default key's value (given bare or by its name).
    pub default: Option<String>,
    /// Every other key, aliases resolved.
    pub pairs: BTreeMap<String, String>,
}

/// How a format names its keys.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Format {
    /// The kind of value, for errors.
    pub what: &'static str,
    /// The key a bare value belongs to (`file` of a drive, `model` of a NIC).
    pub default_key: Option<&'static str>,
    /// Alternative names: `(alias, key)`.
    pub aliases: &'static [(&'static str, &'static str)],
}

impl Format {
    /// Reads a property string.
    pub fn parse(&self, s: &str) -> Result<PropString, InvalidValue> {
        let err = |reason: String| InvalidValue::new(self.what, s, reason);
        let mut out = PropString::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                if self.default_key.is_none() {
                    return Err(err(format!("{item:?} has no key")));
                }
                if out.default.replace(item.to_owned()).is_some() {
                    return Err(err("the default value is given twice".into()));
                }
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() || value.is_empty() {
                return Err(err(format!("{item:?} lacks a key or a value")));
            }
            let key = self
                .aliases
                .iter()
                .find(|(alias, _)| *alias == key)
                .map_or(key, |(_, k)| k);
            let duplicate = if Some(key) == self.default_key {
                out.default.replace(value.to_owned()).is_some()
            } else {
                out.pairs.insert(key.to_owned(), value.to_owned()).is_some()
            };
            if duplicate {
                return Err(err(format!("{key} is given twice")));
            }
        }
        Ok(out)
    }
}

impl PropString {
    /// Removes and returns a key's value.
    pub fn take(&mut self, key: &str) -> Option<String> {
        self.pairs.remove(key)
    }

    /// Removes a key and reads its value with `read`; `None` if absent.
    pub fn take_with<T>(
        &mut self,
        key: &str,
        read: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, String> {
        match self.pairs.remove(key) {
            None => Ok(None),
            Some(v) => read(&v)
                .map(Some)
                .ok_or_else(|| format!("{key}={v} is not valid")),
        }
    }
}

/// Writes a property string: `first` bare, then `pairs` in key order.
/// Empty values are left out (PVE refuses `key=`).
pub(crate) fn render(first: Option<&str>, pairs: &BTreeMap<String, String>) -> String {
    let mut parts: Vec<String> = first.map(str::to_owned).into_iter().collect();
    parts.extend(
        pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={v}")),
    );
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRIVE: Format = Format {
        what: "drive",
        default_key: Some("file"),
        aliases: &[("volume", "file")],
    };
    const IPCONFIG: Format = Format {
        what: "ipconfig",
        default_key: None,
        aliases: &[],
    };

    #[test]
    fn reads_bare_named_and_aliased_defaults() {
        let p = DRIVE
            .parse(" local-lvm:vm-100-disk-0 , size=32G,ssd=1,")
            .unwrap();
        assert_eq!(p.default.as_deref(), Some("local-lvm:vm-100-disk-0"));
        assert_eq!(p.pairs.len(), 2);
        assert_eq!(
            DRIVE
                .parse("volume=local:iso/x.iso,media=cdrom")
                .unwrap()
                .default,
            Some("local:iso/x.iso".into())
        );
        let p = DRIVE.parse("serial=a=b").unwrap();
        assert_eq!(p.pairs["serial"], "a=b", "the value keeps later '='");
        assert_eq!(DRIVE.parse("").unwrap(), PropString::default());
    }

    #[test]
    fn refuses_what_pve_refuses() {
        for bad in [
            "a,b",
            "file=a,volume=b",
            "a,file=b",
            "size=1,size=2",
            "=x",
            "size=",
        ] {
            assert!(DRIVE.parse(bad).is_err(), "{bad}");
        }
        assert!(IPCONFIG.parse("dhcp").is_err(), "no default key");
    }

    #[test]
    fn writes_default_first_then_sorted() {
        let pairs: BTreeMap<String, String> = [("size", "32G"), ("discard", "on"), ("x", "")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(
            render(Some("local:1"), &pairs),
            "local:1,discard=on,size=32G"
        );
        assert_eq!(render(None, &BTreeMap::new()), "");
    }
}
