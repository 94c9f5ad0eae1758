//! `/cluster/sdn/vnets/{vnet}/subnets` (pve-network
//! `PVE::API2::Network::SDN::Subnets` and `SubnetPlugin`): a subnet is
//! created by its CIDR and known afterwards by its ID,
//! `<zone>-<ip>-<mask>`; its gateway and DHCP ranges must lie in it, and a
//! VLAN-aware VNet takes none.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Value, json};

use super::vnets::{VNET, path};
use super::{Kind, LOCK, PENDING, Props, RUNNING, allocate, may_see, props_of, update_props, view};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::sdn::SdnConfig;

const SUBNET: Param = Param::string("subnet");

const OPTIONS: &[(&str, Kind)] = &[
    ("gateway", Kind::Text),
    ("snat", Kind::Bool),
    ("dhcp-range", Kind::List),
    ("dhcp-dns-server", Kind::Text),
    ("dnszoneprefix", Kind::Text),
];

const COMMON: &[Param] = &[
    LOCK,
    Param::string("gateway").opt(),
    Param::boolean("snat").opt(),
    Param::array("dhcp-range").opt(),
    Param::string("dhcp-dns-server").opt(),
    Param::string("dnszoneprefix").opt(),
];

pub const INDEX: &[&[Param]] = &[&[VNET, PENDING, RUNNING]];
pub const ONE: &[&[Param]] = &[&[VNET, SUBNET, PENDING, RUNNING]];
pub const CREATE: &[&[Param]] = &[
    &[VNET, SUBNET, Param::string("type").enums(&["subnet"])],
    COMMON,
];
pub const UPDATE: &[&[Param]] = &[
    &[
        // Optional in the schema, always in the path.
        VNET.opt(),
        SUBNET,
        Param::string("delete").max_len(4096).opt(),
        Param::string("digest").max_len(64).opt(),
    ],
    COMMON,
];
pub const DELETE: &[&[Param]] = &[&[VNET, SUBNET, LOCK]];

/// A CIDR as network address and prefix length.
fn cidr(v: &str) -> Option<(IpAddr, u8)> {
    let (ip, len) = v.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}

/// Whether `ip` lies in `net/len`.
fn contains((net, len): (IpAddr, u8), ip: IpAddr) -> bool {
    let bits = |a: IpAddr| match a {
        IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
        IpAddr::V6(a) => u128::from(a),
    };
    if net.is_ipv4() != ip.is_ipv4() {
        return false;
    }
    // An IPv4 address sits in the top 32 bits: the prefix counts from the
    // top either way.
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    bits(net) & mask == bits(ip) & mask
}

fn addr(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// `on_update_hook`: the gateway and each DHCP range in the subnet.
fn check(cfg: &SdnConfig, vnet: &str, net: (IpAddr, u8), s: &Props) -> Result<(), ApiError> {
    let Some(v) = cfg.vnets.get(vnet) else {
        return Err(ApiError::param("vnet", format!("{vnet} don't exist")));
    };
    if v.get("vlanaware").and_then(Value::as_i64) == Some(1) {
        return Err(ApiError::param(
            "vnet",
            "you can't add a subnet on a vlanaware vnet",
        ));
    }
    let cidr = format!("{}/{}", net.0, net.1);
    if let Some(gw) = addr(s.get("gateway")) {
        let inside = gw.parse().is_ok_and(|ip| contains(net, ip));
        let point = net.0.is_ipv4() && net.1 == 32;
        if !inside && !point {
            return Err(ApiError::param(
                "gateway",
                format!("{gw} is not in subnet {cidr}"),
            ));
        }
    }
    let ranges = s
        .get("dhcp-range")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for range in ranges.iter().filter_map(Value::as_str) {
        let field = |k: &str| {
            range
                .split(',')
                .find_map(|p| p.strip_prefix(&format!("{k}=")))
                .and_then(|a| a.parse::<IpAddr>().ok())
        };
        let (Some(start), Some(end)) = (field("start-address"), field("end-address")) else {
            return Err(ApiError::param(
                "dhcp-range",
                format!("invalid format - value '{range}' is not a DHCP range"),
            ));
        };
        if !contains(net, start) || !contains(net, end) {
            return Err(ApiError::param(
                "dhcp-range",
                format!("range {start}-{end} is not in subnet {cidr}"),
            ));
        }
        if start > end {
            return Err(ApiError::param(
                "dhcp-range",
                format!("start-address {start} is greater than end-address {end}"),
            ));
        }
    }
    Ok(())
}

fn listed(id: &str, mut s: serde_json::Map<String, Value>) -> Value {
    // `<zone>-<ip>-<mask>`: the zone, then the CIDR.
    let mut parts = id.splitn(2, '-');
    let zone = parts.next().unwrap_or_default();
    if let Some((ip, mask)) = parts.next().and_then(|r| r.rsplit_once('-')) {
        s.insert("cidr".into(), json!(format!("{ip}/{mask}")));
        s.insert("network".into(), json!(ip));
        s.insert("mask".into(), json!(mask));
    }
    s.insert("zone".into(), json!(zone));
    s.insert("subnet".into(), json!(id));
    s.insert("type".into(), json!("subnet"));
    Value::Object(s)
}

fn of_vnet(
    subnets: &std::collections::BTreeMap<String, Props>,
    vnet: &str,
) -> std::collections::BTreeMap<String, Props> {
    subnets
        .iter()
        .filter(|(_, s)| s.get("vnet").and_then(Value::as_str) == Some(vnet))
        .map(|(id, s)| (id.clone(), s.clone()))
        .collect()
}

fn vnet_of(call: &Call) -> String {
    call.params.get("vnet").unwrap_or_default().to_owned()
}

/// The subnet ID a path names: its ID, or its CIDR.
fn subnet_id(cfg: &SdnConfig, vnet: &str, given: &str) -> String {
    match cidr(given) {
        Some((ip, len)) => {
            let zone = addr(cfg.vnets.get(vnet).and_then(|v| v.get("zone"))).unwrap_or_default();
            format!("{zone}-{ip}-{len}")
        }
        None => given.to_owned(),
    }
}

/// `GET .../subnets`.
pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_of(&call);
    let cluster = inst.cluster();
    let sdn = &cluster.sdn;
    if !may_see(&inst, &call, &path(&sdn.pending, &vnet)) {
        return Ok(Reply::data(json!([])));
    }
    let (running, pending) = (
        of_vnet(&sdn.running.subnets, &vnet),
        of_vnet(&sdn.pending.subnets, &vnet),
    );
    let list: Vec<Value> = view(&call, &running, &pending)
        .into_iter()
        .map(|(id, s)| listed(&id, s))
        .collect();
    Ok(Reply::data(list))
}

