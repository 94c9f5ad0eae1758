//! `/cluster/sdn/vnets` (pve-network `PVE::API2::Network::SDN::Vnets`,
//! `VnetPlugin` and the zone plugins' `vnet_update_hook`).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    ID, Kind, LOCK, PENDING, Props, RUNNING, allocate, may_see, props_of, update_props, view,
};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::sdn::SdnConfig;

pub(crate) const VNET: Param = Param::string("vnet").pattern(ID).max_len(8);
/// PVE's `[\(\)-_.\w\d\s]{0,256}` (`)-_` is a range there), its length
/// checked apart.
const ALIAS: &str = "[(\\x29-\\x5F.\\w\\s]*";

const OPTIONS: &[(&str, Kind)] = &[
    ("zone", Kind::Text),
    ("tag", Kind::Int),
    ("vlanaware", Kind::Bool),
    ("alias", Kind::Text),
    ("isolate-ports", Kind::Bool),
];

const COMMON: &[Param] = &[
    LOCK,
    Param::string("alias").pattern(ALIAS).max_len(256).opt(),
    Param::integer("tag").min(1).max(16_777_215).opt(),
    Param::boolean("vlanaware").opt(),
    Param::boolean("isolate-ports").opt(),
];

pub const ONE: &[&[Param]] = &[&[VNET, PENDING, RUNNING]];
pub const CREATE: &[&[Param]] = &[
    &[
        VNET,
        Param::string("zone"),
        Param::string("type").enums(&["vnet"]).opt(),
    ],
    COMMON,
];
pub const UPDATE: &[&[Param]] = &[
    &[
        VNET,
        Param::string("zone").opt(),
        Param::string("delete").max_len(4096).opt(),
        Param::string("digest").max_len(64).opt(),
    ],
    COMMON,
];
pub const DELETE: &[&[Param]] = &[&[VNET, LOCK]];

fn vnet_id(call: &Call) -> String {
    call.params.get("vnet").unwrap_or_default().to_owned()
}

