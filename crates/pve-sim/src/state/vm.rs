//! A virtual machine: its configuration (the text PVE keeps in
//! `/etc/pve/qemu-server/<vmid>.conf`), pending changes and power state.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::schema::format::parse_size;
use crate::schema::{propstr, qemu};

#[derive(Clone, Debug)]
pub struct Running {
    pub pid: u32,
    pub since: Instant,
    pub since_epoch: u64,
    /// When the guest agent starts answering.
    pub agent_ready: Instant,
}

/// A QEMU VM or an LXC container: both share the VMID space, locks, tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GuestKind {
    #[default]
    Qemu,
    Lxc,
}

impl GuestKind {
    /// The `type` of `/cluster/resources` and the first part of its `id`.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Qemu => "qemu",
            Self::Lxc => "lxc",
        }
    }

    /// The directory of the config file under `/etc/pve/nodes/NODE/`.
    pub fn config_dir(self) -> &'static str {
        match self {
            Self::Qemu => "qemu-server",
            Self::Lxc => "lxc",
        }
    }

    /// The HA service type (`vm:100`, `ct:100`).
    pub fn ha_type(self) -> &'static str {
        match self {
            Self::Qemu => "vm",
            Self::Lxc => "ct",
        }
    }
}

/// A snapshot: the config at the time and its place in the tree.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub config: BTreeMap<String, String>,
    pub snaptime: u64,
    pub description: String,
    pub parent: Option<String>,
    pub vmstate: bool,
}

#[derive(Clone, Debug)]
pub struct Vm {
    pub vmid: u32,
    pub kind: GuestKind,
    pub node: String,
    pub config: BTreeMap<String, String>,
    pub pending: BTreeMap<String, String>,
    pub pending_delete: BTreeSet<String>,
    pub running: Option<Running>,
    pub snapshots: BTreeMap<String, Snapshot>,
    /// Files and processes inside the guest (reached through the agent).
    pub guest: super::guest::GuestState,
    /// The resource pool the guest belongs to.
    pub pool: Option<String>,
    /// The guest's own firewall (options and rules).
    pub firewall: super::firewall::GuestFirewall,
    /// When the VM appeared (for the `/cluster/resources` lag); `None` for
    /// VMs that existed before the simulator started.
    pub created: Option<Instant>,
}

impl Vm {
    pub fn new(vmid: u32, node: &str, config: BTreeMap<String, String>) -> Self {
        Self {
            vmid,
            kind: GuestKind::Qemu,
            node: node.to_owned(),
            config,
            pending: BTreeMap::new(),
            pending_delete: BTreeSet::new(),
            running: None,
            pool: None,
            firewall: Default::default(),
            guest: Default::default(),
            snapshots: BTreeMap::new(),
            created: Some(Instant::now()),
        }
    }

    /// A placeholder config holding only a lock (`lock: create`, `lock: clone`).
    pub fn locked(vmid: u32, node: &str, lock: &str) -> Self {
        Self::new(
            vmid,
            node,
            BTreeMap::from([("lock".to_owned(), lock.to_owned())]),
        )
    }

    pub fn lock(&self) -> Option<&str> {
        self.config.get("lock").map(String::as_str)
    }

    /// `check_lock`: `VM is locked (create)`.
    pub fn check_lock(&self) -> Result<(), String> {
        match self.lock() {
            Some(l) => Err(format!("VM is locked ({l})")),
            None => Ok(()),
        }
    }

    pub fn is_template(&self) -> bool {
        self.config.get("template").is_some_and(|t| t == "1")
    }

    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    pub fn name(&self) -> String {
        self.config
            .get("name")
            .cloned()
            .unwrap_or_else(|| format!("VM {}", self.vmid))
    }

    /// The config file text (keys sorted, like `write_config` does in effect).
    pub fn config_text(&self) -> String {
        let mut text = String::new();
        for (k, v) in &self.config {
            if k == "description" {
                for line in v.lines() {
                    text.push_str(&format!("#{line}\n"));
                }
            } else {
                text.push_str(&format!("{k}: {v}\n"));
            }
        }
        if !self.pending.is_empty() || !self.pending_delete.is_empty() {
            text.push_str("\n[PENDING]\n");
            for (k, v) in &self.pending {
                text.push_str(&format!("{k}: {v}\n"));
            }
            if !self.pending_delete.is_empty() {
                text.push_str(&format!(
                    "delete: {}\n",
                    self.pending_delete
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
        }
        text
    }

    /// The config digest. PVE uses SHA-1 of the file; we use the first 40
    /// hex digits of SHA-256, which clients treat the same (opaque, 40 chars).
    pub fn digest(&self) -> String {
        Sha256::digest(self.config_text().as_bytes())
            .iter()
            .take(20)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Disk keys with their parsed drive property strings.
    pub fn drives(&self) -> Vec<(String, BTreeMap<String, String>)> {
        drives_of(&self.config)
    }

    /// Volume IDs referenced by the config (disks, unused, cloud-init).
    pub fn volumes(&self) -> Vec<String> {
        self.drives()
            .into_iter()
            .filter_map(|(_, d)| d.get("file").cloned())
            .filter(|f| f.contains(':') && !f.starts_with('/'))
            .collect()
    }

    pub fn memory_mib(&self) -> u64 {
        self.config
            .get("memory")
            .and_then(|m| propstr::MEMORY.parse("memory", m).ok())
            .and_then(|m| m.get("current").and_then(|c| c.parse().ok()))
            .unwrap_or(512)
    }

    /// `sockets` × `cores`: the vCPUs the VM may have (qemu-server's
    /// `maxcpus`), which the host must have at start.
    pub fn max_cpus(&self) -> u64 {
        let get = |k: &str| self.config.get(k).and_then(|v| v.parse::<u64>().ok());
        get("sockets").unwrap_or(1) * get("cores").unwrap_or(1)
    }

    pub fn cpus(&self) -> u64 {
        let get = |k: &str| self.config.get(k).and_then(|v| v.parse::<u64>().ok());
        get("vcpus").unwrap_or_else(|| get("sockets").unwrap_or(1) * get("cores").unwrap_or(1))
    }

    /// The size of the boot disk (PVE reports this as `maxdisk`).
    pub fn maxdisk(&self) -> u64 {
        self.drives()
            .into_iter()
            .filter(|(k, d)| {
                !k.starts_with("unused") && d.get("media").is_none_or(|m| m != "cdrom")
            })
            .find_map(|(_, d)| d.get("size").and_then(|s| parse_size(s)))
            .unwrap_or(0)
    }

    pub fn agent_enabled(&self) -> bool {
        self.config
            .get("agent")
            .and_then(|a| propstr::AGENT.parse("agent", a).ok())
            .is_some_and(|a| a.get("enabled").is_some_and(|e| e == "1"))
    }

    /// Uptime in seconds of simulated time.
    pub fn uptime(&self, scale: f64) -> u64 {
        self.running
            .as_ref()
            .map_or(0, |r| (r.since.elapsed().as_secs_f64() / scale) as u64)
    }
}

/// Disk keys of a VM config (the current one or a snapshot's) with their
/// parsed drive property strings.
pub fn drives_of(config: &BTreeMap<String, String>) -> Vec<(String, BTreeMap<String, String>)> {
    config
        .iter()
        .filter_map(|(k, v)| {
            let format = qemu::drive_format(k)
                .or_else(|| k.starts_with("unused").then_some(&propstr::UNUSED))?;
            Some((k.clone(), format.parse(k, v).ok()?))
        })
        .collect()
}
