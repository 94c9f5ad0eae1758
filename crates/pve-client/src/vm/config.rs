//! A VM config as `GET .../config` returns it, typed where a reconciler
//! compares values, with every key also kept raw.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::lenient::scalar_to_string;
use crate::vm::cloudinit::{IpConfig, decode_sshkeys};
use crate::vm::disk::{Disk, is_disk_key};
use crate::vm::net::Nic;
use crate::vm::propstring;

/// What PVE shows instead of a set `cipassword`.
pub const MASKED_PASSWORD: &str = "**********";

/// VM tags. PVE accepts `;`, `,` and spaces as separators and normalises
/// case and order, so tags compare as a case-insensitive set.
#[derive(Clone, Debug, Default)]
pub struct Tags(Vec<String>);

impl Tags {
    /// Parses a tag list.
    pub fn parse(s: &str) -> Self {
        Self(
            s.split([';', ',', ' '])
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    /// Builds tags from items.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Self {
        Self(items.into_iter().map(Into::into).collect())
    }

    /// The tags as given.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// Lower-cased, sorted, de-duplicated: the form to compare.
    pub fn normalized(&self) -> BTreeSet<String> {
        self.0.iter().map(|t| t.to_lowercase()).collect()
    }

    /// Whether a tag is present (case-insensitive).
    pub fn contains(&self, tag: &str) -> bool {
        self.0.iter().any(|t| t.eq_ignore_ascii_case(tag))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl PartialEq for Tags {
    fn eq(&self, other: &Self) -> bool {
        self.normalized() == other.normalized()
    }
}

impl Eq for Tags {}

impl fmt::Display for Tags {
    /// `;`-separated, in normalised order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v: Vec<String> = self.normalized().into_iter().collect();
        f.write_str(&v.join(";"))
    }
}

/// `agent: 1` or `agent: enabled=1,fstrim_cloned_disks=1,type=virtio`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentConfig {
    pub enabled: bool,
    pub options: BTreeMap<String, String>,
}

impl AgentConfig {
    pub fn parse(s: &str) -> Self {
        let (bare, pairs) = propstring::split(s);
        let mut enabled = bare.as_deref() == Some("1");
        let mut options = BTreeMap::new();
        for (k, v) in pairs {
            if k == "enabled" {
                enabled = v == "1";
            } else {
                options.insert(k, v);
            }
        }
        Self { enabled, options }
    }
}

impl fmt::Display for AgentConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = if self.enabled { "1" } else { "0" };
        f.write_str(&propstring::join(Some(first), &[], &self.options))
    }
}

/// A typed view of a VM config.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VmConfig {
    /// SHA-1 of the config file; send it back to detect concurrent edits.
    pub digest: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    /// MiB.
    pub memory: Option<u64>,
    pub cores: Option<u32>,
    pub sockets: Option<u32>,
    pub cpu: Option<String>,
    pub agent: Option<AgentConfig>,
    pub onboot: Option<bool>,
    pub template: bool,
    pub ciuser: Option<String>,
    /// PVE never returns the password, only whether one is set.
    pub cipassword_set: bool,
    /// Decoded, one key per entry.
    pub sshkeys: Vec<String>,
    pub ipconfig: BTreeMap<u32, IpConfig>,
    pub nameserver: Option<String>,
    pub searchdomain: Option<String>,
    /// `order=scsi0;ide2;net0` as written.
    pub boot: Option<String>,
    /// A config lock (`create`, `clone`, `backup`, ...).
    pub lock: Option<String>,
    pub tags: Tags,
    /// Drives and unused volumes by key.
    pub disks: BTreeMap<String, Disk>,
    /// Network devices by index.
    pub nets: BTreeMap<u32, Nic>,
    /// Every key as returned (values as strings), typed or not.
    pub raw: BTreeMap<String, String>,
}

/// Keys this type interprets; everything else is only in `raw`.
fn is_typed_key(key: &str) -> bool {
    matches!(
        key,
        "digest"
            | "name"
            | "description"
            | "memory"
            | "cores"
            | "sockets"
            | "cpu"
            | "agent"
            | "onboot"
            | "template"
            | "ciuser"
            | "cipassword"
            | "sshkeys"
            | "nameserver"
            | "searchdomain"
            | "boot"
            | "lock"
            | "tags"
    ) || is_disk_key(key)
        || indexed(key, "net").is_some()
        || indexed(key, "ipconfig").is_some()
}

fn indexed(key: &str, prefix: &str) -> Option<u32> {
    key.strip_prefix(prefix)
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
}

