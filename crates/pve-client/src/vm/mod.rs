//! Virtual machines: the typed model of PVE's config values, the typed
//! config, request parameters, and the `qemu` endpoints.
//!
//! Every value type reads what PVE shows or accepts with [`std::str::FromStr`]
//! (and a `parse` shorthand) and writes what PVE accepts with
//! [`std::fmt::Display`], following qemu-server's formats (`pve-qm-drive`,
//! `pve-qm-net`, `pve-qm-ipconfig`, ...) and pve-common's property-string
//! rules. What PVE refuses does not parse ([`InvalidValue`]); options newer
//! than the model are kept as written, so a value read and written back
//! loses nothing.

mod agent;
mod api;
mod boot;
mod cloudinit;
mod config;
mod console;
mod cpu;
mod description;
mod devices;
mod drive;
mod firmware;
mod hardware;
mod ipconfig;
mod key;
mod memory;
mod motion;
mod net;
mod params;
mod propstring;
mod scsihw;
mod size;
mod startup;
mod tags;
mod template;
mod value;

#[cfg(test)]
mod props;

pub use agent::{AgentConfig, AgentType};
pub use api::VmStatus;
pub use boot::Boot;
pub use cloudinit::{Nameservers, SshKeys};
pub use config::{MASKED_PASSWORD, PendingEntry, VmConfig};
pub use console::{MAX_SERIALS, SerialPort, Vga, VgaType, serial_index};
pub use cpu::CpuConfig;
pub use description::{Description, MAX_DESCRIPTION};
pub use devices::{
    HostPci, Hotplug, HotplugFeature, MAX_HOSTPCI, MAX_USB, Rng, RngSource, Usb, hostpci_index,
    usb_index,
};
pub use drive::{Drive, DriveFile, Media};
pub use firmware::{
    Bios, Chipset, EfiDisk, EfiType, Machine, MachineType, TpmState, TpmVersion, Viommu,
};
pub use hardware::Hardware;
pub use ipconfig::{Cidr, IpConfig, Ipv4Config, Ipv6Config};
pub use key::{
    Bus, DriveKey, MAX_NETS, ipconfig_index, ipconfig_key, is_disk_key, net_index, net_key,
};
pub use memory::parse_memory;
pub use motion::{MigrateVm, MoveDisk};
pub use net::{MacAddr, Nic, NicModel};
pub use params::{CloneVm, ConfigUpdate, CreateVm, DeleteOptions, ShutdownOptions, VmParams};
pub use scsihw::ScsiHw;
pub use size::{DiskSize, format_size, gib, parse_size};
pub use startup::Startup;
pub use tags::Tags;
pub use value::{InvalidValue, is_dns_name, is_storage_id, parse_bool};

/// PVE's defaults for settings a config leaves out.
pub mod defaults {
    /// `cores`.
    pub const CORES: u32 = 1;
    /// `sockets`.
    pub const SOCKETS: u32 = 1;
    /// `memory`, MiB.
    pub const MEMORY_MIB: u64 = 512;
    /// `onboot`.
    pub const ONBOOT: bool = false;
    /// `protection`.
    pub const PROTECTION: bool = false;
    /// `numa`.
    pub const NUMA: bool = false;
}
