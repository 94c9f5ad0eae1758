//! Property strings (`local-lvm:32,ssd=1`, `virtio,bridge=vmbr0`) parsed like
//! pve-common's `parse_property_string`, and the formats the simulator knows.

use std::collections::BTreeMap;

mod formats;

pub use formats::*;

use super::{Kind, Param, check_value};
use crate::http::decode::RawValue;

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
                        if res.contains_key(key) {
                            return Err(format!("key '{key}' is already defined (via alias)\n"));
                        }
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
                    // A bare boolean is read like a keyed one (`agent: on`).
                    let value = if dk.kind == Kind::Boolean {
                        parse_boolean(part).unwrap_or(part)
                    } else {
                        part
                    };
                    res.insert(dk.name.to_owned(), value.to_owned());
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

#[cfg(test)]
mod prop_tests;

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
    fn bare_default_booleans_and_aliases_follow_pve() {
        assert_eq!(AGENT.parse("agent", "on").unwrap()["enabled"], "1");
        assert_eq!(
            SCSI.parse("scsi0", "file=local-lvm:1,volume=local-lvm:2")
                .unwrap_err(),
            "key 'file' is already defined (via alias)\n"
        );
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
