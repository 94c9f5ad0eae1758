//! Node endpoints: the node list.

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

impl Client {
    /// `GET /nodes`.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>> {
        self.get(ApiPath::new("/nodes", &[]), Params::new()).await
    }
}