/// `memory: 2048` or (PVE 8.1+ property form) `current=2048`.
fn parse_memory(s: &str) -> Option<u64> {
    let (bare, pairs) = propstring::split(s);
    bare.or_else(|| {
        pairs
            .into_iter()
            .find(|(k, _)| k == "current")
            .map(|(_, v)| v)
    })
    .and_then(|v| v.parse().ok())
}

impl VmConfig {
    /// Types a config object (`data` of `GET .../config`).
    pub fn from_json(value: &serde_json::Value) -> Self {
        let raw = value
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| scalar_to_string(v).map(|s| (k.clone(), s)))
                    .collect()
            })
            .unwrap_or_default();
        Self::from_raw(raw)
    }

    /// Types a flat key → string map.
    pub fn from_raw(raw: BTreeMap<String, String>) -> Self {
        let get = |k: &str| raw.get(k).cloned();
        let flag = |k: &str| raw.get(k).map(|v| v.trim() == "1");
        let mut c = VmConfig {
            digest: get("digest"),
            name: get("name"),
            description: get("description"),
            memory: raw.get("memory").and_then(|m| parse_memory(m)),
            cores: raw.get("cores").and_then(|v| v.trim().parse().ok()),
            sockets: raw.get("sockets").and_then(|v| v.trim().parse().ok()),
            cpu: get("cpu"),
            agent: raw.get("agent").map(|a| AgentConfig::parse(a)),
            onboot: flag("onboot"),
            template: flag("template").unwrap_or(false),
            ciuser: get("ciuser"),
            cipassword_set: raw.get("cipassword").is_some_and(|p| !p.is_empty()),
            sshkeys: raw
                .get("sshkeys")
                .map(|k| decode_sshkeys(k))
                .unwrap_or_default(),
            nameserver: get("nameserver"),
            searchdomain: get("searchdomain"),
            boot: get("boot"),
            lock: get("lock"),
            tags: raw.get("tags").map(|t| Tags::parse(t)).unwrap_or_default(),
            ..VmConfig::default()
        };
        for (key, value) in &raw {
            if is_disk_key(key) {
                c.disks.insert(key.clone(), Disk::parse(value));
            } else if let Some(i) = indexed(key, "net") {
                c.nets.insert(i, Nic::parse(value));
            } else if let Some(i) = indexed(key, "ipconfig") {
                c.ipconfig.insert(i, IpConfig::parse(value));
            }
        }
        c.raw = raw;
        c
    }

    /// Keys this type does not interpret (`scsihw`, `ostype`, `vga`, ...).
    pub fn unknown_keys(&self) -> impl Iterator<Item = (&String, &String)> {
        self.raw.iter().filter(|(k, _)| !is_typed_key(k))
    }

    /// The boot order devices (`order=scsi0;ide2` → `["scsi0", "ide2"]`).
    pub fn boot_order(&self) -> Vec<String> {
        let Some(boot) = &self.boot else {
            return Vec::new();
        };
        let (_, pairs) = propstring::split(boot);
        pairs
            .into_iter()
            .find(|(k, _)| k == "order")
            .map(|(_, v)| {
                v.split(';')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The first non-CD-ROM, non-unused disk in boot order, else by key.
    pub fn boot_disk(&self) -> Option<(&String, &Disk)> {
        let is_data = |k: &String, d: &Disk| !d.is_cdrom() && !k.starts_with("unused");
        self.boot_order()
            .iter()
            .find_map(|b| self.disks.get_key_value(b).filter(|(k, d)| is_data(k, d)))
            .or_else(|| self.disks.iter().find(|(k, d)| is_data(k, d)))
    }
}

/// One item of `GET .../pending`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingEntry {
    pub key: String,
    /// The current value.
    pub value: Option<String>,
    /// The value that applies after a restart.
    pub pending: Option<String>,
    /// 1: deletion pending; 2: forced deletion pending.
    pub delete: Option<u8>,
}

impl PendingEntry {
    pub(crate) fn from_json(v: &serde_json::Value) -> Option<Self> {
        Some(Self {
            key: v.get("key")?.as_str()?.to_owned(),
            value: v.get("value").and_then(scalar_to_string),
            pending: v.get("pending").and_then(scalar_to_string),
            delete: v
                .get("delete")
                .and_then(crate::lenient::value_u64)
                .and_then(|d| u8::try_from(d).ok()),
        })
    }

    /// Whether a change waits for the next restart.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some() || self.delete.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> VmConfig {
        VmConfig::from_json(&json!({
            "digest": "3f1c0e",
            "name": "web-1",
            "memory": "2048",
            "cores": 2,
            "sockets": 1,
            "cpu": "x86-64-v2-AES",
            "agent": "enabled=1,fstrim_cloned_disks=1",
            "onboot": 1,
            "ciuser": "ubuntu",
            "cipassword": "**********",
            "sshkeys": "ssh-ed25519%20AAAA%20me%40h%0A",
            "ipconfig0": "ip=10.0.0.5/24,gw=10.0.0.1",
            "nameserver": "1.1.1.1 8.8.8.8",
            "searchdomain": "lab",
            "boot": "order=scsi0;ide2;net0",
            "tags": "Web;prod ;k8s",
            "scsi0": "local-lvm:vm-100-disk-0,size=3584M,ssd=1",
            "ide2": "local-lvm:vm-100-cloudinit,media=cdrom",
            "unused0": "local-lvm:vm-100-disk-1",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10,firewall=1",
            "scsihw": "virtio-scsi-pci",
            "vga": "serial0",
            "serial0": "socket"
        }))
    }

    #[test]
    fn types_the_interesting_keys() {
        let c = sample();
        assert_eq!(c.digest.as_deref(), Some("3f1c0e"));
        assert_eq!(c.memory, Some(2048));
        assert_eq!((c.cores, c.sockets), (Some(2), Some(1)));
        assert!(c.agent.as_ref().unwrap().enabled);
        assert_eq!(c.onboot, Some(true));
        assert!(c.cipassword_set);
        assert_eq!(c.sshkeys, ["ssh-ed25519 AAAA me@h"]);
        assert_eq!(c.ipconfig[&0].gw.as_deref(), Some("10.0.0.1"));
        assert_eq!(c.tags, Tags::parse("k8s,prod,web"));
        assert_eq!(c.tags.to_string(), "k8s;prod;web");
        assert_eq!(c.disks.len(), 3);
        assert_eq!(c.disks["scsi0"].size, Some(3584 << 20));
        assert_eq!(c.nets[&0].tag, Some(10));
        assert_eq!(c.boot_order(), ["scsi0", "ide2", "net0"]);
        assert_eq!(c.boot_disk().unwrap().0, "scsi0");
        let unknown: Vec<_> = c.unknown_keys().map(|(k, _)| k.as_str()).collect();
        assert_eq!(unknown, ["scsihw", "serial0", "vga"]);
        assert_eq!(c.raw["cores"], "2");
        assert!(c.lock.is_none());
    }

    #[test]
    fn a_config_under_create_lock() {
        let c = VmConfig::from_json(&json!({"digest": "abc", "lock": "create"}));
        assert_eq!(c.lock.as_deref(), Some("create"));
        assert!(c.disks.is_empty() && c.name.is_none());
    }

    #[test]
    fn memory_forms_and_agent_forms() {
        assert_eq!(parse_memory("4096"), Some(4096));
        assert_eq!(parse_memory("current=1024"), Some(1024));
        assert_eq!(parse_memory("x"), None);
        assert!(AgentConfig::parse("1").enabled);
        assert!(!AgentConfig::parse("0").enabled);
        assert!(!AgentConfig::parse("enabled=0,type=isa").enabled);
        assert_eq!(
            AgentConfig::parse("enabled=1,type=virtio").to_string(),
            "1,type=virtio"
        );
    }

    #[test]
    fn tags_compare_as_case_insensitive_sets() {
        assert_eq!(Tags::parse("b;A"), Tags::parse("a, B"));
        assert_ne!(Tags::parse("a"), Tags::parse("a;b"));
        assert!(Tags::parse("Prod").contains("prod"));
        assert!(Tags::parse(" ; ,").is_empty());
    }

    #[test]
    fn pending_entries() {
        let p =
            PendingEntry::from_json(&json!({"key":"memory","value":2048,"pending":4096})).unwrap();
        assert_eq!(p.value.as_deref(), Some("2048"));
        assert_eq!(p.pending.as_deref(), Some("4096"));
        assert!(p.is_pending());
        let d = PendingEntry::from_json(
            &json!({"key":"net1","value":"virtio,bridge=vmbr0","delete":1}),
        )
        .unwrap();
        assert_eq!(d.delete, Some(1));
        let plain = PendingEntry::from_json(&json!({"key":"cores","value":2})).unwrap();
        assert!(!plain.is_pending());
        assert!(PendingEntry::from_json(&json!({"value":1})).is_none());
    }
}
