//! A cluster node: its size, whether it is online, and the usage figures
//! that follow the guests running on it.

use super::Vm;

pub const GIB: u64 = 1 << 30;

/// What the host itself uses besides its guests (kernel, pmxcfs, daemons).
pub const HOST_MEMORY_USED: u64 = 2 * GIB + 512 * (1 << 20);

#[derive(Clone, Debug, PartialEq)]
pub struct NodeState {
    pub name: String,
    /// Corosync node ID (1-based).
    pub nodeid: u32,
    /// Total memory in bytes.
    pub memory: u64,
    /// Logical CPUs.
    pub cpus: u32,
    /// Offline nodes answer nothing (595 through the proxy).
    pub online: bool,
    /// The Linux bridges of `/etc/network/interfaces` (`vmbr0`): a NIC on
    /// any other bridge fails at start (`bridge 'vmbr9' does not exist`).
    pub bridges: Vec<String>,
}

impl NodeState {
    pub fn new(name: &str, nodeid: u32) -> Self {
        Self {
            name: name.to_owned(),
            nodeid,
            memory: 64 * GIB,
            cpus: 16,
            online: true,
            bridges: vec!["vmbr0".to_owned()],
        }
    }

    /// An address in 192.0.2.0/24 (TEST-NET-1) per node.
    pub fn ip(&self) -> String {
        format!("192.0.2.{}", 10 + self.nodeid)
    }

    /// Memory in use: the host's own plus all memory of its running guests
    /// (KVM backs the whole configured memory once the guest touched it).
    pub fn mem_used<'a>(&self, guests: impl Iterator<Item = &'a Vm>) -> u64 {
        let guests: u64 = guests
            .filter(|g| g.node == self.name && g.is_running())
            .map(|g| g.memory_mib() << 20)
            .sum();
        (HOST_MEMORY_USED + guests).min(self.memory)
    }

    /// CPU load (0..1): a little for the host, 2 % of a core per running vCPU.
    pub fn cpu_load<'a>(&self, guests: impl Iterator<Item = &'a Vm>) -> f64 {
        let vcpus: u64 = guests
            .filter(|g| g.node == self.name && g.is_running())
            .map(Vm::cpus)
            .sum();
        let load = 0.01 + vcpus as f64 * 0.02 / f64::from(self.cpus.max(1));
        (load * 10_000.0).round() / 10_000.0
    }
}
