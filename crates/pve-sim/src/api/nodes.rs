//! `/nodes` and `/nodes/{node}/status`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::schema::qemu::NODE;

pub const NODE_ONLY: &[Param] = &[NODE];

pub async fn list(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let nodes = inst.cluster().nodes.clone();
    let items: Vec<Value> = nodes
        .iter()
        .filter(|n| {
            inst.auth
                .has(&call.identity, &format!("/nodes/{n}"), "Sys.Audit")
        })
        .map(|n| {
            let mut v = super::cluster::node_resource(n);
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
    Ok(Reply::data(json!({
        "uptime": 356_102,
        "cpu": 0.0312,
        "wait": 0.0008,
        "loadavg": ["0.41", "0.38", "0.35"],
        "cpuinfo": {"model": "pve-sim virtual CPU", "cpus": 16, "sockets": 1, "cores": 8, "mhz": "3600.000", "hvm": "1", "flags": "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx lm constant_tsc rep_good nopl xtopology cpuid pni ssse3 cx16 sse4_1 sse4_2 x2apic popcnt aes xsave avx hypervisor lahf_lm"},
        "memory": {"total": 67_430_158_336_u64, "used": 9_864_232_960_u64, "free": 57_565_925_376_u64, "available": 57_565_925_376_u64},
        "swap": {"total": 8_589_930_496_u64, "used": 0, "free": 8_589_930_496_u64},
        "rootfs": {"total": 100_861_726_720_u64, "used": 12_884_901_888_u64, "avail": 87_976_824_832_u64, "free": 87_976_824_832_u64},
        "ksm": {"shared": 0},
        "kversion": "Linux 6.14.8-2-pve #1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z)",
        "pveversion": "pve-manager/9.1.1/42db4a6cf",
        "boot-info": {"mode": "efi", "secureboot": 0},
        "current-kernel": {"sysname": "Linux", "release": "6.14.8-2-pve", "machine": "x86_64", "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z)"},
    })))
}
