//! `GET /nodes/{node}/qemu` and `GET .../status/current`, plus the
//! directory indexes.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::schema::qemu::NODE;
use crate::state::Vm;

pub const LIST: &[Param] = &[NODE, Param::boolean("full").opt()];

/// The fields `vmstatus` reports for a VM.
pub fn vm_status(inst: &Instance, vm: &Vm) -> Value {
    let running = vm.is_running();
    let mem = vm.memory_mib() << 20;
    let mut v = json!({
        "vmid": vm.vmid,
        "name": vm.name(),
        "status": if running { "running" } else { "stopped" },
        "cpus": vm.cpus(),
        "maxmem": mem,
        "maxdisk": vm.maxdisk(),
        "mem": if running { mem / 3 } else { 0 },
        "disk": 0,
        "cpu": if running { json!(0.0213) } else { json!(0) },
        "uptime": vm.uptime(inst.clock.scale()),
        "netin": if running { 11_244 } else { 0 },
        "netout": if running { 2_370 } else { 0 },
        "diskread": if running { 291_352_576 } else { 0 },
        "diskwrite": if running { 12_288 } else { 0 },
    });
    if let Some(run) = &vm.running {
        v["pid"] = json!(run.pid);
    }
    if let Some(lock) = vm.lock() {
        v["lock"] = json!(lock);
    }
    if let Some(tags) = vm.config.get("tags") {
        v["tags"] = json!(tags);
    }
    if vm.is_template() {
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
        .filter(|vm| {
            vm.node == node
                && inst
                    .auth
                    .has(&call.identity, &format!("/vms/{}", vm.vmid), "VM.Audit")
        })
        .map(|vm| vm_status(&inst, vm))
        .collect();
    Ok(Reply::data(items))
}

pub async fn current(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Audit"])?;
    let cluster = inst.cluster();
    let vm = cluster.vm(call.params.node(), vmid)?;
    let mut v = vm_status(&inst, vm);
    let running = vm.is_running();
    v["qmpstatus"] = json!(if running { "running" } else { "stopped" });
    // pve-ha-manager's get_service_status: the manager's service state.
    v["ha"] = match cluster.ha.service_state(vm) {
        Some(state) => json!({"managed": 1, "state": state}),
        None => json!({"managed": 0}),
    };
    if vm.agent_enabled() {
        v["agent"] = json!(1);
    }
    if running {
        v["running-qemu"] = json!("9.2.0");
        v["running-machine"] = json!("pc-i440fx-9.2+pve1");
    }
    if vm.config.contains_key("serial0") {
        v["serial"] = json!(1);
    }
    Ok(Reply::data(v))
}

/// `GET .../qemu/{vmid}`: a static directory index (no checks, like PVE).
pub async fn vm_index(_inst: Arc<Instance>, _call: Call) -> Result<Reply, ApiError> {
    let dirs = [
        "config",
        "cloudinit",
        "pending",
        "status",
        "unlink",
        "vncproxy",
        "termproxy",
        "migrate",
        "resize",
        "move",
        "rrd",
        "rrddata",
        "monitor",
        "agent",
        "snapshot",
        "spiceproxy",
        "sendkey",
        "firewall",
        "mtunnel",
        "remote_migrate",
    ];
    Ok(subdirs(&dirs))
}

pub async fn status_index(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.cluster().vm(call.params.node(), vmid)?;
    let dirs = [
        "current", "start", "stop", "reset", "shutdown", "suspend", "reboot",
    ];
    Ok(subdirs(&dirs))
}

/// A directory index: `[{"subdir": ...}, ...]`.
fn subdirs(dirs: &[&str]) -> Reply {
    Reply::data(
        dirs.iter()
            .map(|d| json!({"subdir": d}))
            .collect::<Vec<_>>(),
    )
}
