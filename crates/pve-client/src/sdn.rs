//! Software-defined networking: `/cluster/sdn` (pve-network
//! `PVE::API2::Network::SDN`). Zones, VNets and a VNet's subnets are
//! written to the *pending* configuration (`sdn/*.cfg`) and take effect
//! only when `PUT /cluster/sdn` commits it to the running configuration
//! and starts the `reloadnetworkall` task that reloads every node's
//! network. Listed with `pending=1`, an object carries its running values,
//! what is pending in `pending` (a key removed shows as `"deleted"`) and
//! its `state` (`new`, `changed`, `deleted`; none when applied).
//!
//! Privileges: `SDN.Allocate` on `/sdn/zones/<zone>` (zones, VNets,
//! subnets) and on `/sdn` (the apply); reading `SDN.Audit`.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::Value;

use crate::client::Client;
use crate::error::Result;
use crate::form::Params;
use crate::request::ApiPath;
use crate::upid::Upid;

/// Where an object stands against the running configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SdnState {
    /// Created, not applied yet.
    New,
    /// Changed, not applied yet.
    Changed,
    /// Deleted, not applied yet (still running).
    Deleted,
}

/// One zone, VNet or subnet as `pending=1` lists it, read as the
/// configuration it will have once applied.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SdnObject {
    /// `zone`, `vnet` or `subnet` (the subnet's ID, `<zone>-<ip>-<mask>`).
    pub id: String,
    /// `None`: applied (running as configured).
    pub state: Option<SdnState>,
    /// Its properties once applied: the running ones with the pending
    /// changes laid over them (JSON values as Proxmox sends them).
    pub config: BTreeMap<String, Value>,
}

impl SdnObject {
    /// Reads one listed entry; `id_key`: the key naming it.
    pub fn from_listed(entry: &Value, id_key: &str) -> Option<Self> {
        let map = entry.as_object()?;
        let id = map.get(id_key)?.as_str()?.to_owned();
        let state = match map.get("state").and_then(Value::as_str) {
            Some("new") => Some(SdnState::New),
            Some("changed") => Some(SdnState::Changed),
            Some("deleted") => Some(SdnState::Deleted),
            _ => None,
        };
        let mut config: BTreeMap<String, Value> = map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "pending" | "state" | "digest"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(pending) = map.get("pending").and_then(Value::as_object) {
            for (k, v) in pending {
                if v.as_str() == Some("deleted") {
                    config.remove(k);
                } else {
                    config.insert(k.clone(), v.clone());
                }
            }
        }
        Some(Self { id, state, config })
    }

    /// A property as text (numbers and booleans as Proxmox writes them).
    pub fn text(&self, key: &str) -> Option<String> {
        match self.config.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_owned()),
            Value::Null | Value::Array(_) | Value::Object(_) => None,
        }
    }

    /// An array property (a subnet's `dhcp-range`) as its items' text.
    pub fn list(&self, key: &str) -> Vec<String> {
        match self.config.get(key) {
            Some(Value::Array(items)) => items.iter().filter_map(range_text).collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => vec![],
        }
    }
}

/// A DHCP range as its property string, whether listed as text or as an
/// object (`{"start-address": .., "end-address": ..}`).
fn range_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => Some(format!(
            "start-address={},end-address={}",
            o.get("start-address")?.as_str()?,
            o.get("end-address")?.as_str()?
        )),
        _ => None,
    }
}

/// Properties to set, each `(key, value)`; a key given more than once is
/// an array (`dhcp-range`).
pub type SdnOptions = Vec<(String, String)>;

fn with(params: Params, options: &SdnOptions, delete: &[String]) -> Params {
    let mut params = options
        .iter()
        .fold(params, |p, (k, v)| p.text(k, v.as_str()));
    if !delete.is_empty() {
        params = params.text("delete", delete.join(","));
    }
    params
}

impl Client {
    async fn sdn_list(&self, path: ApiPath, id_key: &str) -> Result<Vec<SdnObject>> {
        let listed: Vec<Value> = self.get(path, Params::new().text("pending", "1")).await?;
        Ok(listed
            .iter()
            .filter_map(|e| SdnObject::from_listed(e, id_key))
            .collect())
    }

    /// `GET /cluster/sdn/zones?pending=1`.
    pub async fn sdn_zones(&self) -> Result<Vec<SdnObject>> {
        self.sdn_list(ApiPath::new("/cluster/sdn/zones", &[]), "zone")
            .await
    }

    /// `POST /cluster/sdn/zones` (pending until applied).
    pub async fn create_sdn_zone(
        &self,
        zone: &str,
        kind: &str,
        options: &SdnOptions,
    ) -> Result<()> {
        let params = Params::new().text("zone", zone).text("type", kind);
        let path = ApiPath::new("/cluster/sdn/zones", &[]);
        self.write_null(Method::POST, path, with(params, options, &[]))
            .await
    }

    /// `PUT /cluster/sdn/zones/{zone}`.
    pub async fn update_sdn_zone(
        &self,
        zone: &str,
        options: &SdnOptions,
        delete: &[String],
    ) -> Result<()> {
        let path = ApiPath::new("/cluster/sdn/zones/{zone}", &[zone]);
        self.write_null(Method::PUT, path, with(Params::new(), options, delete))
            .await
    }

    /// `DELETE /cluster/sdn/zones/{zone}` (refused while a VNet is in it).
    pub async fn delete_sdn_zone(&self, zone: &str) -> Result<()> {
        let path = ApiPath::new("/cluster/sdn/zones/{zone}", &[zone]);
        self.write_null(Method::DELETE, path, Params::new()).await
    }

