//! `/cluster/nextid` and `/cluster/resources`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::{Named, Param};

pub const NEXTID: &[Param] = &[Param::integer("vmid")
    .format(Named::PveVmid)
    .min(100)
    .max(999_999_999)
    .opt()];
pub const RESOURCES: &[Param] = &[Param::string("type")
    .enums(&["vm", "storage", "node", "sdn"])
    .opt()];

/// The first free VMID, as a JSON *string* like real PVE. Reserves nothing.
pub async fn nextid(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let cluster = inst.cluster();
    if let Some(vmid) = call.params.get("vmid") {
        let id = call.params.vmid("vmid");
        if cluster.vms.contains_key(&id) {
            return Err(ApiError::param("vmid", format!("VM {id} already exists")));
        }
        return Ok(Reply::data(vmid.trim_start_matches('+')));
    }
    let id = cluster
        .next_free_vmid()
        .ok_or_else(|| ApiError::internal("unable to get any free VMID in range [100, 1000000)"))?;
    Ok(Reply::data(id.to_string()))
}

pub async fn resources(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let filter = call.params.get("type");
    let want = |t: &str| filter.is_none_or(|f| f == t);
    let cluster = inst.cluster();
    let id = &call.identity;
    let mut out: Vec<Value> = Vec::new();
    if want("node") {
        for node in &cluster.nodes {
            if inst.auth.has(id, &format!("/nodes/{node}"), "Sys.Audit") {
                out.push(node_resource(node));
            }
        }
    }
    if want("storage") {
        for (node, storages) in &cluster.storages {
            for s in storages {
                if !inst
                    .auth
                    .has(id, &format!("/storage/{}", s.id), "Datastore.Audit")
                {
                    continue;
                }
                out.push(json!({
                    "id": format!("storage/{node}/{}", s.id),
                    "type": "storage",
                    "storage": s.id,
                    "node": node,
                    "status": "available",
                    "content": s.content.join(","),
                    "plugintype": s.type_name(),
                    "shared": 0,
                    "maxdisk": s.total,
                    "disk": s.used(),
                }));
            }
        }
    }
    if want("vm") {
        for vm in cluster.vms.values() {
            if !inst.auth.has(id, &format!("/vms/{}", vm.vmid), "VM.Audit") {
                continue;
            }
            // pvestatd broadcasts every 10 s: until then a new VM has no stats.
            let lag = inst.clock.scaled(inst.durations.resources_lag);
            let fresh = vm.created.is_some_and(|c| c.elapsed() < lag);
            let mut v = json!({"id": format!("qemu/{}", vm.vmid), "type": "qemu", "vmid": vm.vmid, "node": vm.node});
            if fresh {
                v["status"] = json!("unknown");
            } else {
                let running = vm.is_running();
                let extra = json!({
                    "status": if running { "running" } else { "stopped" },
                    "name": vm.name(),
                    "template": u8::from(vm.is_template()),
                    "maxcpu": vm.cpus(),
                    "cpu": if running { json!(0.02) } else { json!(0) },
                    "maxmem": vm.memory_mib() << 20,
                    "mem": if running { (vm.memory_mib() << 20) / 3 } else { 0 },
                    "maxdisk": vm.maxdisk(),
                    "disk": 0,
                    "netin": 0,
                    "netout": 0,
                    "diskread": 0,
                    "diskwrite": 0,
                    "uptime": vm.uptime(inst.clock.scale()),
                });
                merge(&mut v, extra);
            }
            if let Some(lock) = vm.lock() {
                v["lock"] = json!(lock);
            }
            if let Some(tags) = vm.config.get("tags") {
                v["tags"] = json!(tags);
            }
            out.push(v);
        }
    }
    Ok(Reply::data(out))
}

pub fn node_resource(node: &str) -> Value {
    json!({
        "id": format!("node/{node}"),
        "type": "node",
        "node": node,
        "status": "online",
        "level": "",
        "maxcpu": 16,
        "cpu": 0.031,
        "maxmem": 67_430_158_336_u64,
        "mem": 9_864_232_960_u64,
        "maxdisk": 100_861_726_720_u64,
        "disk": 12_884_901_888_u64,
        "uptime": 356_102,
    })
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(a), Value::Object(b)) = (into, from) {
        a.extend(b);
    }
}
