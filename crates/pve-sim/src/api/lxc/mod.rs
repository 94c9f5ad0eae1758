//! `/nodes/{node}/lxc` (pve-container `PVE::API2::LXC`): containers share
//! the VMID space, the task machinery and the locks with VMs. Modelled:
//! list, create (`vzcreate` from a `vztmpl` volume, `lock: create`), config
//! (GET, synchronous PUT), status and start/stop/shutdown/reboot, interfaces,
//! destroy (`vzdestroy`).

mod create;
mod power;

pub use power::start_unlocked;

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::api::route;
use crate::http::router::Route;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::split_list;
use crate::schema::qemu::{NODE, VMID};
use crate::schema::{Kind, Named, Param, find, propstr};
use crate::sim_handler;
use crate::state::Vm;

pub const NODE_VMID: &[Param] = &[NODE, VMID];

/// The container options create and config updates accept.
pub const CONFIG: &[Param] = &[
    Param::string("arch")
        .enums(&["amd64", "i386", "arm64", "armhf", "riscv32", "riscv64"])
        .opt(),
    Param::string("cmode")
        .enums(&["shell", "console", "tty"])
        .opt(),
    Param::boolean("console").opt(),
    Param::integer("cores").min(1).max(8192).opt(),
    Param::number("cpulimit").min(0).max(8192).opt(),
    Param::integer("cpuunits").min(0).max(500_000).opt(),
    Param::string("description").max_len(8192).opt(),
    Param::string("features").prop(&propstr::LXC_FEATURES).opt(),
    Param::string("hostname")
        .format(Named::DnsName)
        .max_len(255)
        .opt(),
    Param::integer("memory").min(16).opt(),
    Param::string("mp[n]").indexed(256).opt(),
    Param::string("nameserver").opt(),
    Param::string("net[n]")
        .prop(&propstr::LXC_NET)
        .indexed(32)
        .opt(),
    Param::boolean("onboot").opt(),
    Param::string("ostype")
        .enums(&[
            "debian",
            "devuan",
            "ubuntu",
            "centos",
            "fedora",
            "opensuse",
            "archlinux",
            "alpine",
            "gentoo",
            "nixos",
            "unmanaged",
        ])
        .opt(),
    Param::boolean("protection").opt(),
    Param::string("rootfs").prop(&propstr::LXC_ROOTFS).opt(),
    Param::string("searchdomain").opt(),
    Param::string("startup")
        .format(Named::PveStartupOrder)
        .opt(),
    Param::integer("swap").min(0).opt(),
    Param::string("tags").format(Named::PveTagList).opt(),
    Param::boolean("template").opt(),
    Param::string("timezone").opt(),
    Param::integer("tty").min(0).max(6).opt(),
    Param::boolean("unprivileged").opt(),
];

const UPDATE: &[Param] = &[
    Param::string("delete").format(Named::PveConfigidList).opt(),
    Param::string("revert").format(Named::PveConfigidList).opt(),
    Param::string("digest").max_len(40).opt(),
];
const CURRENT: &[Param] = &[Param::boolean("current").opt()];
const DESTROY: &[Param] = &[
    Param::boolean("force").opt(),
    Param::boolean("purge").opt(),
    Param::boolean("destroy-unreferenced-disks").opt(),
];

