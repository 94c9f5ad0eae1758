//! `status.atProvider`'s copy of the VM's configuration, in the shape of
//! `spec.forProvider`: Crossplane's import flow reads it and copies it into
//! the spec before switching an observed VM to full management.
//!
//! Plain types of their own, not the spec's: a status carries no CEL (the
//! API server counts each rule's cost again in every list holding it).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{NetworkModel, PowerState, ScsiController};

/// The configuration Proxmox shows, under the names of `spec.forProvider`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmObserved {
    /// The VM's name (`name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Virtual CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<ObservedCpu>,
    /// Memory, as a quantity (`2Gi`, `1536Mi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Disks (not CD-ROMs, not the cloud-init drive), by slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<ObservedDisk>,
    /// Network devices, by slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<ObservedNetwork>,
    /// Cloud-init settings Proxmox shows (never the password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<ObservedCloudInit>,
    /// QEMU guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<super::GuestAgent>,
    /// Whether the VM runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<PowerState>,
    /// Proxmox tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The notes, without the provider's owner marker line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Start at the node's boot (`onboot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_boot: Option<bool>,
    /// SCSI controller model (`scsihw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scsi_controller: Option<ScsiController>,
    /// `true` once the VM is a template (set by the pass that sees its
    /// conversion end; a ProxmoxImage's clones wait for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<bool>,
}

/// Virtual CPUs as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedCpu {
    /// Cores per socket.
    pub cores: u32,
    /// Sockets.
    pub sockets: u32,
    /// CPU model, when set.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// NUMA emulation, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<bool>,
}

/// A disk as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedDisk {
    /// Slot (`scsi0`, `virtio1`, ...).
    pub slot: String,
    /// Storage holding the volume.
    pub storage: String,
    /// Size, as a quantity, when Proxmox shows one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
}

/// A network device as observed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedNetwork {
    /// Slot (`net0` ...).
    pub slot: String,
    /// Card model.
    pub model: NetworkModel,
    /// Bridge (none: user-mode networking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
    /// VLAN tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_tag: Option<u16>,
    /// MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Proxmox firewall on this card.
    pub firewall: bool,
}

/// Cloud-init settings as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedCloudInit {
    /// `ciuser`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `sshkeys`, one key per item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_keys: Vec<String>,
    /// `ipconfigN`, by interface.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_configs: Vec<ObservedIpConfig>,
    /// `nameserver`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// `searchdomain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_domain: Option<String>,
    /// Storage of the cloud-init drive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Slot of the cloud-init drive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_slot: Option<String>,
}

/// `ipconfigN` as observed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservedIpConfig {
    /// `net0` ...
    pub interface: String,
    /// IPv4 address with prefix length, or `dhcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// IPv4 gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// IPv6 address with prefix length, `dhcp` or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip6: Option<String>,
    /// IPv6 gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway6: Option<String>,
}

/// A size in bytes as a Kubernetes quantity: whole GiB as `NGi`, else
/// whole MiB as `NMi`, else bytes.
pub fn quantity_of(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if bytes > 0 && bytes.is_multiple_of(GIB) {
        format!("{}Gi", bytes / GIB)
    } else if bytes > 0 && bytes.is_multiple_of(MIB) {
        format!("{}Mi", bytes / MIB)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_the_spec_writes_them() {
        let cases = [
            (32 << 30, "32Gi"),
            (1536 << 20, "1536Mi"),
            (2048 << 20, "2Gi"),
            (1000, "1000"),
            (0, "0"),
        ];
        for (bytes, want) in cases {
            assert_eq!(quantity_of(bytes), want, "{bytes}");
        }
    }
}
