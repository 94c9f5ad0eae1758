//! `/nodes` and `/nodes/{node}/status`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::resources::{NODE_UPTIME, ROOTFS_TOTAL, ROOTFS_USED, node_entry};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::schema::qemu::NODE;

pub const NODE_ONLY: &[Param] = &[NODE];

pub async fn list(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let cluster = inst.cluster();
    let items: Vec<Value> = cluster
        .nodes
        .iter()
        .map(|n| {
            let audit = inst
                .auth
                .has(&call.identity, &format!("/nodes/{}", n.name), "Sys.Audit");
            let mut v = node_entry(&cluster, n, !audit);
            if let Some(obj) = v.as_object_mut() {
                obj.remove("type");
                obj.remove("cgroup-mode");
                obj.remove("hastate");
            }
            v["ssl_fingerprint"] = json!(inst.fingerprint);
            v
        })
        .collect();
    Ok(Reply::data(items))
}

pub async fn status(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let node = call.params.node();
    inst.auth
        .check(&call.identity, &format!("/nodes/{node}"), &["Sys.Audit"])?;
    let cluster = inst.cluster();
    let Some(n) = cluster.node(node) else {
        return Err(ApiError::internal(format!("no such node '{node}'")));
    };
    let (total, used) = (n.memory, n.mem_used(cluster.vms.values()));
    let cpus = n.cpus;
    let version = inst.version();
    Ok(Reply::data(json!({
        "uptime": NODE_UPTIME,
        "cpu": n.cpu_load(cluster.vms.values()),
        "wait": 0.0008,
        "loadavg": ["0.41", "0.38", "0.35"],
        "cpuinfo": {"model": "pve-sim virtual CPU", "cpus": cpus, "sockets": 1, "cores": cpus.div_ceil(2), "mhz": "3600.000", "hvm": "1", "flags": "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx lm constant_tsc rep_good nopl xtopology cpuid pni ssse3 cx16 sse4_1 sse4_2 x2apic popcnt aes xsave avx hypervisor lahf_lm"},
        "memory": {"total": total, "used": used, "free": total - used, "available": total - used},
        "swap": {"total": 8_589_930_496_u64, "used": 0, "free": 8_589_930_496_u64},
        "rootfs": {"total": ROOTFS_TOTAL, "used": ROOTFS_USED, "avail": ROOTFS_TOTAL - ROOTFS_USED, "free": ROOTFS_TOTAL - ROOTFS_USED},
        "ksm": {"shared": 0},
        "kversion": "Linux 6.14.8-2-pve #1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z)",
        "pveversion": format!("pve-manager/{}/{}", version.0, version.2),
        "boot-info": {"mode": "efi", "secureboot": 0},
        "current-kernel": {"sysname": "Linux", "release": "6.14.8-2-pve", "machine": "x86_64", "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z)"},
    })))
}
