//! Node endpoints: the node list and node status.

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

/// Memory figures of `GET /nodes/{node}/status`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct NodeMemory {
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub total: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub used: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub free: Option<u64>,
}

/// `GET /nodes/{node}/status` (the fields a placement decision needs).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct NodeStatus {
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub cpu: Option<f64>,
    #[serde(default)]
    pub memory: NodeMemory,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    #[serde(default)]
    pub pveversion: Option<String>,
    #[serde(default)]
    pub kversion: Option<String>,
    /// Everything, for fields not typed here.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Client {
    /// `GET /nodes`.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>> {
        self.get(ApiPath::new("/nodes", &[]), Params::new()).await
    }

    /// `GET /nodes/{node}/status`.
    pub async fn node_status(&self, node: &str) -> Result<NodeStatus> {
        self.get(ApiPath::new("/nodes/{node}/status", &[node]), Params::new())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_status_decodes() {
        let s: NodeStatus = serde_json::from_value(serde_json::json!({
            "cpu": 0.05, "uptime": 1000, "pveversion": "pve-manager/9.1.4/x",
            "memory": {"total": 100, "used": 40, "free": 60}, "loadavg": ["0.1","0.2","0.3"]
        }))
        .unwrap();
        assert_eq!(s.memory.free, Some(60));
        assert!(s.extra.contains_key("loadavg"));
    }
}
