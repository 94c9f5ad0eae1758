//! Virtual machines: typed config, parameters, and the `qemu` endpoints.

mod api;
pub mod cloudinit;
pub mod config;
pub mod disk;
pub mod net;
pub mod params;
pub(crate) mod propstring;
pub mod size;

pub use api::VmStatus;
pub use cloudinit::{IpConfig, decode_sshkeys, encode_sshkeys};
pub use config::{AgentConfig, MASKED_PASSWORD, PendingEntry, Tags, VmConfig};
pub use disk::{Disk, DiskSpec, is_disk_key};
pub use net::Nic;
pub use params::{CloneVm, ConfigUpdate, CreateVm, DeleteOptions, ShutdownOptions, VmParams};
pub use size::{DiskSize, format_size, gib, parse_size};
