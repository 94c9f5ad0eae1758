//! The state file (`--state FILE`, `GET /_sim/state`): nodes, storages,
//! volumes, guests, pools, datacenter options, HA, users, tokens and ACLs,
//! as YAML or JSON. Sizes are bytes or PVE size strings (`64G`, `512M`);
//! config values may be written as YAML numbers or booleans.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;
use crate::schema::format::{format_size, parse_size};

/// A size: bytes, or `64G`-style text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_size(self.0))
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Scalar::deserialize(d)? {
            Scalar::Int(n) if n >= 0 => Ok(Self(n as u64)),
            Scalar::Text(t) => parse_size(&t)
                .map(Self)
                .ok_or_else(|| serde::de::Error::custom(format!("invalid size '{t}'"))),
            other => Err(serde::de::Error::custom(format!("invalid size '{other}'"))),
        }
    }
}

/// A config value: text, or a YAML number or boolean (booleans as 1/0).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bool(b) => write!(f, "{}", u8::from(*b)),
            Self::Int(n) => write!(f, "{n}"),
            Self::Float(n) => write!(f, "{n}"),
            Self::Text(t) => f.write_str(t),
        }
    }
}

/// A map of config values, read from any scalars, written as text.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Values(pub BTreeMap<String, String>);

impl<'de> Deserialize<'de> for Values {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: BTreeMap<String, Scalar> = BTreeMap::deserialize(d)?;
        Ok(Self(
            raw.into_iter().map(|(k, v)| (k, v.to_string())).collect(),
        ))
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// 8 or 9.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pve_version: Option<u8>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeSpec>,
    /// Absent: every node gets `local` and `local-lvm` with the seeded images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storages: Option<Vec<StorageSpec>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeSpec>,
    /// Absent: template VM 9000 on the first node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guests: Option<Vec<GuestSpec>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<PoolSpec>,
    /// datacenter.cfg options, e.g. `next-id: lower=1000`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "HaSpec::is_empty")]
    pub ha: HaSpec,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<UserEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<TokenEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl: Vec<AclEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub online: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSpec {
    pub id: String,
    /// `dir` or `lvmthin`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Directory of a `dir` storage (default `/var/lib/vz`... per ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Volume group of an `lvmthin` storage (default `pve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vg: Option<String>,
    pub content: Vec<String>,
    pub size: Size,
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared: bool,
    /// Nodes that have the storage (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeSpec {
    /// `storage:volname`, e.g. `local:iso/seed.iso`, `local-lvm:vm-100-disk-0`.
    pub volid: String,
    /// The node holding it (default: the first node; shared storages: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub size: Size,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_size: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u32>,
    /// An import from it fails part-way like a corrupt image.
    #[serde(default, skip_serializing_if = "is_false")]
    pub corrupt: bool,
    /// The base volume a linked clone was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// What a copied volume holds (the original's contents id); a backup
    /// archive's recorded guest is not kept in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestSpec {
    pub vmid: u32,
    /// `qemu` (default) or `lxc`.
    #[serde(rename = "type", default = "qemu", skip_serializing_if = "is_qemu")]
    pub kind: String,
    /// Default: the first node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default)]
    pub config: Values,
    #[serde(default, skip_serializing_if = "is_false")]
    pub running: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

fn qemu() -> String {
    "qemu".into()
}

fn is_qemu(k: &str) -> bool {
    k == "qemu"
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaSpec {
    /// `vm:100` → `state` plus options (`group`, `max_restart`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Values>,
    /// PVE 9 rules: id → `type`, `resources`, `nodes`, ...
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: BTreeMap<String, Values>,
    /// PVE 8 groups: id → `nodes`, `restricted`, ...
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, Values>,
}

impl HaSpec {
    fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.rules.is_empty() && self.groups.is_empty()
    }
}

/// A user who may log in. The export leaves the password out unless asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    pub user: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// An API token `user@realm!name`. The export leaves the secret out unless asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// Roles or privileges of a user or token on a path (and below).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclEntry {
    pub subject: String,
    pub path: String,
    pub roles: Vec<String>,
}

impl StateFile {
    /// Parses YAML (JSON is read as YAML, or strictly as JSON when it
    /// starts with `{`).
    pub fn parse(text: &str) -> Result<Self, Error> {
        if text.trim_start().starts_with('{') {
            return serde_json::from_str(text)
                .map_err(|e| Error::Config(format!("state file: {e}")));
        }
        serde_saphyr::from_str(text).map_err(|e| Error::Config(format!("state file: {e}")))
    }

    pub fn load(path: &std::path::Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&text)
    }

    pub fn to_yaml(&self) -> Result<String, Error> {
        serde_saphyr::to_string(self).map_err(|e| Error::Config(format!("state file: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_scalars_become_config_text() {
        let s = StateFile::parse(
            "nodes:\n  - name: pve\n    memory: 32G\nguests:\n  - vmid: 100\n    config: {memory: 2048, onboot: true, name: web}\n",
        )
        .unwrap();
        assert_eq!(s.nodes[0].memory, Some(Size(32 << 30)));
        let g = &s.guests.as_ref().unwrap()[0];
        assert_eq!(g.config.0["memory"], "2048");
        assert_eq!(g.config.0["onboot"], "1");
        assert_eq!(g.kind, "qemu");
        assert!(StateFile::parse("bogus: 1\n").is_err());
        let again = StateFile::parse(&s.to_yaml().unwrap()).unwrap();
        assert_eq!(again, s);
    }
}
