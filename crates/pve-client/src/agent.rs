//! Guest agent: network interfaces, with "not ready yet" told apart from
//! real errors.

use serde::Deserialize;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::form::Params;
use crate::request::ApiPath;

/// An interface as the agent reports it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct AgentInterface {
    pub name: String,
    #[serde(rename = "hardware-address", default)]
    pub hardware_address: Option<String>,
    #[serde(rename = "ip-addresses", default)]
    pub ip_addresses: Vec<AgentIpAddress>,
}

/// An address of an [`AgentInterface`].
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct AgentIpAddress {
    /// `ipv4` or `ipv6`.
    #[serde(rename = "ip-address-type")]
    pub kind: String,
    #[serde(rename = "ip-address")]
    pub address: String,
    #[serde(default)]
    pub prefix: Option<u8>,
}

/// Why the agent could not answer (yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentNotReady {
    /// `No QEMU guest agent configured`: `agent=1` is missing.
    NotConfigured,
    /// `VM <id> is not running`.
    VmNotRunning,
    /// `QEMU guest agent is not running`, or a QMP timeout: the guest is
    /// still booting or has no agent installed.
    AgentNotRunning,
}

/// The answer of `agent/network-get-interfaces`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentNetwork {
    Ready(Vec<AgentInterface>),
    NotReady {
        reason: AgentNotReady,
        message: String,
    },
}

impl AgentNetwork {
    /// Non-loopback, non-link-local addresses of all interfaces.
    pub fn addresses(&self) -> Vec<&AgentIpAddress> {
        match self {
            AgentNetwork::Ready(ifaces) => ifaces
                .iter()
                .filter(|i| i.name != "lo")
                .flat_map(|i| &i.ip_addresses)
                .filter(|a| {
                    !a.address.starts_with("127.")
                        && a.address != "::1"
                        && !a.address.to_ascii_lowercase().starts_with("fe80:")
                })
                .collect(),
            AgentNetwork::NotReady { .. } => Vec::new(),
        }
    }
}

/// Maps agent error messages to a not-ready reason.
pub(crate) fn not_ready_reason(message: &str) -> Option<AgentNotReady> {
    let m = message.to_ascii_lowercase();
    if m.contains("no qemu guest agent configured") {
        Some(AgentNotReady::NotConfigured)
    } else if m.contains("guest agent is not running")
        || (m.contains("qmp command") && m.contains("got timeout"))
    {
        Some(AgentNotReady::AgentNotRunning)
    } else if m.contains("is not running") {
        Some(AgentNotReady::VmNotRunning)
    } else {
        None
    }
}

#[derive(Deserialize)]
struct ResultWrapper {
    result: Vec<AgentInterface>,
}

impl Client {
    /// `GET .../agent/network-get-interfaces`.
    pub async fn agent_network_interfaces(&self, node: &str, vmid: u32) -> Result<AgentNetwork> {
        let answer: Result<ResultWrapper> = self
            .get(
                ApiPath::new(
                    "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
                    &[node, &vmid.to_string()],
                ),
                Params::new(),
            )
            .await;
        match answer {
            Ok(w) => Ok(AgentNetwork::Ready(w.result)),
            Err(Error::Api { message, status }) => match not_ready_reason(&message) {
                Some(reason) => Ok(AgentNetwork::NotReady { reason, message }),
                None => Err(Error::Api { status, message }),
            },
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_ready_table() {
        let cases = [
            (
                "No QEMU guest agent configured",
                Some(AgentNotReady::NotConfigured),
            ),
            ("VM 100 is not running", Some(AgentNotReady::VmNotRunning)),
            (
                "QEMU guest agent is not running",
                Some(AgentNotReady::AgentNotRunning),
            ),
            (
                "VM 100 qmp command 'guest-network-get-interfaces' failed - got timeout",
                Some(AgentNotReady::AgentNotRunning),
            ),
            ("Permission check failed", None),
            ("something else broke", None),
        ];
        for (msg, want) in cases {
            assert_eq!(not_ready_reason(msg), want, "{msg}");
        }
    }

    #[test]
    fn addresses_skip_loopback_and_link_local() {
        let ifaces: Vec<AgentInterface> = serde_json::from_value(serde_json::json!([
            {"name":"lo","hardware-address":"00:00:00:00:00:00","ip-addresses":[{"ip-address-type":"ipv4","ip-address":"127.0.0.1","prefix":8}]},
            {"name":"eth0","hardware-address":"bc:24:11:00:00:01","ip-addresses":[
                {"ip-address-type":"ipv4","ip-address":"10.0.0.5","prefix":24},
                {"ip-address-type":"ipv6","ip-address":"fe80::1","prefix":64}]}
        ]))
        .unwrap();
        let net = AgentNetwork::Ready(ifaces);
        let addrs: Vec<_> = net.addresses().iter().map(|a| a.address.as_str()).collect();
        assert_eq!(addrs, ["10.0.0.5"]);
    }
}
