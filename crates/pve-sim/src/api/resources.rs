//! `GET /cluster/resources` (pve-manager `PVE::API2::Cluster::resources`
//! with `PVE::API2Tools::extract_*_stats`): pools, guests (sorted by VMID as
//! text), nodes, storages per node and the `localnetwork` SDN zone, each
//! after its audit check. Figures follow the guests actually running and the
//! volumes actually allocated.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::state::{Cluster, NodeState, Storage, Vm};

pub const PARAMS: &[Param] = &[Param::string("type")
    .enums(&["vm", "storage", "node", "sdn"])
    .opt()];

/// What every node reports as its root filesystem.
pub const ROOTFS_TOTAL: u64 = 100_861_726_720;
pub const ROOTFS_USED: u64 = 12_884_901_888;
/// A node's uptime (seconds) as the simulator reports it.
pub const NODE_UPTIME: u64 = 356_102;

pub async fn resources(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let filter = call.params.get("type");
    let want = |t: &str| filter.is_none_or(|f| f == t);
    let cluster = inst.cluster();
    let id = &call.identity;
    let mut out: Vec<Value> = Vec::new();
    if filter.is_none() {
        out.extend(crate::api::pools::resources(&inst, &call, &cluster));
    }
    if want("vm") {
        let mut ids: Vec<&u32> = cluster.vms.keys().collect();
        // pmxcfs' vmlist is a Perl hash walked with `sort keys`: text order.
        ids.sort_by_key(|v| v.to_string());
        for vmid in ids {
            let vm = &cluster.vms[vmid];
            if inst.auth.has(id, &format!("/vms/{vmid}"), "VM.Audit") {
                out.push(guest(&inst, &cluster, vm));
            }
        }
    }
    if want("node") {
        for node in &cluster.nodes {
            let audit = inst
                .auth
                .has(id, &format!("/nodes/{}", node.name), "Sys.Audit");
            out.push(node_entry(&cluster, node, !audit));
        }
    }
    if want("storage") {
        for (node, storages) in &cluster.storages {
            for s in storages {
                if inst
                    .auth
                    .has(id, &format!("/storage/{}", s.id), "Datastore.Audit")
                {
                    out.push(storage_entry(&cluster, node, s));
                }
            }
        }
    }
    if want("sdn") && inst.auth.has(id, "/sdn/zones/localnetwork", "SDN.Audit") {
        for node in &cluster.nodes {
            out.push(json!({
                "id": format!("sdn/{}/localnetwork", node.name),
                "sdn": "localnetwork",
                "node": node.name,
                "type": "sdn",
                "status": "ok",
            }));
        }
    }
    Ok(Reply::data(out))
}

/// A guest's entry. pvestatd broadcasts every 10 s: until then a new guest
/// has no stats, and a guest on an offline node has none either.
fn guest(inst: &Instance, cluster: &Cluster, vm: &Vm) -> Value {
    let lag = inst.clock.scaled(inst.durations.resources_lag);
    let fresh = vm.created.is_some_and(|c| c.elapsed() < lag);
    let online = cluster.node(&vm.node).is_some_and(|n| n.online);
    let kind = vm.kind.type_name();
    let mut v = json!({
        "id": format!("{kind}/{}", vm.vmid),
        "type": kind,
        "vmid": vm.vmid,
        "node": vm.node,
        "status": "unknown",
    });
    if !fresh && online {
        let running = vm.is_running();
        let stats = json!({
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
        merge(&mut v, stats);
    }
    for key in ["lock", "tags"] {
        if let Some(value) = vm.config.get(key) {
            v[key] = json!(value);
        }
    }
    if let Some(pool) = &vm.pool {
        v["pool"] = json!(pool);
    }
    if let Some(state) = cluster.ha.service_state(vm) {
        v["hastate"] = json!(state);
    }
    v
}

/// A node's entry; offline nodes keep their sizes but lose their usage.
pub fn node_entry(cluster: &Cluster, node: &NodeState, exclude_stats: bool) -> Value {
    let mut v = json!({
        "id": format!("node/{}", node.name),
        "node": node.name,
        "type": "node",
        "status": if node.online { "online" } else { "offline" },
        "level": "",
        "cgroup-mode": 2,
    });
    if exclude_stats {
        return v;
    }
    merge(
        &mut v,
        json!({
            "maxcpu": node.cpus,
            "maxmem": node.memory,
            "maxdisk": ROOTFS_TOTAL,
        }),
    );
    if node.online {
        merge(
            &mut v,
            json!({
                "uptime": NODE_UPTIME,
                "cpu": node.cpu_load(cluster.vms.values()),
                "mem": node.mem_used(cluster.vms.values()),
                "disk": ROOTFS_USED,
            }),
        );
    }
    if let Some(state) = cluster.ha.node_state(&node.name) {
        v["hastate"] = json!(state);
    }
    v
}

fn storage_entry(cluster: &Cluster, node: &str, s: &Storage) -> Value {
    let online = cluster.node(node).is_some_and(|n| n.online);
    let mut v = json!({
        "id": format!("storage/{node}/{}", s.id),
        "type": "storage",
        "storage": s.id,
        "node": node,
        "status": "unknown",
        "content": s.content.join(","),
        "plugintype": s.type_name(),
        "shared": u8::from(s.shared),
    });
    if online {
        merge(
            &mut v,
            json!({"status": "available", "maxdisk": s.total, "disk": s.used()}),
        );
    }
    v
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(a), Value::Object(b)) = (into, from) {
        a.extend(b);
    }
}
