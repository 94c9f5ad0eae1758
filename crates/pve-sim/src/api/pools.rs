//! `/pools` (pve-manager `PVE::API2::Pool`): resource pools of guests and
//! storages, kept in user.cfg.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::split_list;
use crate::schema::{Named, Param};
use crate::state::{Cluster, Pool};

const POOLID: Param = Param::string("poolid").format(Named::PvePoolid);

pub const INDEX: &[Param] = &[
    POOLID.opt(),
    Param::string("type")
        .enums(&["qemu", "lxc", "storage"])
        .requires("poolid")
        .opt(),
];
pub const ONE: &[Param] = &[
    POOLID,
    Param::string("type")
        .enums(&["qemu", "lxc", "storage"])
        .opt(),
];
pub const CREATE: &[Param] = &[POOLID, Param::string("comment").opt()];
pub const UPDATE: &[Param] = &[
    POOLID,
    Param::string("comment").opt(),
    Param::string("vms").opt(),
    Param::string("storage").opt(),
    Param::boolean("allow-move").opt(),
    Param::boolean("delete").opt(),
];
pub const DELETE: &[Param] = &[POOLID];

/// `lock_user_config` prefixes errors with what it was doing.
fn failed(what: &str, msg: impl std::fmt::Display) -> ApiError {
    ApiError::internal(format!("{what}: {msg}"))
}

pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let cluster = inst.cluster();
    if let Some(poolid) = call.params.get("poolid") {
        return Ok(Reply::data(vec![pool_info(
            &inst,
            &cluster,
            poolid,
            call.params.get("type"),
        )?]));
    }
    let items: Vec<Value> = cluster
        .pools
        .iter()
        .filter(|(id, _)| {
            inst.auth
                .has(&call.identity, &format!("/pool/{id}"), "Pool.Audit")
        })
        .map(|(id, p)| {
            let mut v = json!({"poolid": id});
            if let Some(c) = &p.comment {
                v["comment"] = json!(c);
            }
            v
        })
        .collect();
    Ok(Reply::data(items))
}

pub async fn get(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let poolid = call.params.get("poolid").unwrap_or_default();
    inst.auth
        .check(&call.identity, &format!("/pool/{poolid}"), &["Pool.Audit"])?;
    let cluster = inst.cluster();
    Ok(Reply::data(pool_info(
        &inst,
        &cluster,
        poolid,
        call.params.get("type"),
    )?))
}

fn pool_info(
    inst: &Instance,
    cluster: &Cluster,
    poolid: &str,
    kind: Option<&str>,
) -> Result<Value, ApiError> {
    let pool = cluster
        .pools
        .get(poolid)
        .ok_or_else(|| ApiError::internal(format!("pool '{poolid}' does not exist")))?;
    let mut members = Vec::new();
    for vm in cluster
        .vms
        .values()
        .filter(|vm| vm.pool.as_deref() == Some(poolid))
    {
        if kind.is_none_or(|k| k == vm.kind.type_name()) {
            // As `extract_vm_stats` lists a guest: its status with the
            // resource's id, type and node.
            let mut v = crate::api::qemu::status::vm_status(inst, vm);
            let kind = vm.kind.type_name();
            v["id"] = json!(format!("{kind}/{}", vm.vmid));
            v["type"] = json!(kind);
            v["node"] = json!(vm.node);
            members.push(v);
        }
    }
    if kind.is_none_or(|k| k == "storage") {
        let node = cluster
            .nodes
            .first()
            .map(|n| n.name.clone())
            .unwrap_or_default();
        for sid in &pool.storage {
            if let Some(s) = cluster.storage(&node, sid) {
                let mut v = s.status_json();
                v["id"] = json!(format!("storage/{node}/{sid}"));
                v["node"] = json!(node);
                members.push(v);
            }
        }
    }
    let mut v = json!({"poolid": poolid, "members": members});
    if let Some(c) = &pool.comment {
        v["comment"] = json!(c);
    }
    Ok(v)
}

pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let poolid = call.params.get("poolid").unwrap_or_default().to_owned();
    inst.auth.check(
        &call.identity,
        &format!("/pool/{poolid}"),
        &["Pool.Allocate"],
    )?;
    let what = "create pool failed";
    let mut cluster = inst.cluster();
    if cluster.pools.contains_key(&poolid) {
        return Err(failed(what, format!("pool '{poolid}' already exists")));
    }
    let leaf = match poolid.rsplit_once('/') {
        Some((parent, leaf)) => {
            if !cluster.pools.contains_key(parent) {
                return Err(failed(
                    what,
                    format!("parent '{parent}' of pool '{poolid}' does not exist"),
                ));
            }
            leaf
        }
        None => poolid.as_str(),
    };
    if !leaf.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(failed(what, "pool name must start with a letter"));
    }
    let comment = call
        .params
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    cluster.pools.insert(
        poolid,
        Pool {
            comment,
            ..Pool::default()
        },
    );
    Ok(Reply::null())
}

