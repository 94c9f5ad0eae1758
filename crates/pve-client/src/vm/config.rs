//! A VM config as `GET .../config` returns it, typed where a reconciler
//! compares values, with every key also kept raw.

use std::collections::BTreeMap;

use crate::lenient::scalar_to_string;
use crate::vm::{
    AgentConfig, Boot, CpuConfig, Drive, IpConfig, Nic, ScsiHw, SshKeys, Tags, ipconfig_index,
    is_disk_key, net_index, parse_bool, parse_memory,
};

/// What PVE shows instead of a set `cipassword`.
pub const MASKED_PASSWORD: &str = "**********";

/// A typed view of a VM config. A value the model cannot read is left out
/// of the typed fields (and kept in `raw`).
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
    pub cpu: Option<CpuConfig>,
    pub agent: Option<AgentConfig>,
    pub onboot: Option<bool>,
    pub template: bool,
    pub scsihw: Option<ScsiHw>,
    pub ciuser: Option<String>,
    /// PVE never returns the password, only whether one is set.
    pub cipassword_set: bool,
    /// Decoded, one key per entry.
    pub sshkeys: Vec<String>,
    pub ipconfig: BTreeMap<u32, IpConfig>,
    /// As written (space-separated).
    pub nameserver: Option<String>,
    pub searchdomain: Option<String>,
    pub boot: Option<Boot>,
    /// A config lock (`create`, `clone`, `backup`, ...).
    pub lock: Option<String>,
    pub tags: Tags,
    /// Drives and unused volumes by key.
    pub disks: BTreeMap<String, Drive>,
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
            | "scsihw"
            | "ciuser"
            | "cipassword"
            | "sshkeys"
            | "nameserver"
            | "searchdomain"
            | "boot"
            | "lock"
            | "tags"
    ) || is_disk_key(key)
        || net_index(key).is_some()
        || ipconfig_index(key).is_some()
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
        let read = |k: &str| raw.get(k).map(String::as_str);
        let mut c = VmConfig {
            digest: get("digest"),
            name: get("name"),
            description: get("description"),
            memory: read("memory").and_then(|m| parse_memory(m).ok()),
            cores: read("cores").and_then(|v| v.parse().ok()),
            sockets: read("sockets").and_then(|v| v.parse().ok()),
            cpu: read("cpu").and_then(|v| v.parse().ok()),
            agent: read("agent").map(AgentConfig::parse),
            onboot: read("onboot").and_then(parse_bool),
            template: read("template").and_then(parse_bool).unwrap_or(false),
            scsihw: read("scsihw").and_then(|v| v.parse().ok()),
            ciuser: get("ciuser"),
            cipassword_set: read("cipassword").is_some_and(|p| !p.is_empty()),
            sshkeys: read("sshkeys")
                .and_then(|k| SshKeys::parse(k).ok())
                .map(|k| k.keys().to_vec())
                .unwrap_or_default(),
            nameserver: get("nameserver"),
            searchdomain: get("searchdomain"),
            boot: read("boot").and_then(|v| v.parse().ok()),
            lock: get("lock"),
            tags: read("tags").map(Tags::parse).unwrap_or_default(),
            ..VmConfig::default()
        };
        for (key, value) in &raw {
            if is_disk_key(key) {
                if let Ok(drive) = Drive::parse(value) {
                    c.disks.insert(key.clone(), drive);
                }
            } else if let Some(i) = net_index(key) {
                if let Ok(nic) = Nic::parse(value) {
                    c.nets.insert(i, nic);
                }
            } else if let Some(i) = ipconfig_index(key)
                && let Ok(ip) = IpConfig::parse(value)
            {
                c.ipconfig.insert(i, ip);
            }
        }
        c.raw = raw;
        c
    }

    /// Keys this type does not interpret (`ostype`, `vga`, `serial0`, ...).
    pub fn unknown_keys(&self) -> impl Iterator<Item = (&String, &String)> {
        self.raw.iter().filter(|(k, _)| !is_typed_key(k))
    }

    /// The boot order devices (`order=scsi0;ide2` → `["scsi0", "ide2"]`).
    pub fn boot_order(&self) -> &[String] {
        self.boot.as_ref().map_or(&[], |b| b.order.as_slice())
    }

    /// The first non-CD-ROM, non-unused disk in boot order, else by key.
    pub fn boot_disk(&self) -> Option<(&String, &Drive)> {
        let is_data = |k: &String, d: &Drive| !d.is_cdrom() && !k.starts_with("unused");
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
        assert_eq!(c.ipconfig[&0].gw, "10.0.0.1".parse().ok());
        assert_eq!(c.tags, Tags::parse("k8s,prod,web"));
        assert_eq!(
            c.cpu.as_ref().and_then(|c| c.cputype.as_deref()),
            Some("x86-64-v2-AES")
        );
        assert_eq!(c.scsihw, Some(ScsiHw::VirtioScsiPci));
        assert_eq!(c.disks.len(), 3);
        assert_eq!(c.disks["scsi0"].size, Some(3584 << 20));
        assert_eq!(c.nets[&0].tag, Some(10));
        assert_eq!(c.boot_order(), ["scsi0", "ide2", "net0"]);
        assert_eq!(c.boot_disk().unwrap().0, "scsi0");
        let unknown: Vec<_> = c.unknown_keys().map(|(k, _)| k.as_str()).collect();
        assert_eq!(unknown, ["serial0", "vga"]);
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
    fn values_the_model_cannot_read_stay_raw() {
        let c = VmConfig::from_json(&json!({
            "memory": "current=1024", "net0": "tulip,bridge=vmbr0", "scsi0": "nowhere",
            "onboot": "yes", "agent": "on"
        }));
        assert_eq!(c.memory, Some(1024));
        assert!(c.nets.is_empty() && c.disks.is_empty());
        assert_eq!(c.raw["net0"], "tulip,bridge=vmbr0");
        assert_eq!(c.onboot, Some(true));
        assert!(c.agent.unwrap().enabled);
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