/// `/sdn/zones/<zone>/<vnet>`, where a VNet's privileges are checked.
pub(crate) fn path(cfg: &SdnConfig, vnet: &str) -> String {
    let zone = cfg
        .vnets
        .get(vnet)
        .and_then(|v| v.get("zone"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    format!("/sdn/zones/{zone}/{vnet}")
}

fn tag(v: &Props) -> Option<i64> {
    v.get("tag").and_then(Value::as_i64)
}

/// `on_update_hook` and the zone's `vnet_update_hook`.
fn check(cfg: &SdnConfig, id: &str, vnet: &Props) -> Result<(), ApiError> {
    let zone_id = vnet.get("zone").and_then(Value::as_str).unwrap_or_default();
    let Some(zone) = cfg.zones.get(zone_id) else {
        return Err(ApiError::param(
            "zone",
            format!("zone '{zone_id}' doesn't exist"),
        ));
    };
    let kind = zone.get("type").and_then(Value::as_str).unwrap_or_default();
    let has_subnets = cfg
        .subnets
        .values()
        .any(|s| s.get("vnet").and_then(Value::as_str) == Some(id));
    if vnet.get("vlanaware").and_then(Value::as_i64) == Some(1) && has_subnets {
        return Err(ApiError::param(
            "vlanaware",
            "vlanaware vnet is not compatible with subnets",
        ));
    }
    let others = cfg.vnets.iter().filter(|(o, _)| *o != id);
    let same_zone = |o: &Props| o.get("zone").and_then(Value::as_str) == Some(zone_id);
    match (kind, tag(vnet)) {
        ("simple", Some(_)) => Err(ApiError::param(
            "tag",
            "vlan tag is not allowed on simple zone",
        )),
        ("vlan", None) => Err(ApiError::param("tag", "missing vlan tag")),
        ("vxlan", None) => Err(ApiError::param("tag", "missing vxlan tag")),
        ("vlan" | "qinq", Some(t)) if t > 4096 => {
            Err(ApiError::param("tag", "vlan tag max value is 4096"))
        }
        ("vlan" | "qinq", Some(t)) => match others
            .clone()
            .find(|(_, o)| same_zone(o) && tag(o) == Some(t))
        {
            Some((o, _)) => Err(ApiError::param(
                "tag",
                format!("tag {t} already exist in vnet {o}"),
            )),
            None => Ok(()),
        },
        ("vxlan", Some(t)) => {
            let vxlan = |o: &Props| {
                let z = o.get("zone").and_then(Value::as_str).unwrap_or_default();
                cfg.zones
                    .get(z)
                    .and_then(|z| z.get("type"))
                    .and_then(Value::as_str)
                    .is_some_and(|k| k == "vxlan" || k == "evpn")
            };
            match others.clone().find(|(_, o)| vxlan(o) && tag(o) == Some(t)) {
                Some((o, _)) => Err(ApiError::param(
                    "tag",
                    format!("vxlan tag {t} already exist in vnet {o} in zone {zone_id} "),
                )),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// `GET /cluster/sdn/vnets`.
pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let cluster = inst.cluster();
    let sdn = &cluster.sdn;
    let list: Vec<Value> = view(&call, &sdn.running.vnets, &sdn.pending.vnets)
        .into_iter()
        .filter(|(id, v)| {
            let zone = v
                .get("zone")
                .or_else(|| v.get("pending").and_then(|p| p.get("zone")))
                .and_then(Value::as_str)
                .unwrap_or_default();
            may_see(&inst, &call, &format!("/sdn/zones/{zone}/{id}"))
        })
        .map(|(id, mut v)| {
            v.insert("vnet".into(), json!(id));
            v.insert("type".into(), json!("vnet"));
            Value::Object(v)
        })
        .collect();
    Ok(Reply::data(list))
}

/// `GET /cluster/sdn/vnets/{vnet}`.
pub async fn get(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_id(&call);
    let cluster = inst.cluster();
    let sdn = &cluster.sdn;
    let p = path(&sdn.pending, &vnet);
    if !may_see(&inst, &call, &p) {
        return Err(ApiError::forbidden(&p, "SDN.Audit|SDN.Allocate"));
    }
    view(&call, &sdn.running.vnets, &sdn.pending.vnets)
        .into_iter()
        .find(|(id, _)| *id == vnet)
        .map(|(id, mut v)| {
            v.insert("vnet".into(), json!(id));
            Reply::data(Value::Object(v))
        })
        .ok_or_else(|| ApiError::internal(format!("sdn vnet '{vnet}' does not exist")))
}

/// `POST /cluster/sdn/vnets`.
pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_id(&call);
    let zone = call.params.get("zone").unwrap_or_default().to_owned();
    allocate(&inst, &call, &format!("/sdn/zones/{zone}"))?;
    let mut props = props_of(&call, OPTIONS);
    props.insert("type".into(), json!("vnet"));
    let mut cluster = inst.cluster();
    let cfg = &mut cluster.sdn.pending;
    if cfg.vnets.contains_key(&vnet) {
        return Err(ApiError::internal(format!(
            "sdn vnet object ID '{vnet}' already defined"
        )));
    }
    check(cfg, &vnet, &props)?;
    cfg.vnets.insert(vnet, props);
    Ok(Reply::null())
}

/// `PUT /cluster/sdn/vnets/{vnet}`.
pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_id(&call);
    let mut cluster = inst.cluster();
    let cfg = &mut cluster.sdn.pending;
    allocate(&inst, &call, &path(cfg, &vnet))?;
    let Some(old) = cfg.vnets.get(&vnet) else {
        return Err(ApiError::internal(format!(
            "sdn vnet '{vnet}' does not exist"
        )));
    };
    let mut props = old.clone();
    update_props(&mut props, &call, OPTIONS)?;
    if props.get("zone") != old.get("zone") {
        let has_subnets = cfg
            .subnets
            .values()
            .any(|s| s.get("vnet").and_then(Value::as_str) == Some(vnet.as_str()));
        if has_subnets {
            return Err(ApiError::param(
                "zone",
                "can't change zone if subnets exist",
            ));
        }
    }
    check(cfg, &vnet, &props)?;
    cfg.vnets.insert(vnet, props);
    Ok(Reply::null())
}

/// `DELETE /cluster/sdn/vnets/{vnet}`: refused while it has subnets.
pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_id(&call);
    let mut cluster = inst.cluster();
    let cfg = &mut cluster.sdn.pending;
    allocate(&inst, &call, &path(cfg, &vnet))?;
    if !cfg.vnets.contains_key(&vnet) {
        return Err(ApiError::internal(format!(
            "sdn vnet '{vnet}' does not exist"
        )));
    }
    if cfg
        .subnets
        .values()
        .any(|s| s.get("vnet").and_then(Value::as_str) == Some(vnet.as_str()))
    {
        return Err(ApiError::param(
            "vnet",
            "Can't delete vnet if subnets exists",
        ));
    }
    cfg.vnets.remove(&vnet);
    Ok(Reply::null())
}
