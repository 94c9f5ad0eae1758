//! Containers: the endpoints under `/nodes/{node}/lxc` (pve-container's
//! `PVE::API2::LXC`) and the OCI image pull of pve-storage
//! (`/nodes/{node}/storage/{storage}/oci-registry-pull`, PVE 9.1), with the
//! request parameters they take and the config they return.
//!
//! Containers share the VMID space, the task machinery and the config locks
//! with VMs; what differs is the vocabulary (`rootfs`/`mpN` volumes,
//! `netN` with the IP inside, `features`, `swap`) and that a config update
//! is synchronous (`PUT .../config` allocates no disk here).

mod api;
mod params;

pub use api::{ContainerConfig, ContainerStatus};
pub use params::{
    ContainerNet, ContainerUpdate, ContainerVolume, CreateContainer, Features, OciPull,
    oci_file_name,
};
