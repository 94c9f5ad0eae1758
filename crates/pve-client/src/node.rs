//! Node endpoints: the node list, a node's network interfaces.

use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;

/// An entry of `GET /nodes`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct NodeInfo {
    pub node: String,
    /// `online`, `offline` or `unknown`.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub maxcpu: Option<f64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub mem: Option<u64>,
    /// The certificate fingerprint the cluster knows for the node.
    #[serde(default)]
    pub ssl_fingerprint: Option<String>,
}

/// An entry of `GET /nodes/{node}/network`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct NetworkInterface {
    /// `vmbr0`, `eno1`, a VNet's name.
    pub iface: String,
    /// `bridge`, `OVSBridge`, `vnet`, `eth`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Of a VNet: whether it carries VLAN tags (PVE refuses a NIC's `tag`
    /// on a VNet that does not, when the guest starts).
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub vlanaware: Option<bool>,
}

impl Client {
    /// `GET /nodes`.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>> {
        self.get(ApiPath::new("/nodes", &[]), Params::new()).await
    }

    /// `GET /nodes/{node}/network?type=any_bridge`: what a NIC's `bridge`
    /// may name on the node, its Linux and OVS bridges and the SDN VNets
    /// the token may see.
    pub async fn node_bridges(&self, node: &str) -> Result<Vec<NetworkInterface>> {
        self.get(
            ApiPath::new("/nodes/{node}/network", &[node]),
            Params::new().opt("type", Some("any_bridge")),
        )
        .await
    }
}
