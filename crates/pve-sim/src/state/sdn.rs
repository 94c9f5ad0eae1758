//! Software-defined networking (pve-network): zones, VNets and subnets,
//! each in two versions as on PVE. The API writes the *pending*
//! configuration (`sdn/zones.cfg`, `vnets.cfg`, `subnets.cfg`);
//! `PUT /cluster/sdn` copies it to the *running* one
//! (`.running-config`) and reloads the nodes' networks. Listed with
//! `pending=1`, an object is shown as `PVE::Network::SDN::pending_config`
//! shows it: its running values, what differs in `pending` and a `state`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// One object's properties, as PVE's section config keeps them.
pub type Props = BTreeMap<String, Value>;

/// One version of the SDN configuration: objects by ID.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SdnConfig {
    pub zones: BTreeMap<String, Props>,
    pub vnets: BTreeMap<String, Props>,
    /// By subnet ID (`<zone>-<ip>-<mask>`); each names its `vnet`.
    pub subnets: BTreeMap<String, Props>,
}

/// The pending and the running configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sdn {
    pub pending: SdnConfig,
    pub running: SdnConfig,
    /// How many times the configuration was applied (`version` of
    /// `.running-config`).
    pub version: u64,
}

impl Sdn {
    /// `commit_config`: the pending configuration becomes the running one.
    pub fn commit(&mut self) {
        self.running = self.pending.clone();
        self.version += 1;
    }

    /// Whether a running VNet of this name exists (a bridge on the nodes).
    pub fn running_vnet(&self, vnet: &str) -> bool {
        self.running.vnets.contains_key(vnet)
    }

    /// The zone of a running VNet.
    pub fn running_zone_of(&self, vnet: &str) -> Option<String> {
        let v = self.running.vnets.get(vnet)?;
        v.get("zone").and_then(Value::as_str).map(str::to_owned)
    }
}

/// `encode_value` for comparing: arrays item by item, the rest as text.
fn encoded(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(encoded).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// `PVE::Network::SDN::pending_config` for one object kind: every object
/// of `running` or `config`, with `state` and `pending` as PVE sets them.
pub fn pending_view(
    running: &BTreeMap<String, Props>,
    config: &BTreeMap<String, Props>,
) -> BTreeMap<String, Map<String, Value>> {
    let mut out: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for (id, run) in running {
        let entry = out.entry(id.clone()).or_default();
        let cfg = config.get(id);
        let mut state = None;
        let mut pending = Map::new();
        for (k, v) in run {
            entry.insert(k.clone(), v.clone());
            match cfg {
                None => state = Some("deleted"),
                Some(c) => match c.get(k) {
                    None => {
                        pending.insert(k.clone(), json!("deleted"));
                        state = Some("changed");
                    }
                    Some(cv) if encoded(cv) != encoded(v) => state = Some("changed"),
                    Some(_) => {}
                },
            }
        }
        if let Some(s) = state {
            entry.insert("state".into(), json!(s));
            entry.insert("pending".into(), Value::Object(pending));
        }
    }
    for (id, cfg) in config {
        let run = running.get(id);
        let entry = out.entry(id.clone()).or_default();
        let mut pending = match entry.remove("pending") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        let mut state = entry
            .get("state")
            .and_then(Value::as_str)
            .map(str::to_owned);
        for (k, v) in cfg {
            let rv = run.and_then(|r| r.get(k));
            if k == "type" || k == "vnet" {
                entry.insert(k.clone(), v.clone());
            } else if rv.is_none_or(|rv| encoded(rv) != encoded(v)) {
                pending.insert(k.clone(), v.clone());
            }
            if run.is_none() {
                state = Some("new".into());
            } else if rv.is_none() {
                state = Some("changed".into());
            }
        }
        if let Some(s) = state {
            entry.insert("state".into(), json!(s));
            entry.insert("pending".into(), Value::Object(pending));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, Value)]) -> Props {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), v.clone()))
            .collect()
    }

    #[test]
    fn pending_shows_new_changed_deleted_and_nothing_when_applied() {
        let running = BTreeMap::from([
            ("same".into(), props(&[("type", json!("simple"))])),
            (
                "chg".into(),
                props(&[("type", json!("vlan")), ("bridge", json!("vmbr0"))]),
            ),
            ("gone".into(), props(&[("type", json!("simple"))])),
        ]);
        let config = BTreeMap::from([
            ("same".into(), props(&[("type", json!("simple"))])),
            (
                "chg".into(),
                props(&[("type", json!("vlan")), ("bridge", json!("vmbr1"))]),
            ),
            (
                "new".into(),
                props(&[("type", json!("simple")), ("mtu", json!(1450))]),
            ),
        ]);
        let view = pending_view(&running, &config);
        assert!(!view["same"].contains_key("state"));
        assert_eq!(view["chg"]["state"], json!("changed"));
        assert_eq!(view["chg"]["bridge"], json!("vmbr0"));
        assert_eq!(view["chg"]["pending"]["bridge"], json!("vmbr1"));
        assert_eq!(view["gone"]["state"], json!("deleted"));
        assert_eq!(view["new"]["state"], json!("new"));
        assert_eq!(view["new"]["pending"]["mtu"], json!(1450));
        assert_eq!(view["new"]["type"], json!("simple"));
    }
}
