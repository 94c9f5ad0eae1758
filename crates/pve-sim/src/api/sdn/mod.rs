//! `/cluster/sdn` (pve-network `PVE::API2::Network::SDN` and its
//! `Zones`, `Vnets`, `Subnets`): zones, VNets and subnets written to the
//! pending configuration, and the apply (`PUT /cluster/sdn`), which
//! commits it at once and returns the `reloadnetworkall` task that
//! reloads every node's network.
//!
//! Modelled zone types: `simple`, `vlan`, `qinq`, `vxlan` with pve-network's
//! checks (a VLAN zone's bridge, a VXLAN zone's peers, a VNet's tag per
//! zone type and unique per zone, or per cluster for VXLAN). `evpn` and
//! `faucet` need controllers and FRR, which the simulator does not have:
//! refused with a message that says so. Privileges: `SDN.Allocate` on
//! `/sdn/zones/<zone>` (`/sdn/zones` to create a zone, `/sdn` to apply);
//! lists show what `SDN.Audit` or `SDN.Allocate` allows.

pub mod subnets;
pub mod vnets;
pub mod zones;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::route;
use crate::http::router::Route;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::sim_handler;
use crate::state::sdn::{Props, pending_view};
use crate::tasks;

/// The SDN routes.
pub fn routes() -> Vec<Route> {
    const ZONES: &str = "/cluster/sdn/zones";
    const ZONE: &str = "/cluster/sdn/zones/{zone}";
    const VNETS: &str = "/cluster/sdn/vnets";
    const VNET: &str = "/cluster/sdn/vnets/{vnet}";
    const SUBNETS: &str = "/cluster/sdn/vnets/{vnet}/subnets";
    const SUBNET: &str = "/cluster/sdn/vnets/{vnet}/subnets/{subnet}";
    vec![
        route("GET", "/cluster/sdn", &[], sim_handler!(index)),
        route("PUT", "/cluster/sdn", APPLY, sim_handler!(apply)),
        route("GET", ZONES, zones::INDEX, sim_handler!(zones::index)),
        route("POST", ZONES, zones::CREATE, sim_handler!(zones::create)),
        route("GET", ZONE, zones::ONE, sim_handler!(zones::get)),
        route("PUT", ZONE, zones::UPDATE, sim_handler!(zones::update)),
        route("DELETE", ZONE, zones::DELETE, sim_handler!(zones::delete)),
        route("GET", VNETS, VIEW, sim_handler!(vnets::index)),
        route("POST", VNETS, vnets::CREATE, sim_handler!(vnets::create)),
        route("GET", VNET, vnets::ONE, sim_handler!(vnets::get)),
        route("PUT", VNET, vnets::UPDATE, sim_handler!(vnets::update)),
        route("DELETE", VNET, vnets::DELETE, sim_handler!(vnets::delete)),
        route("GET", SUBNETS, subnets::INDEX, sim_handler!(subnets::index)),
        route(
            "POST",
            SUBNETS,
            subnets::CREATE,
            sim_handler!(subnets::create),
        ),
        route("GET", SUBNET, subnets::ONE, sim_handler!(subnets::get)),
        route(
            "PUT",
            SUBNET,
            subnets::UPDATE,
            sim_handler!(subnets::update),
        ),
        route(
            "DELETE",
            SUBNET,
            subnets::DELETE,
            sim_handler!(subnets::delete),
        ),
    ]
}

/// The `lock-token` every write takes (the simulator has no global lock:
/// accepted and ignored).
pub(crate) const LOCK: Param = Param::string("lock-token").opt();
/// `pending` and `running` of every read.
pub(crate) const PENDING: Param = Param::boolean("pending").opt();
pub(crate) const RUNNING: Param = Param::boolean("running").opt();
pub(crate) const VIEW: &[&[Param]] = &[&[PENDING, RUNNING]];
pub(crate) const APPLY: &[&[Param]] = &[&[LOCK, Param::boolean("release-lock").opt()]];

/// pve-sdn-zone-id and pve-sdn-vnet-id.
pub(crate) const ID: &str = "[a-zA-Z][a-zA-Z0-9]*[a-zA-Z0-9]";

