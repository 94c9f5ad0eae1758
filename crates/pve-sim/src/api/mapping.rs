//! `/cluster/mapping/pci` and `/cluster/mapping/usb` (pve-manager's
//! `PVE::API2::Cluster::Mapping::{PCI,USB}`): create, list, read and
//! delete resource mappings. Guests use them by name; a start looks the
//! name up on the guest's node (see `state::mapping`).

use std::sync::Arc;

use serde_json::{Value, json};

use super::route;
use crate::http::router::Route;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::{Named, Param};
use crate::sim_handler;
use crate::state::mapping::{Mapping, Mappings};

const ID: Param = Param::string("id").format(Named::PveConfigid);
const LIST: &[&[Param]] = &[&[Param::string("check-node").format(Named::PveNode).opt()]];
const ONE: &[&[Param]] = &[&[ID]];
const CREATE_PCI: &[&[Param]] = &[&[
    ID,
    Param::array("map"),
    Param::string("description").max_len(4096).opt(),
    Param::boolean("mdev").opt(),
    Param::boolean("live-migration-capable").opt(),
]];
const CREATE_USB: &[&[Param]] = &[&[
    ID,
    Param::array("map"),
    Param::string("description").max_len(4096).opt(),
]];

pub fn routes() -> Vec<Route> {
    let mut out = Vec::new();
    for (list, one, create_params) in [
        (
            "/cluster/mapping/pci",
            "/cluster/mapping/pci/{id}",
            CREATE_PCI,
        ),
        (
            "/cluster/mapping/usb",
            "/cluster/mapping/usb/{id}",
            CREATE_USB,
        ),
    ] {
        out.push(route("GET", list, LIST, sim_handler!(index)));
        out.push(route("POST", list, create_params, sim_handler!(create)));
        out.push(route("GET", one, ONE, sim_handler!(get)));
        out.push(route("DELETE", one, ONE, sim_handler!(delete)));
    }
    out
}

/// `pci` or `usb`, from the route.
fn kind(call: &Call) -> &'static str {
    if call.route_key.contains("/mapping/usb") {
        "usb"
    } else {
        "pci"
    }
}

fn entry(id: &str, m: &Mapping) -> Value {
    let mut v = json!({"id": id, "map": m.map});
    if let Some(d) = &m.description {
        v["description"] = json!(d);
    }
    v
}

/// Creating and deleting need `Mapping.Modify` on the kind's root.
fn may_modify(inst: &Instance, call: &Call, kind: &str) -> Result<(), ApiError> {
    inst.auth.check(
        &call.identity,
        &format!("/mapping/{kind}"),
        &["Mapping.Modify"],
    )
}

fn not_found(id: &str) -> ApiError {
    ApiError::internal(format!("mapping '{id}' not found"))
}

pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let kind = kind(&call);
    let cluster = inst.cluster();
    let visible = |id: &str| {
        let path = format!("/mapping/{kind}/{id}");
        ["Mapping.Modify", "Mapping.Use", "Mapping.Audit"]
            .iter()
            .any(|p| inst.auth.has(&call.identity, &path, p))
    };
    let items: Vec<Value> = cluster
        .mappings
        .of(kind)
        .iter()
        .filter(|(id, _)| visible(id))
        .map(|(id, m)| entry(id, m))
        .collect();
    Ok(Reply::data(items))
}

pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let kind = kind(&call);
    may_modify(&inst, &call, kind)?;
    let id = call.params.get("id").unwrap_or_default().to_owned();
    let map = call.params.list("map");
    // pve-common checks each item as `map[i]` against the entry format.
    let format = Mappings::format(kind);
    for (i, entry) in map.iter().enumerate() {
        let path = format!("map[{i}]");
        if let Err(e) = format.parse(&path, entry) {
            return Err(ApiError::param(path, format!("invalid format - {e}")));
        }
    }
    let mut cluster = inst.cluster();
    let all = cluster.mappings.of_mut(kind);
    if all.contains_key(&id) {
        return Err(ApiError::internal(format!(
            "{kind} ID '{id}' already defined"
        )));
    }
    let description = call.params.get("description").map(str::to_owned);
    all.insert(id, Mapping { description, map });
    Ok(Reply::null())
}

pub async fn get(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let kind = kind(&call);
    let id = call.params.get("id").unwrap_or_default();
    let path = format!("/mapping/{kind}/{id}");
    inst.auth.check(
        &call.identity,
        &path,
        &["Mapping.Use", "Mapping.Modify", "Mapping.Audit"],
    )?;
    let cluster = inst.cluster();
    let m = cluster
        .mappings
        .of(kind)
        .get(id)
        .ok_or_else(|| not_found(id))?;
    Ok(Reply::data(entry(id, m)))
}

pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let kind = kind(&call);
    may_modify(&inst, &call, kind)?;
    let id = call.params.get("id").unwrap_or_default();
    let mut cluster = inst.cluster();
    cluster
        .mappings
        .of_mut(kind)
        .remove(id)
        .ok_or_else(|| not_found(id))?;
    Ok(Reply::null())
}
