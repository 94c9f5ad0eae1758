//! Cluster-wide endpoints: version, next free VMID, resources.

use serde::Deserialize;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;

/// `GET /version`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Version {
    /// e.g. `9.1.4`.
    pub version: String,
    #[serde(default)]
    pub release: Option<String>,
    #[serde(default)]
    pub repoid: Option<String>,
}

impl Version {
    /// Whether it is `major.minor` or later (parts that do not parse
    /// count as 0).
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        let mut parts = self
            .version
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let have = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        have >= (major, minor)
    }

    /// Whether it has `oci-registry-pull` (Proxmox VE 9.1 or later).
    pub fn has_oci_registry_pull(&self) -> bool {
        self.at_least(9, 1)
    }
}

/// Which resources `/cluster/resources` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceType {
    Vm,
    Node,
    Storage,
}

impl ResourceType {
    fn as_str(self) -> &'static str {
        match self {
            ResourceType::Vm => "vm",
            ResourceType::Node => "node",
            ResourceType::Storage => "storage",
        }
    }
}

/// An entry of `GET /cluster/resources`. VM stats lag (pvestatd broadcasts
/// every 10 s), so a new VM shows `status: unknown` without a name at
/// first; `lock` and `tags` are read live.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Resource {
    /// `qemu/100`, `node/pve`, `storage/pve/local`.
    pub id: String,
    /// `qemu`, `lxc`, `node`, `storage`, `sdn`, ...
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub vmid: Option<u64>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub template: bool,
    /// A storage entry: the storage is shared by the nodes (`shared: 1`).
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub shared: bool,
    #[serde(default)]
    pub lock: Option<String>,
    #[serde(default)]
    pub tags: Option<String>,
    #[serde(default)]
    pub pool: Option<String>,
    /// Storage id (storage entries).
    #[serde(default)]
    pub storage: Option<String>,
    /// Storage content types, comma-separated.
    #[serde(default)]
    pub content: Option<String>,
    /// Seconds since the guest (or node) started; 0 when stopped.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    /// A storage entry's plugin (`lvmthin`, `lvm`, `dir`, `zfspool`, ...).
    #[serde(default)]
    pub plugintype: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub mem: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub maxcpu: Option<f64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxdisk: Option<u64>,
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub disk: Option<u64>,
}

/// `GET /cluster/options`: the datacenter settings this client reads.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ClusterOptions {
    /// `next-id`: the range `/cluster/nextid` hands out, when set.
    #[serde(default, rename = "next-id")]
    pub next_id: Option<NextIdRange>,
}

/// datacenter.cfg `next-id: lower=N,upper=M` (upper exclusive).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct NextIdRange {
    /// First VMID handed out (PVE's default 100).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub lower: Option<u64>,
    /// One past the last (PVE's default 1000000).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub upper: Option<u64>,
}

impl Client {
    /// `GET /cluster/options`.
    pub async fn cluster_options(&self) -> Result<ClusterOptions> {
        self.get(ApiPath::new("/cluster/options", &[]), Params::new())
            .await
    }

    /// `GET /version`.
    pub async fn version(&self) -> Result<Version> {
        self.get(ApiPath::new("/version", &[]), Params::new()).await
    }

    /// `GET /cluster/nextid`: the first free VMID. PVE answers a JSON
    /// string (`"100"`) although the schema says integer; both are
    /// accepted. The ID is **not reserved**: another client may take it
    /// before the create.
    pub async fn next_vmid(&self) -> Result<u32> {
        let v: serde_json::Value = self
            .get(ApiPath::new("/cluster/nextid", &[]), Params::new())
            .await?;
        lenient::value_u64(&v)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| Error::protocol(format!("/cluster/nextid returned {v}")))
    }

    /// `GET /cluster/resources[?type=...]`.
    pub async fn cluster_resources(&self, kind: Option<ResourceType>) -> Result<Vec<Resource>> {
        self.get(
            ApiPath::new("/cluster/resources", &[]),
            Params::new().opt("type", kind.map(ResourceType::as_str)),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_id_range_reads_strings_and_numbers() {
        let opts: ClusterOptions = serde_json::from_value(serde_json::json!({
            "next-id": {"lower": "1000", "upper": 2000},
            "keyboard": "en-us",
        }))
        .unwrap();
        assert_eq!(
            opts.next_id,
            Some(NextIdRange {
                lower: Some(1000),
                upper: Some(2000)
            })
        );
        let none: ClusterOptions = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(none.next_id, None);
    }
    use serde_json::json;

    #[test]
    fn version_decodes() {
        let v: Version =
            serde_json::from_value(json!({"version":"9.1.4","release":"9.1","repoid":"x"}))
                .unwrap();
        assert_eq!(v.version, "9.1.4");
        assert_eq!(v.release.as_deref(), Some("9.1"));
    }

    #[test]
    fn resources_decode_with_lag_fields() {
        let r: Vec<Resource> = serde_json::from_value(json!([
            {"id":"qemu/100","type":"qemu","vmid":100,"node":"pve","status":"unknown","lock":"create","template":0},
            {"id":"node/pve","type":"node","node":"pve","status":"online","maxcpu":8,"maxmem":34359738368u64},
            {"id":"storage/pve/local","type":"storage","node":"pve","storage":"local","content":"iso,import","status":"available"}
        ]))
        .unwrap();
        assert_eq!(r[0].vmid, Some(100));
        assert_eq!(r[0].lock.as_deref(), Some("create"));
        assert!(r[0].name.is_none());
        assert_eq!(r[1].maxcpu, Some(8.0));
        assert_eq!(r[2].content.as_deref(), Some("iso,import"));
    }
}
