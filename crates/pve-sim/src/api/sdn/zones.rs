//! `/cluster/sdn/zones` (pve-network `PVE::API2::Network::SDN::Zones` and
//! the zone plugins' `on_update_hook`).

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{ID, Kind, LOCK, PENDING, RUNNING, allocate, may_see, props_of, update_props, view};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::{Named, Param};

const TYPES: &[&str] = &["evpn", "faucet", "qinq", "simple", "vlan", "vxlan"];
const ZONE: Param = Param::string("zone").pattern(ID).max_len(8);

/// The options the simulator keeps, and how.
const OPTIONS: &[(&str, Kind)] = &[
    ("bridge", Kind::Text),
    ("tag", Kind::Int),
    ("vlan-protocol", Kind::Text),
    ("peers", Kind::Text),
    ("mtu", Kind::Int),
    ("nodes", Kind::Text),
    ("ipam", Kind::Text),
    ("dhcp", Kind::Text),
    ("vxlan-port", Kind::Int),
];

const COMMON: &[Param] = &[
    LOCK,
    Param::string("bridge").opt(),
    Param::integer("tag").min(0).opt(),
    Param::string("vlan-protocol")
        .enums(&["802.1q", "802.1ad"])
        .opt(),
    Param::string("peers").opt(),
    Param::integer("mtu").opt(),
    Param::string("nodes").opt(),
    Param::string("ipam").opt(),
    Param::string("dhcp").enums(&["dnsmasq"]).opt(),
    Param::integer("vxlan-port").min(1).max(65536).opt(),
    Param::string("dns").opt(),
    Param::string("reversedns").opt(),
    Param::string("dnszone").format(Named::DnsName).opt(),
    Param::string("controller").opt(),
    Param::string("fabric").opt(),
];

pub const INDEX: &[&[Param]] = &[&[PENDING, RUNNING, Param::string("type").enums(TYPES).opt()]];
pub const ONE: &[&[Param]] = &[&[ZONE, PENDING, RUNNING]];
pub const CREATE: &[&[Param]] = &[&[ZONE, Param::string("type").enums(TYPES)], COMMON];
pub const UPDATE: &[&[Param]] = &[
    &[
        ZONE,
        Param::string("delete").max_len(4096).opt(),
        Param::string("digest").max_len(64).opt(),
    ],
    COMMON,
];
pub const DELETE: &[&[Param]] = &[&[ZONE, LOCK]];

fn zone_id(call: &Call) -> String {
    call.params.get("zone").unwrap_or_default().to_owned()
}

fn path(zone: &str) -> String {
    format!("/sdn/zones/{zone}")
}

/// `GET /cluster/sdn/zones`.
pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let cluster = inst.cluster();
    let sdn = &cluster.sdn;
    let kind = call.params.get("type");
    let list: Vec<Value> = view(&call, &sdn.running.zones, &sdn.pending.zones)
        .into_iter()
        .filter(|(id, _)| may_see(&inst, &call, &path(id)))
        .filter(|(_, z)| kind.is_none_or(|k| z.get("type").and_then(Value::as_str) == Some(k)))
        .map(|(id, mut z)| {
            z.insert("zone".into(), json!(id));
            Value::Object(z)
        })
        .collect();
    Ok(Reply::data(list))
}

/// `GET /cluster/sdn/zones/{zone}`.
pub async fn get(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let zone = zone_id(&call);
    allocate(&inst, &call, &path(&zone))?;
    let cluster = inst.cluster();
    let sdn = &cluster.sdn;
    view(&call, &sdn.running.zones, &sdn.pending.zones)
        .into_iter()
        .find(|(id, _)| *id == zone)
        .map(|(id, mut z)| {
            z.insert("zone".into(), json!(id));
            Reply::data(Value::Object(z))
        })
        .ok_or_else(|| ApiError::internal(format!("sdn '{zone}' does not exist")))
}

/// The zone plugin's checks of a zone as it would be written.
fn check(zone: &super::Props) -> Result<(), ApiError> {
    let text = |k: &str| zone.get(k).and_then(Value::as_str);
    match text("type").unwrap_or_default() {
        "evpn" | "faucet" => Err(ApiError::param(
            "type",
            "pve-sim does not model EVPN or faucet zones (they need an SDN controller)",
        )),
        "vlan" | "qinq" if text("bridge").is_none() => {
            Err(ApiError::param("bridge", "property is missing"))
        }
        "qinq" if zone.get("tag").and_then(Value::as_i64).is_none() => {
            Err(ApiError::param("tag", "property is missing"))
        }
        "vxlan" => match text("peers") {
            None => Err(ApiError::param(
                "peers",
                "must have exactly one of peers / fabric defined",
            )),
            Some(peers) => peers
                .split([',', ';', ' '])
                .filter(|p| !p.is_empty())
                .try_for_each(|p| {
                    p.parse::<IpAddr>().map(drop).map_err(|_| {
                        ApiError::param("peers", format!("value '{p}' does not look like an IP"))
                    })
                }),
        },
        _ => Ok(()),
    }
}

/// `POST /cluster/sdn/zones`.
pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    allocate(&inst, &call, "/sdn/zones")?;
    let zone = zone_id(&call);
    let mut props = props_of(&call, OPTIONS);
    props.insert(
        "type".into(),
        json!(call.params.get("type").unwrap_or_default()),
    );
    check(&props)?;
    let mut cluster = inst.cluster();
    let zones = &mut cluster.sdn.pending.zones;
    if zones.contains_key(&zone) {
        return Err(ApiError::internal(format!(
            "sdn zone object ID '{zone}' already defined"
        )));
    }
    zones.insert(zone, props);
    Ok(Reply::null())
}

/// `PUT /cluster/sdn/zones/{zone}`.
pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let zone = zone_id(&call);
    allocate(&inst, &call, &path(&zone))?;
    let mut cluster = inst.cluster();
    let Some(props) = cluster.sdn.pending.zones.get(&zone) else {
        return Err(ApiError::internal(format!(
            "sdn zone '{zone}' does not exist"
        )));
    };
    let mut props = props.clone();
    update_props(&mut props, &call, OPTIONS)?;
    check(&props)?;
    cluster.sdn.pending.zones.insert(zone, props);
    Ok(Reply::null())
}

/// `DELETE /cluster/sdn/zones/{zone}`: refused while a VNet is in it.
pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let zone = zone_id(&call);
    allocate(&inst, &call, &path(&zone))?;
    let mut cluster = inst.cluster();
    let sdn = &mut cluster.sdn;
    if !sdn.pending.zones.contains_key(&zone) {
        return Err(ApiError::internal(format!(
            "sdn zone '{zone}' does not exist"
        )));
    }
    if let Some((vnet, _)) = sdn
        .pending
        .vnets
        .iter()
        .find(|(_, v)| v.get("zone").and_then(Value::as_str) == Some(zone.as_str()))
    {
        return Err(ApiError::internal(format!(
            "zone {zone} is used by vnet {vnet}"
        )));
    }
    sdn.pending.zones.remove(&zone);
    Ok(Reply::null())
}