pub async fn update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let poolid = p.get("poolid").unwrap_or_default().to_owned();
    let id = &call.identity;
    inst.auth
        .check(id, &format!("/pool/{poolid}"), &["Pool.Allocate"])?;
    let what = "update pools failed";
    let delete = p.flag("delete") == Some(true);
    let mut cluster = inst.cluster();
    if !cluster.pools.contains_key(&poolid) {
        return Err(failed(what, format!("pool '{poolid}' does not exist")));
    }
    if let Some(comment) = p.get("comment")
        && let Some(pool) = cluster.pools.get_mut(&poolid)
    {
        pool.comment = Some(comment.to_owned());
    }
    for vmid in split_list(p.get("vms").unwrap_or_default()) {
        inst.auth.check(
            id,
            &format!("/vms/{vmid}"),
            &["Permissions.Modify", "VM.Allocate"],
        )?;
        let vmid: u32 = vmid.parse().unwrap_or_default();
        let Some(vm) = cluster.vms.get_mut(&vmid) else {
            return Err(failed(what, format!("VM {vmid} does not exist")));
        };
        match (&vm.pool, delete) {
            (Some(current), true) if *current == poolid => vm.pool = None,
            (_, true) => return Err(failed(what, format!("VM {vmid} is not a pool member"))),
            (Some(current), false) if *current == poolid => {
                return Err(failed(what, format!("VM {vmid} is already a pool member")));
            }
            (Some(current), false) if p.flag("allow-move") != Some(true) => {
                return Err(failed(
                    what,
                    format!(
                        "VM {vmid} belongs already to pool '{current}' and 'allow-move' is not set"
                    ),
                ));
            }
            (_, false) => vm.pool = Some(poolid.clone()),
        }
    }
    for sid in split_list(p.get("storage").unwrap_or_default()) {
        inst.auth.check(
            id,
            &format!("/storage/{sid}"),
            &["Permissions.Modify", "Datastore.Allocate"],
        )?;
        let Some(pool) = cluster.pools.get_mut(&poolid) else {
            continue;
        };
        let member = pool.storage.contains(sid);
        match (delete, member) {
            (true, true) => {
                pool.storage.remove(sid);
            }
            (true, false) => {
                return Err(failed(
                    what,
                    format!("Storage '{sid}' is not a pool member"),
                ));
            }
            (false, true) => {
                return Err(failed(
                    what,
                    format!("Storage '{sid}' is already a pool member"),
                ));
            }
            (false, false) => {
                pool.storage.insert(sid.to_owned());
            }
        }
    }
    Ok(Reply::null())
}

pub async fn delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let poolid = call.params.get("poolid").unwrap_or_default().to_owned();
    inst.auth.check(
        &call.identity,
        &format!("/pool/{poolid}"),
        &["Pool.Allocate"],
    )?;
    let what = "delete pool failed";
    let mut cluster = inst.cluster();
    let Some(pool) = cluster.pools.get(&poolid) else {
        return Err(failed(what, format!("pool '{poolid}' does not exist")));
    };
    let prefix = format!("{poolid}/");
    if let Some(sub) = cluster.pools.keys().find(|k| k.starts_with(&prefix)) {
        return Err(failed(
            what,
            format!("pool '{poolid}' is not empty (contains pool '{sub}')"),
        ));
    }
    if let Some(vm) = cluster
        .vms
        .values()
        .find(|vm| vm.pool.as_deref() == Some(poolid.as_str()))
    {
        return Err(failed(
            what,
            format!("pool '{poolid}' is not empty (contains VM {})", vm.vmid),
        ));
    }
    if let Some(sid) = pool.storage.first() {
        return Err(failed(
            what,
            format!("pool '{poolid}' is not empty (contains storage '{sid}')"),
        ));
    }
    cluster.pools.remove(&poolid);
    // `delete_pool_acl`: what was granted on the pool goes with it.
    inst.auth.acl_mut().drop_path(&format!("/pool/{poolid}"));
    Ok(Reply::null())
}

/// The pool entries of `/cluster/resources`, with the usage of their
/// running members summed like PVE does.
pub fn resources(inst: &Instance, call: &Call, cluster: &Cluster) -> Vec<Value> {
    cluster
        .pools
        .keys()
        .filter(|id| {
            inst.auth
                .has(&call.identity, &format!("/pool/{id}"), "Pool.Audit")
        })
        .map(|id| {
            let mut v = json!({"id": format!("/pool/{id}"), "pool": id, "type": "pool"});
            let running: Vec<_> = cluster
                .vms
                .values()
                .filter(|vm| vm.pool.as_deref() == Some(id.as_str()) && vm.is_running())
                .collect();
            if !running.is_empty() {
                let maxmem: u64 = running.iter().map(|vm| vm.memory_mib() << 20).sum();
                let maxcpu: u64 = running.iter().map(|vm| vm.cpus()).sum();
                v["maxmem"] = json!(maxmem);
                v["mem"] = json!(maxmem / 3);
                v["maxcpu"] = json!(maxcpu);
                v["cpu"] = json!(0.02);
                v["uptime"] = json!(running.iter().map(|vm| vm.uptime(inst.clock.scale())).max());
            }
            v
        })
        .collect()
}
