//! `/nodes/{node}/qemu/...`: virtual machines.

pub mod agent;
pub mod clone;
pub mod config;
pub mod create;
pub mod disks;
pub mod lifecycle;
pub mod power;
pub mod status;

use std::collections::BTreeMap;

use crate::sim::http::{ApiError, Call};
use crate::sim::instance::Instance;
use crate::sim::schema::propstr;
use crate::sim::schema::qemu::{self, NODE, VMID};
use crate::sim::schema::{Named, Param};

pub const NODE_VMID: &[Param] = &[NODE, VMID];
pub const SKIPLOCK: Param = Param::boolean("skiplock").opt();

/// Parameters that steer a call rather than being VM options.
const CONTROL_PARAMS: &[&str] = &[
    "node",
    "vmid",
    "start",
    "storage",
    "pool",
    "unique",
    "delete",
    "revert",
    "digest",
    "skiplock",
    "background_delay",
];

/// The VM options of a call, in key order.
pub fn options(call: &Call) -> Vec<(String, String)> {
    call.params
        .iter()
        .filter(|(k, _)| !CONTROL_PARAMS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Per-option privileges on `/vms/{vmid}` (and `SDN.Use` for bridges).
pub fn check_option_privileges(
    inst: &Instance,
    call: &Call,
    vmid: u32,
    opts: &[(String, String)],
) -> Result<(), ApiError> {
    let path = format!("/vms/{vmid}");
    for (key, value) in opts {
        match qemu::option_privileges(key) {
            Some(privs) => inst.auth.check(&call.identity, &path, privs)?,
            None => {
                if !call.identity.is_root() {
                    return Err(ApiError::Forbidden(Some(format!(
                        "only root can set '{key}' config"
                    ))));
                }
            }
        }
        if key.starts_with("net")
            && let Ok(net) = propstr::NET.parse(key, value)
            && let Some(bridge) = net.get("bridge")
        {
            inst.auth.check(
                &call.identity,
                &format!("/sdn/zones/localnetwork/{bridge}"),
                &["SDN.Use"],
            )?;
        }
    }
    Ok(())
}

/// A NIC with a generated MAC when none is given, printed as PVE prints it
/// (`virtio=BC:24:11:..,bridge=vmbr0,...`).
pub fn complete_net(inst: &Instance, key: &str, value: &str) -> String {
    let Ok(mut net) = propstr::NET.parse(key, value) else {
        return value.to_owned();
    };
    let model = net.remove("model").unwrap_or_else(|| "virtio".into());
    let mac = net.remove("macaddr").unwrap_or_else(|| inst.random_mac());
    let mut parts = vec![format!("{model}={mac}")];
    parts.extend(net.iter().map(|(k, v)| format!("{k}={v}")));
    parts.join(",")
}

/// The `lock` check PVE makes synchronously (500 `VM is locked (create)`),
/// bypassed by `skiplock=1` (root only, else 400).
pub fn check_lock_sync(call: &Call, lock: Option<&str>) -> Result<(), ApiError> {
    if call.params.flag("skiplock") == Some(true) {
        if !call.identity.is_root() {
            return Err(ApiError::param(
                "skiplock",
                "Only root may use this option.",
            ));
        }
        return Ok(());
    }
    match lock {
        Some(l) => Err(ApiError::internal(format!("VM is locked ({l})"))),
        None => Ok(()),
    }
}

/// Default config entries PVE adds on create.
pub fn creation_defaults(inst: &Instance, config: &mut BTreeMap<String, String>) {
    let now = crate::sim::clock::Clock::epoch_secs();
    config
        .entry("meta".into())
        .or_insert_with(|| format!("creation-qemu=9.2.0,ctime={now}"));
    if !config.get("smbios1").is_some_and(|s| s.contains("uuid=")) {
        let uuid = format!("uuid={}", inst.random_uuid());
        let smbios = match config.get("smbios1") {
            Some(s) if !s.is_empty() => format!("{s},{uuid}"),
            _ => uuid,
        };
        config.insert("smbios1".into(), smbios);
    }
    match config.get("vmgenid").map(String::as_str) {
        Some("0") => {
            config.remove("vmgenid");
        }
        None | Some("1") => {
            config.insert("vmgenid".into(), inst.random_uuid());
        }
        _ => {}
    }
}

pub const POOL: Param = Param::string("pool").format(Named::PvePoolid).opt();
