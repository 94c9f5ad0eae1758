//! Network devices (`net0`..`net31`).

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::rules::{BRIDGE, BRIDGE_MESSAGE, VNET_MESSAGE};

/// One virtual network card.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkDevice {
    /// Slot: `net0` ... `net31`. Cloud-init `ipConfigs` refer to it.
    #[schemars(length(max = 5))]
    #[x_kube(validation = Rule::new("self.matches('^net([0-9]|[12][0-9]|3[01])$')")
        .message("slot must be net0 ... net31"))]
    pub slot: String,

    /// Card model.
    #[serde(default)]
    pub model: NetworkModel,

    /// Bridge to attach to, e.g. `vmbr0`.
    #[schemars(length(max = 15))]
    #[x_kube(validation = Rule::new(BRIDGE).message(BRIDGE_MESSAGE))]
    pub bridge: String,

    /// VLAN tag (1-4094). Left out: untagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan_tag: Option<u16>,

    /// MAC address. Left out: Proxmox generates one and the provider keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 17))]
    #[x_kube(validation = Rule::new("self.matches('^[0-9A-Fa-f][02468ACEace](:[0-9A-Fa-f]{2}){5}$')")
        .message("must be a unicast MAC address such as BC:24:11:12:34:56"))]
    pub mac: Option<String>,

    /// Enable the Proxmox firewall on this card.
    #[serde(default)]
    pub firewall: bool,

    /// Not a Proxmox NIC option, refused with a hint: Proxmox puts a NIC
    /// on an SDN VNet with `bridge: <the VNet's ID>` (a ProxmoxVNet's
    /// `status.atProvider.id`); `vnet=` gets a 400 from Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("false").message(VNET_MESSAGE))]
    pub vnet: Option<String>,
}

/// Network card models.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkModel {
    /// VirtIO (paravirtualised, fastest; the default).
    #[default]
    Virtio,
    /// Intel E1000.
    E1000,
    /// Intel E1000E.
    E1000e,
    /// Realtek RTL8139.
    Rtl8139,
    /// VMware vmxnet3.
    Vmxnet3,
}

impl NetworkModel {
    /// The model name Proxmox uses in `net<n>`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Virtio => "virtio",
            Self::E1000 => "e1000",
            Self::E1000e => "e1000e",
            Self::Rtl8139 => "rtl8139",
            Self::Vmxnet3 => "vmxnet3",
        }
    }

    /// Reads a Proxmox model name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Virtio,
            Self::E1000,
            Self::E1000e,
            Self::Rtl8139,
            Self::Vmxnet3,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}