    /// `GET /cluster/sdn/vnets?pending=1`.
    pub async fn sdn_vnets(&self) -> Result<Vec<SdnObject>> {
        self.sdn_list(ApiPath::new("/cluster/sdn/vnets", &[]), "vnet")
            .await
    }

    /// `POST /cluster/sdn/vnets`.
    pub async fn create_sdn_vnet(&self, vnet: &str, options: &SdnOptions) -> Result<()> {
        let path = ApiPath::new("/cluster/sdn/vnets", &[]);
        let params = Params::new().text("vnet", vnet);
        self.write_null(Method::POST, path, with(params, options, &[]))
            .await
    }

    /// `PUT /cluster/sdn/vnets/{vnet}`.
    pub async fn update_sdn_vnet(
        &self,
        vnet: &str,
        options: &SdnOptions,
        delete: &[String],
    ) -> Result<()> {
        let path = ApiPath::new("/cluster/sdn/vnets/{vnet}", &[vnet]);
        self.write_null(Method::PUT, path, with(Params::new(), options, delete))
            .await
    }

    /// `DELETE /cluster/sdn/vnets/{vnet}` (refused while it has subnets).
    pub async fn delete_sdn_vnet(&self, vnet: &str) -> Result<()> {
        let path = ApiPath::new("/cluster/sdn/vnets/{vnet}", &[vnet]);
        self.write_null(Method::DELETE, path, Params::new()).await
    }

    /// `GET /cluster/sdn/vnets/{vnet}/subnets?pending=1`.
    pub async fn sdn_subnets(&self, vnet: &str) -> Result<Vec<SdnObject>> {
        let path = ApiPath::new("/cluster/sdn/vnets/{vnet}/subnets", &[vnet]);
        self.sdn_list(path, "subnet").await
    }

    /// `POST /cluster/sdn/vnets/{vnet}/subnets` (`cidr`: the subnet).
    pub async fn create_sdn_subnet(
        &self,
        vnet: &str,
        cidr: &str,
        options: &SdnOptions,
    ) -> Result<()> {
        let path = ApiPath::new("/cluster/sdn/vnets/{vnet}/subnets", &[vnet]);
        let params = Params::new().text("subnet", cidr).text("type", "subnet");
        self.write_null(Method::POST, path, with(params, options, &[]))
            .await
    }

    /// `PUT /cluster/sdn/vnets/{vnet}/subnets/{subnet}` (`subnet`: its ID).
    pub async fn update_sdn_subnet(
        &self,
        vnet: &str,
        subnet: &str,
        options: &SdnOptions,
        delete: &[String],
    ) -> Result<()> {
        let path = ApiPath::new(
            "/cluster/sdn/vnets/{vnet}/subnets/{subnet}",
            &[vnet, subnet],
        );
        self.write_null(Method::PUT, path, with(Params::new(), options, delete))
            .await
    }

    /// `DELETE /cluster/sdn/vnets/{vnet}/subnets/{subnet}`.
    pub async fn delete_sdn_subnet(&self, vnet: &str, subnet: &str) -> Result<()> {
        let path = ApiPath::new(
            "/cluster/sdn/vnets/{vnet}/subnets/{subnet}",
            &[vnet, subnet],
        );
        self.write_null(Method::DELETE, path, Params::new()).await
    }

    /// `PUT /cluster/sdn`: commits the pending configuration (at once, in
    /// the request) and returns the `reloadnetworkall` task that reloads
    /// every node's network.
    pub async fn apply_sdn(&self) -> Result<Upid> {
        let path = ApiPath::new("/cluster/sdn", &[]);
        self.start_task(Method::PUT, path, Params::new()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pending_listing_reads_as_the_configuration_to_be() {
        let new = json!({"zone": "z1", "type": "simple", "state": "new",
            "pending": {"mtu": 1450, "nodes": "n1"}});
        let changed = json!({"vnet": "v1", "type": "vnet", "zone": "z1", "alias": "old",
            "tag": 5, "state": "changed", "pending": {"alias": "new", "tag": "deleted"}});
        let applied = json!({"vnet": "v2", "type": "vnet", "zone": "z1", "digest": "d"});
        let z = SdnObject::from_listed(&new, "zone").unwrap();
        assert_eq!(z.state, Some(SdnState::New));
        assert_eq!(z.text("mtu").as_deref(), Some("1450"));
        let v = SdnObject::from_listed(&changed, "vnet").unwrap();
        assert_eq!(v.state, Some(SdnState::Changed));
        assert_eq!(v.text("alias").as_deref(), Some("new"));
        assert_eq!(v.text("tag"), None);
        let a = SdnObject::from_listed(&applied, "vnet").unwrap();
        assert_eq!((a.state, a.text("digest")), (None, None));
        assert!(SdnObject::from_listed(&json!({"type": "vnet"}), "vnet").is_none());
    }

    #[test]
    fn dhcp_ranges_read_as_property_strings_either_way() {
        let s = SdnObject::from_listed(
            &json!({"subnet": "z-10.0.0.0-24", "dhcp-range": [
                "start-address=10.0.0.10,end-address=10.0.0.20",
                {"start-address": "10.0.0.30", "end-address": "10.0.0.40"}]}),
            "subnet",
        )
        .unwrap();
        assert_eq!(
            s.list("dhcp-range"),
            vec![
                "start-address=10.0.0.10,end-address=10.0.0.20",
                "start-address=10.0.0.30,end-address=10.0.0.40"
            ]
        );
    }
}