pub fn routes() -> Vec<Route> {
    vec![
        route("GET", "/nodes/{node}/lxc", &[&[NODE]], sim_handler!(list)),
        route(
            "POST",
            "/nodes/{node}/lxc",
            &[create::CREATE, CONFIG],
            sim_handler!(create::create),
        ),
        route(
            "GET",
            "/nodes/{node}/lxc/{vmid}",
            &[NODE_VMID],
            sim_handler!(index),
        ),
        route(
            "DELETE",
            "/nodes/{node}/lxc/{vmid}",
            &[NODE_VMID, DESTROY],
            sim_handler!(create::destroy),
        ),
        route(
            "GET",
            "/nodes/{node}/lxc/{vmid}/config",
            &[NODE_VMID, CURRENT],
            sim_handler!(get_config),
        ),
        route(
            "PUT",
            "/nodes/{node}/lxc/{vmid}/config",
            &[NODE_VMID, UPDATE, CONFIG],
            sim_handler!(put_config),
        ),
        route(
            "GET",
            "/nodes/{node}/lxc/{vmid}/interfaces",
            &[NODE_VMID],
            sim_handler!(interfaces),
        ),
        route(
            "GET",
            "/nodes/{node}/lxc/{vmid}/status/current",
            &[NODE_VMID],
            sim_handler!(current),
        ),
        route(
            "POST",
            "/nodes/{node}/lxc/{vmid}/status/start",
            &[NODE_VMID, power::START],
            sim_handler!(power::start),
        ),
        route(
            "POST",
            "/nodes/{node}/lxc/{vmid}/status/stop",
            &[NODE_VMID, power::STOP],
            sim_handler!(power::stop),
        ),
        route(
            "POST",
            "/nodes/{node}/lxc/{vmid}/status/shutdown",
            &[NODE_VMID, power::SHUTDOWN],
            sim_handler!(power::shutdown),
        ),
        route(
            "POST",
            "/nodes/{node}/lxc/{vmid}/status/reboot",
            &[NODE_VMID, power::REBOOT],
            sim_handler!(power::reboot),
        ),
    ]
}

fn vm_path(call: &Call) -> String {
    format!("/vms/{}", call.params.vmid("vmid"))
}

/// `vmstatus` of a container.
pub fn ct_status(inst: &Instance, ct: &Vm) -> Value {
    let running = ct.is_running();
    let mem = ct.memory_mib() << 20;
    let swap = ct
        .config
        .get("swap")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(512)
        << 20;
    let mut v = json!({
        "vmid": ct.vmid,
        "name": ct.name(),
        "type": "lxc",
        "status": if running { "running" } else { "stopped" },
        "cpus": ct.cpus(),
        "cpu": if running { json!(0.0041) } else { json!(0) },
        "maxmem": mem,
        "mem": if running { mem / 8 } else { 0 },
        "maxswap": swap,
        "swap": 0,
        "maxdisk": ct.maxdisk(),
        "disk": if running { ct.maxdisk() / 6 } else { 0 },
        "uptime": ct.uptime(inst.clock.scale()),
        "netin": 0,
        "netout": 0,
        "diskread": 0,
        "diskwrite": 0,
    });
    if let Some(run) = &ct.running {
        v["pid"] = json!(run.pid);
    }
    for key in ["lock", "tags"] {
        if let Some(value) = ct.config.get(key) {
            v[key] = json!(value);
        }
    }
    if ct.is_template() {
        v["template"] = json!(1);
    }
    v
}

pub async fn list(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let node = call.params.node();
    let cluster = inst.cluster();
    let items: Vec<Value> = cluster
        .vms
        .values()
        .filter(|ct| ct.kind == crate::state::GuestKind::Lxc && ct.node == node)
        .filter(|ct| {
            inst.auth
                .has(&call.identity, &format!("/vms/{}", ct.vmid), "VM.Audit")
        })
        .map(|ct| ct_status(&inst, ct))
        .collect();
    Ok(Reply::data(items))
}

pub async fn index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.cluster()
        .ct(call.params.node(), call.params.vmid("vmid"))?;
    let dirs = [
        "config",
        "status",
        "vncproxy",
        "termproxy",
        "vncwebsocket",
        "spiceproxy",
        "migrate",
        "clone",
        "rrd",
        "rrddata",
        "firewall",
        "snapshot",
        "resize",
        "interfaces",
    ];
    Ok(Reply::data(
        dirs.iter()
            .map(|d| json!({"subdir": d}))
            .collect::<Vec<_>>(),
    ))
}