/// `GET .../subnets/{subnet}`.
pub async fn get(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_of(&call);
    let cluster = inst.cluster();
    let sdn = &cluster.sdn;
    allocate(&inst, &call, &path(&sdn.pending, &vnet))?;
    let id = subnet_id(
        &sdn.pending,
        &vnet,
        call.params.get("subnet").unwrap_or_default(),
    );
    let (running, pending) = (
        of_vnet(&sdn.running.subnets, &vnet),
        of_vnet(&sdn.pending.subnets, &vnet),
    );
    view(&call, &running, &pending)
        .into_iter()
        .find(|(i, _)| *i == id)
        .map(|(i, s)| Reply::data(listed(&i, s)))
        .ok_or_else(|| ApiError::internal(format!("sdn subnet '{id}' does not exist")))
}

/// `POST .../subnets`.
pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_of(&call);
    let given = call.params.get("subnet").unwrap_or_default().to_owned();
    let Some(net) = cidr(&given) else {
        return Err(ApiError::param(
            "subnet",
            "value does not look like a valid CIDR network",
        ));
    };
    let mut cluster = inst.cluster();
    let cfg = &mut cluster.sdn.pending;
    allocate(&inst, &call, &path(cfg, &vnet))?;
    let id = subnet_id(cfg, &vnet, &given);
    if cfg.subnets.contains_key(&id) {
        return Err(ApiError::internal(format!(
            "sdn subnet object ID '{id}' already defined"
        )));
    }
    let mut props = props_of(&call, OPTIONS);
    props.insert("vnet".into(), json!(vnet));
    props.insert("type".into(), json!("subnet"));
    check(cfg, &vnet, net, &props)?;
    cfg.subnets.insert(id, props);
    Ok(Reply::null())
}

/// `PUT .../subnets/{subnet}`.
pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_of(&call);
    let mut cluster = inst.cluster();
    let cfg = &mut cluster.sdn.pending;
    allocate(&inst, &call, &path(cfg, &vnet))?;
    let id = subnet_id(cfg, &vnet, call.params.get("subnet").unwrap_or_default());
    let Some(old) = cfg.subnets.get(&id) else {
        return Err(ApiError::internal(format!(
            "sdn subnet '{id}' does not exist"
        )));
    };
    let mut props = old.clone();
    update_props(&mut props, &call, OPTIONS)?;
    let net = id
        .split_once('-')
        .and_then(|(_, r)| r.rsplit_once('-'))
        .and_then(|(ip, len)| cidr(&format!("{ip}/{len}")))
        .ok_or_else(|| ApiError::internal(format!("sdn subnet '{id}' has no CIDR")))?;
    check(cfg, &vnet, net, &props)?;
    cfg.subnets.insert(id, props);
    Ok(Reply::null())
}

/// `DELETE .../subnets/{subnet}`.
pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vnet = vnet_of(&call);
    let mut cluster = inst.cluster();
    let cfg = &mut cluster.sdn.pending;
    allocate(&inst, &call, &path(cfg, &vnet))?;
    let id = subnet_id(cfg, &vnet, call.params.get("subnet").unwrap_or_default());
    if cfg.subnets.remove(&id).is_none() {
        return Err(ApiError::internal(format!(
            "sdn subnet '{id}' does not exist"
        )));
    }
    Ok(Reply::null())
}
