//! High availability, `/cluster/ha` (pve-ha-manager `PVE::API2::HA::*`):
//! resources (`vm:100`), node-affinity rules (PVE 9) and groups (PVE 8,
//! migrated to rules by PVE 9). Every call here is synchronous: it writes
//! the HA configuration and returns; the HA manager acts on it afterwards.
//! All need `Sys.Console` on `/` (reads `Sys.Audit`).

use reqwest::Method;
use serde::Deserialize;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::lenient;
use crate::request::ApiPath;

/// An entry of `GET /cluster/ha/resources`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct HaResource {
    /// `vm:100`.
    pub sid: String,
    /// Requested state: `started`, `stopped`, `disabled`, `ignored`.
    #[serde(default)]
    pub state: Option<String>,
    /// PVE 8: the HA group.
    #[serde(default)]
    pub group: Option<String>,
}

/// An entry of `GET /cluster/ha/rules` (PVE 9).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct HaRule {
    /// Rule ID.
    pub rule: String,
    /// `node-affinity` or `resource-affinity`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Comma-separated resource IDs.
    #[serde(default)]
    pub resources: Option<String>,
    /// Comma-separated `node[:priority]`.
    #[serde(default)]
    pub nodes: Option<String>,
    /// Strict node affinity.
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub strict: bool,
}

/// An entry of `GET /cluster/ha/groups` (PVE 8).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct HaGroup {
    /// Group ID.
    pub group: String,
    /// Comma-separated `node[:priority]`.
    #[serde(default)]
    pub nodes: Option<String>,
    /// Only these nodes.
    #[serde(default, deserialize_with = "lenient::bool_any")]
    pub restricted: bool,
}

/// The node names of a `node[:priority]` list, sorted.
pub fn ha_nodes(list: &str) -> Vec<String> {
    let mut nodes: Vec<String> = list
        .split([',', ';', ' '])
        .map(|n| n.split(':').next().unwrap_or_default().trim())
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// What a create or update of a resource sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HaResourceSpec {
    /// `vm:100`.
    pub sid: String,
    /// Requested state.
    pub state: String,
    /// PVE 8: the group.
    pub group: Option<String>,
    /// A comment (who manages it).
    pub comment: Option<String>,
}

/// What a node-affinity rule (PVE 9) or a group (PVE 8) holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HaAffinity {
    /// Rule or group ID.
    pub id: String,
    /// `vm:100` (rules only: a group names no resources).
    pub sid: String,
    /// Node names.
    pub nodes: Vec<String>,
    /// Strict (rule) or restricted (group).
    pub strict: bool,
    /// A comment (who manages it).
    pub comment: Option<String>,
}

impl Client {
    /// `GET /cluster/ha/resources`.
    pub async fn ha_resources(&self) -> Result<Vec<HaResource>> {
        self.get(ApiPath::new("/cluster/ha/resources", &[]), Params::new())
            .await
    }

    /// `POST /cluster/ha/resources`.
    pub async fn create_ha_resource(&self, spec: &HaResourceSpec) -> Result<()> {
        let params = Params::new()
            .text("sid", &spec.sid)
            .text("state", &spec.state)
            .opt("group", spec.group.as_deref())
            .opt("comment", spec.comment.as_deref());
        self.write_null(
            Method::POST,
            ApiPath::new("/cluster/ha/resources", &[]),
            params,
        )
        .await
    }

    /// `PUT /cluster/ha/resources/{sid}`: state and group.
    pub async fn update_ha_resource(&self, spec: &HaResourceSpec) -> Result<()> {
        let params = Params::new()
            .text("state", &spec.state)
            .opt("group", spec.group.as_deref());
        let path = ApiPath::new("/cluster/ha/resources/{sid}", &[&spec.sid]);
        self.write_null(Method::PUT, path, params).await
    }