/// A container option as `GET .../config` returns it.
fn typed(key: &str, value: &str) -> Value {
    match find(CONFIG.iter(), key).map(|p| p.kind) {
        Some(Kind::Integer | Kind::Boolean) => value
            .parse::<i64>()
            .map_or_else(|_| json!(value), Value::from),
        Some(Kind::Number) => value
            .parse::<f64>()
            .map_or_else(|_| json!(value), Value::from),
        _ => json!(value),
    }
}

pub async fn get_config(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth
        .check(&call.identity, &vm_path(&call), &["VM.Audit"])?;
    let cluster = inst.cluster();
    let ct = cluster.ct(call.params.node(), call.params.vmid("vmid"))?;
    let mut out: Map<String, Value> = ct
        .config
        .iter()
        .map(|(k, v)| (k.clone(), typed(k, v)))
        .collect();
    out.insert("digest".into(), json!(ct.digest()));
    Ok(Reply::data(Value::Object(out)))
}

/// `PUT .../config` is synchronous for containers.
pub async fn put_config(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let path = vm_path(&call);
    inst.auth.check(
        &call.identity,
        &path,
        &[
            "VM.Config.Disk",
            "VM.Config.CPU",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.Options",
        ],
    )?;
    let p = &call.params;
    let sets: Vec<(String, String)> = p
        .iter()
        .filter(|(k, _)| !["node", "vmid", "delete", "revert", "digest"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let delete: Vec<String> = split_list(p.get("delete").unwrap_or_default())
        .map(str::to_owned)
        .collect();
    if sets.is_empty() && delete.is_empty() {
        return Err(ApiError::internal("no options specified"));
    }
    let mut cluster = inst.cluster();
    let ct = cluster.ct_mut(p.node(), p.vmid("vmid"))?;
    if p.get("digest").is_some_and(|d| d != ct.digest()) {
        return Err(ApiError::internal(
            "detected modified configuration - file changed by other user? Try again.",
        ));
    }
    ct.check_lock().map_err(ApiError::Internal)?;
    for key in delete {
        if key == "rootfs" {
            return Err(ApiError::param("delete", "unable to delete 'rootfs'"));
        }
        ct.config.remove(&key);
    }
    for (key, value) in sets {
        let value = if key.starts_with("net") {
            create::complete_net(&inst, &key, &value)
        } else {
            value
        };
        ct.config.insert(key, value);
    }
    Ok(Reply::null())
}

pub async fn current(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    inst.auth
        .check(&call.identity, &vm_path(&call), &["VM.Audit"])?;
    let cluster = inst.cluster();
    let ct = cluster.ct(call.params.node(), call.params.vmid("vmid"))?;
    let mut v = ct_status(&inst, ct);
    v["ha"] = json!({"managed": u8::from(cluster.ha.is_managed(ct))});
    Ok(Reply::data(v))
}

/// `GET .../interfaces`: the running container's addresses.
pub async fn interfaces(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &vm_path(&call), &["VM.Audit"])?;
    let cluster = inst.cluster();
    let ct = cluster.ct(call.params.node(), vmid)?;
    if !ct.is_running() {
        return Err(ApiError::internal(format!("CT {vmid} not running")));
    }
    let mut out = vec![
        json!({"name": "lo", "hwaddr": "00:00:00:00:00:00", "inet": "127.0.0.1/8", "inet6": "::1/128"}),
    ];
    for (i, (key, value)) in ct
        .config
        .iter()
        .filter(|(k, _)| k.starts_with("net"))
        .enumerate()
    {
        let Ok(net) = propstr::LXC_NET.parse(key, value) else {
            continue;
        };
        let inet = match net.get("ip").map(String::as_str) {
            Some(ip) if ip.contains('/') => ip.to_owned(),
            _ => format!("192.0.2.{}/24", 10 + (vmid as usize * 7 + i) % 240),
        };
        out.push(json!({
            "name": net.get("name").cloned().unwrap_or_default(),
            "hwaddr": net.get("hwaddr").cloned().unwrap_or_default().to_lowercase(),
            "inet": inet,
        }));
    }
    Ok(Reply::data(out))
}