/// How long the reload takes on each node (simulated).
const RELOAD: Duration = Duration::from_millis(300);

/// `SDN.Allocate` on `path`.
pub(crate) fn allocate(inst: &Instance, call: &Call, path: &str) -> Result<(), ApiError> {
    inst.auth.check(&call.identity, path, &["SDN.Allocate"])
}

/// Whether the caller may see what is under `path`.
pub(crate) fn may_see(inst: &Instance, call: &Call, path: &str) -> bool {
    inst.auth.has(&call.identity, path, "SDN.Audit")
        || inst.auth.has(&call.identity, path, "SDN.Allocate")
}

/// Which version a read shows: `pending=1` the pending view, `running=1`
/// the running configuration, else the configuration as written.
pub(crate) fn view(
    call: &Call,
    running: &std::collections::BTreeMap<String, Props>,
    config: &std::collections::BTreeMap<String, Props>,
) -> Vec<(String, Map<String, Value>)> {
    let plain =
        |m: &std::collections::BTreeMap<String, Props>| -> Vec<(String, Map<String, Value>)> {
            m.iter()
                .map(|(id, p)| (id.clone(), p.clone().into_iter().collect()))
                .collect()
        };
    if call.params.flag("pending") == Some(true) {
        pending_view(running, config).into_iter().collect()
    } else if call.params.flag("running") == Some(true) {
        plain(running)
    } else {
        plain(config)
    }
}

/// The properties a create or update sets, from the call (`keys`: those
/// the endpoint takes; arrays kept as arrays, integers and booleans as
/// numbers, as the section config parser reads them).
pub(crate) fn props_of(call: &Call, keys: &[(&str, Kind)]) -> Props {
    let mut out = Props::new();
    for (k, kind) in keys {
        let value = match kind {
            Kind::Text => call.params.get(k).map(|v| json!(v)),
            Kind::Int => call.params.int(k).map(|v| json!(v)),
            Kind::Bool => call.params.flag(k).map(|v| json!(u8::from(v))),
            Kind::List => {
                let items = call.params.list(k);
                (!items.is_empty()).then(|| json!(items))
            }
        };
        if let Some(v) = value {
            out.insert((*k).to_owned(), v);
        }
    }
    out
}

/// How a property is kept.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Text,
    Int,
    Bool,
    List,
}

/// An update: sets what was given, then removes what `delete` names.
pub(crate) fn update_props(
    props: &mut Props,
    call: &Call,
    keys: &[(&str, Kind)],
) -> Result<(), ApiError> {
    let set = props_of(call, keys);
    let delete: Vec<String> = call
        .params
        .get("delete")
        .map(|d| {
            d.split([',', ';', ' '])
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for k in &delete {
        if set.contains_key(k) {
            return Err(ApiError::param(
                k.clone(),
                "cannot set and delete the same option",
            ));
        }
        props.remove(k);
    }
    props.extend(set);
    Ok(())
}

/// `GET /cluster/sdn`.
pub async fn index(_inst: Arc<Instance>, _call: Call) -> Result<Reply, ApiError> {
    Ok(Reply::data(json!([
        {"id": "vnets"}, {"id": "zones"}, {"id": "controllers"}, {"id": "ipams"},
        {"id": "dns"}, {"id": "fabrics"}
    ])))
}

/// `PUT /cluster/sdn`: commits the pending configuration, then starts
/// `reloadnetworkall` on the node that answered.
pub async fn apply(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    allocate(&inst, &call, "/sdn")?;
    let nodes = {
        let mut cluster = inst.cluster();
        cluster.sdn.commit();
        cluster.node_names()
    };
    let here = nodes.first().cloned().unwrap_or_default();
    let upid = tasks::spawn(
        &inst,
        &call,
        &here,
        "reloadnetworkall",
        "",
        move |ctx| async move {
            ctx.checkpoint()?;
            for node in &nodes {
                ctx.log(format!("{node}: reloading network config"));
                ctx.sleep(RELOAD).await;
            }
            Ok(())
        },
    );
    Ok(Reply::data(upid))
}
