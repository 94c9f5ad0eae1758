//! `/cluster/nextid`, `/cluster/status` and `/cluster/options`
//! (pve-manager `PVE::API2::Cluster`).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::split_list;
use crate::schema::propstr::NEXT_ID;
use crate::schema::{Named, Param};

pub const NEXTID: &[Param] = &[Param::integer("vmid")
    .format(Named::PveVmid)
    .min(100)
    .max(999_999_999)
    .opt()];

/// The datacenter.cfg options `PUT /cluster/options` accepts here.
pub const OPTIONS: &[Param] = &[
    Param::string("next-id").prop(&NEXT_ID).opt(),
    Param::string("description").max_len(65536).opt(),
    Param::string("keyboard").opt(),
    Param::string("language").opt(),
    Param::string("console")
        .enums(&["applet", "vv", "html5", "xtermjs"])
        .opt(),
    Param::string("email_from").opt(),
    Param::string("http_proxy").pattern(r"http://.*").opt(),
    Param::string("mac_prefix").opt(),
    Param::integer("max_workers").min(1).opt(),
    Param::string("migration").opt(),
    Param::string("ha").opt(),
    Param::string("crs").opt(),
    Param::string("tag-style").opt(),
    Param::string("registered-tags").opt(),
    Param::string("user-tag-access").opt(),
    Param::string("delete").opt(),
];

/// The first free VMID in datacenter.cfg's `next-id` range, as a JSON
/// *string* like real PVE. Reserves nothing.
pub async fn nextid(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let cluster = inst.cluster();
    if let Some(vmid) = call.params.get("vmid") {
        let id = call.params.vmid("vmid");
        if cluster.vms.contains_key(&id) {
            return Err(ApiError::param("vmid", format!("VM {id} already exists")));
        }
        return Ok(Reply::data(vmid.trim_start_matches('+')));
    }
    let (lower, upper) = cluster.nextid_range();
    let id = cluster.next_free_vmid().ok_or_else(|| {
        ApiError::internal(format!(
            "unable to get any free VMID in range [{lower}, {upper}]"
        ))
    })?;
    Ok(Reply::data(id.to_string()))
}

/// `GET /cluster/status`: a `cluster` entry (when there is more than one
/// node) and one entry per node, as pmxcfs reports them.
pub async fn status(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Audit"])?;
    let cluster = inst.cluster();
    let local = cluster.nodes.first().map(|n| n.name.clone());
    let mut out = Vec::new();
    if cluster.nodes.len() > 1 {
        out.push(json!({
            "type": "cluster",
            "id": "cluster",
            "name": crate::state::CLUSTER_NAME,
            "nodes": cluster.nodes.len(),
            "version": cluster.nodes.len() + 1,
            "quorate": u8::from(cluster.quorate()),
        }));
    }
    for n in &cluster.nodes {
        let single = cluster.nodes.len() == 1;
        out.push(json!({
            "type": "node",
            "id": format!("node/{}", n.name),
            "name": n.name,
            "nodeid": if single { 0 } else { n.nodeid },
            "ip": n.ip(),
            "local": u8::from(local.as_deref() == Some(n.name.as_str())),
            "online": u8::from(n.online),
            "level": "",
        }));
    }
    Ok(Reply::data(out))
}

/// `GET /cluster/options`: datacenter.cfg parsed (property strings become
/// objects), or only `console`/`tag-style` without `Sys.Audit` on `/`.
pub async fn options(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let audit = inst.auth.has(&call.identity, "/", "Sys.Audit");
    let cluster = inst.cluster();
    let mut out = Map::new();
    for (k, v) in &cluster.options {
        if !audit && k != "console" && k != "tag-style" {
            continue;
        }
        let value = match k.as_str() {
            "next-id" => NEXT_ID
                .parse(k, v)
                .map(|m| json!(m))
                .unwrap_or_else(|_| json!(v)),
            "max_workers" => v.parse::<i64>().map_or_else(|_| json!(v), Value::from),
            _ => json!(v),
        };
        out.insert(k.clone(), value);
    }
    out.insert("allowed-tags".into(), json!([]));
    Ok(Reply::data(Value::Object(out)))
}

/// `PUT /cluster/options`: sets and deletes datacenter.cfg options.
pub async fn set_options(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth.check(&call.identity, "/", &["Sys.Modify"])?;
    let mut cluster = inst.cluster();
    for (k, v) in call.params.iter() {
        if k != "delete" {
            cluster.options.insert(k.clone(), v.clone());
        }
    }
    if let Some(delete) = call.params.get("delete") {
        for key in split_list(delete) {
            cluster.options.remove(key);
        }
    }
    Ok(Reply::null())
}