    /// `DELETE /cluster/ha/resources/{sid}` (`purge` defaults to on: the
    /// resource also leaves the rules naming it, and rules left empty go).
    pub async fn delete_ha_resource(&self, sid: &str) -> Result<()> {
        let path = ApiPath::new("/cluster/ha/resources/{sid}", &[sid]);
        self.write_null(Method::DELETE, path, Params::new()).await
    }

    /// `GET /cluster/ha/rules` (PVE 9).
    pub async fn ha_rules(&self) -> Result<Vec<HaRule>> {
        self.get(ApiPath::new("/cluster/ha/rules", &[]), Params::new())
            .await
    }

    /// `POST /cluster/ha/rules`: a `node-affinity` rule.
    pub async fn create_ha_node_affinity(&self, a: &HaAffinity) -> Result<()> {
        let params = Params::new()
            .text("rule", &a.id)
            .text("type", "node-affinity")
            .text("resources", &a.sid)
            .text("nodes", a.nodes.join(","))
            .flag("strict", a.strict)
            .opt("comment", a.comment.as_deref());
        self.write_null(Method::POST, ApiPath::new("/cluster/ha/rules", &[]), params)
            .await
    }

    /// `PUT /cluster/ha/rules/{rule}`: nodes and strictness.
    pub async fn update_ha_node_affinity(&self, a: &HaAffinity) -> Result<()> {
        let params = Params::new()
            .text("type", "node-affinity")
            .text("resources", &a.sid)
            .text("nodes", a.nodes.join(","))
            .flag("strict", a.strict);
        let path = ApiPath::new("/cluster/ha/rules/{rule}", &[&a.id]);
        self.write_null(Method::PUT, path, params).await
    }

    /// `GET /cluster/ha/groups` (PVE 8).
    pub async fn ha_groups(&self) -> Result<Vec<HaGroup>> {
        self.get(ApiPath::new("/cluster/ha/groups", &[]), Params::new())
            .await
    }

    /// `POST /cluster/ha/groups` (PVE 8).
    pub async fn create_ha_group(&self, a: &HaAffinity) -> Result<()> {
        let params = Params::new()
            .text("group", &a.id)
            .text("nodes", a.nodes.join(","))
            .flag("restricted", a.strict)
            .opt("comment", a.comment.as_deref());
        self.write_null(
            Method::POST,
            ApiPath::new("/cluster/ha/groups", &[]),
            params,
        )
        .await
    }

    /// `PUT /cluster/ha/groups/{group}` (PVE 8).
    pub async fn update_ha_group(&self, a: &HaAffinity) -> Result<()> {
        let params = Params::new()
            .text("nodes", a.nodes.join(","))
            .flag("restricted", a.strict);
        let path = ApiPath::new("/cluster/ha/groups/{group}", &[&a.id]);
        self.write_null(Method::PUT, path, params).await
    }

    /// `DELETE /cluster/ha/groups/{group}` (PVE 8; refused while a resource
    /// uses it).
    pub async fn delete_ha_group(&self, id: &str) -> Result<()> {
        let path = ApiPath::new("/cluster/ha/groups/{group}", &[id]);
        self.write_null(Method::DELETE, path, Params::new()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_what_pve_lists() {
        let r: HaRule = serde_json::from_value(json!({
            "rule": "crossplane-vm-100", "type": "node-affinity", "resources": "vm:100",
            "nodes": "pve2:2,pve1", "strict": 1, "digest": "x", "order": 1, "disable": 0,
        }))
        .unwrap();
        assert!(r.strict);
        assert_eq!(ha_nodes(r.nodes.as_deref().unwrap()), ["pve1", "pve2"]);
        let g: HaGroup = serde_json::from_value(
            json!({"group": "g", "type": "group", "nodes": "a,b", "digest": "x"}),
        )
        .unwrap();
        assert!(!g.restricted);
        let res: HaResource = serde_json::from_value(
            json!({"sid": "vm:100", "type": "vm", "state": "started", "max_restart": 1}),
        )
        .unwrap();
        assert_eq!(res.state.as_deref(), Some("started"));
    }
}
