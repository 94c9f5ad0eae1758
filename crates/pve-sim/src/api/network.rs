//! `GET /nodes/{node}/network` (pve-manager `PVE::API2::Network::index`):
//! the node's interfaces from `/etc/network/interfaces`, an uplink `eno1`
//! and the node's bridges on it, filtered by `type` as PVE filters them
//! (`any_bridge` and `any_local_bridge`: Linux and OVS bridges; with
//! `any_bridge`, `include_sdn` and `vnet`, the running SDN VNets of the
//! node's zones too, as `get_local_vnets` adds them).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::schema::qemu::NODE;

pub const INDEX: &[Param] = &[
    NODE,
    Param::string("type")
        .enums(&[
            "bridge",
            "bond",
            "eth",
            "alias",
            "vlan",
            "fabric",
            "OVSBridge",
            "OVSBond",
            "OVSPort",
            "OVSIntPort",
            "vnet",
            "any_bridge",
            "any_local_bridge",
            "include_sdn",
        ])
        .opt(),
];

pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let node = call.params.node();
    let cluster = inst.cluster();
    let Some(n) = cluster.node(node) else {
        return Err(ApiError::internal(format!("no such node '{node}'")));
    };
    let mut ifaces = vec![json!({
        "iface": "eno1",
        "type": "eth",
        "active": 1,
        "exists": 1,
        "method": "manual",
        "method6": "manual",
        "families": ["inet"],
        "priority": 3,
    })];
    for (i, bridge) in n.bridges.iter().enumerate() {
        let mut b = json!({
            "iface": bridge,
            "type": "bridge",
            "active": 1,
            "autostart": 1,
            "method": "manual",
            "method6": "manual",
            "families": ["inet"],
            "bridge_stp": "off",
            "bridge_fd": "0",
            "priority": 4 + i,
        });
        if i == 0 {
            b["method"] = json!("static");
            b["bridge_ports"] = json!("eno1");
            b["cidr"] = json!(format!("{}/24", n.ip()));
            b["address"] = json!(n.ip());
            b["netmask"] = json!("24");
            b["gateway"] = json!("192.0.2.1");
        }
        ifaces.push(b);
    }
    let filter = call.params.get("type");
    let kept: Vec<Value> = ifaces
        .into_iter()
        .filter(|i| {
            let Some(filter) = filter else { return true };
            let kind = i["type"].as_str().unwrap_or_default();
            let bridge = matches!(kind, "bridge" | "OVSBridge");
            filter == "include_sdn"
                || filter == kind
                || (bridge && matches!(filter, "any_bridge" | "any_local_bridge"))
        })
        .collect();
    let mut kept = kept;
    if filter.is_some_and(|f| matches!(f, "any_bridge" | "include_sdn" | "vnet")) {
        kept.extend(local_vnets(&inst, &call, &cluster, node));
    }
    Ok(Reply::data(kept))
}

/// `PVE::Network::SDN::get_local_vnets`: the running VNets whose zone is
/// on `node`, those the caller may audit or use.
fn local_vnets(
    inst: &Instance,
    call: &Call,
    cluster: &crate::state::Cluster,
    node: &str,
) -> Vec<Value> {
    let running = &cluster.sdn.running;
    running
        .vnets
        .iter()
        .filter_map(|(id, v)| {
            let zone = v.get("zone").and_then(Value::as_str)?;
            let path = format!("/sdn/zones/{zone}/{id}");
            let allowed = ["SDN.Audit", "SDN.Use"]
                .iter()
                .any(|p| inst.auth.has(&call.identity, &path, p));
            let nodes = running
                .zones
                .get(zone)
                .and_then(|z| z.get("nodes"))
                .and_then(Value::as_str);
            let here = nodes.is_none_or(|n| n.split([',', ';', ' ']).any(|n| n == node));
            // As PVE 8.1+ lists them: whether the VNet takes VLAN tags.
            let aware = v.get("vlanaware").and_then(Value::as_i64) == Some(1);
            (allowed && here).then(|| {
                json!({"iface": id, "type": "vnet", "active": 1, "zone": zone,
                    "vlanaware": u8::from(aware),
                    "comments": v.get("alias").cloned().unwrap_or(Value::Null)})
            })
        })
        .collect()
}
