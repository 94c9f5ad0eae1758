//! `/nodes/{node}/qemu/...`: virtual machines.

pub mod agent;
pub mod clone;
pub mod config;
pub mod create;
pub mod devices;
pub mod disks;
mod hotplug;
pub mod lifecycle;
pub mod migrate;
pub mod power;
pub mod snapshot;
pub mod status;
mod update;

use std::collections::BTreeMap;

use std::future::Future;
use std::sync::Arc;

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::propstr;
use crate::schema::qemu::{self, NODE, VMID};
use crate::schema::{Named, Param};
use crate::tasks::{self, TaskCtx};

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
    "archive",
    "force",
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

/// Per-option privileges on `/vms/{vmid}` (and `SDN.Use` for bridges),
/// after qemu-server's `check_vm_modify_config_perm`. On create, drives are
/// covered by the storage checks instead.
pub fn check_option_privileges(
    inst: &Instance,
    call: &Call,
    vmid: u32,
    opts: &[(String, String)],
    creating: bool,
) -> Result<(), ApiError> {
    let path = format!("/vms/{vmid}");
    for (key, value) in opts {
        if creating && qemu::is_drive(key) {
            continue;
        }
        if key == "startup" {
            inst.auth.check(&call.identity, "/", &["Sys.Modify"])?;
        }
        if !value.is_empty() && devices::check(inst, &call.identity, &path, key, value)? {
            continue;
        }
        if devices::check_serial(inst, &call.identity, &path, key, value, creating)? {
            continue;
        }
        match drive_privileges(key, value).or_else(|| qemu::option_privileges(key)) {
            Some(privs) => inst.auth.check(&call.identity, &path, privs)?,
            None if !call.identity.is_root() => {
                return Err(ApiError::internal(format!(
                    "only root can set '{key}' config"
                )));
            }
            None => {}
        }
        if key.starts_with("net")
            && let Ok(net) = propstr::NET.parse(key, value)
            && let Some(bridge) = net.get("bridge")
        {
            // A VNet's privileges are on its zone (`SDN::check_access`).
            let zone = inst.cluster().sdn.running_zone_of(bridge);
            let zone = zone.as_deref().unwrap_or("localnetwork");
            let sdn = format!("/sdn/zones/{zone}/{bridge}");
            inst.auth.check(&call.identity, &sdn, &["SDN.Use"])?;
        }
    }
    Ok(())
}

/// What changing a drive needs: cloud-init and CD-ROM drives have their own privileges.
fn drive_privileges(key: &str, value: &str) -> Option<&'static [&'static str]> {
    if !qemu::is_drive(key) {
        return None;
    }
    Some(if value.contains("cloudinit") {
        &["VM.Config.Cloudinit", "VM.Config.CDROM"]
    } else if is_cdrom(value) {
        &["VM.Config.CDROM"]
    } else {
        &["VM.Config.Disk"]
    })
}

/// A drive value for a CD-ROM drive: `media=cdrom`, or no disk (`none`,
/// `cdrom`: the host's drive).
pub fn is_cdrom(value: &str) -> bool {
    value.contains("media=cdrom") || value.starts_with("none") || value.starts_with("cdrom")
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

/// `check_running`'s existence check (reboot, clone).
pub fn assert_config_exists(inst: &Instance, node: &str, vmid: u32) -> Result<(), ApiError> {
    if inst
        .cluster()
        .vms
        .get(&vmid)
        .is_some_and(|vm| vm.node == node)
    {
        Ok(())
    } else {
        let msg = format!("unable to find configuration file for VM {vmid} on node '{node}'");
        Err(ApiError::internal(msg))
    }
}

/// `skiplock` and friends are root-only: 400 `Only root may use this option.`
pub fn check_root_only(call: &Call, params: &[&str]) -> Result<(), ApiError> {
    for p in params {
        if call.params.flag(p) == Some(true) && !call.identity.is_root() {
            return Err(ApiError::param(*p, "Only root may use this option."));
        }
    }
    Ok(())
}

/// The `lock` check PVE makes synchronously (500 `VM is locked (create)`),
/// bypassed by `skiplock=1` (root only, else 400).
pub fn check_lock_sync(call: &Call, lock: Option<&str>) -> Result<(), ApiError> {
    check_root_only(call, &["skiplock"])?;
    match lock {
        Some(l) if call.params.flag("skiplock") != Some(true) => {
            Err(ApiError::internal(format!("VM is locked ({l})")))
        }
        _ => Ok(()),
    }
}

/// Default config entries PVE adds on create: `meta`, an `smbios1` UUID
/// when no `smbios1` is given, and a `vmgenid` unless one is given.
pub fn creation_defaults(inst: &Instance, config: &mut BTreeMap<String, String>) {
    let now = crate::clock::Clock::epoch_secs();
    config.insert("meta".into(), format!("creation-qemu=9.2.0,ctime={now}"));
    if !config.contains_key("smbios1") {
        config.insert("smbios1".into(), format!("uuid={}", inst.random_uuid()));
    }
    if config.get("vmgenid").is_none_or(|v| v == "1") {
        config.insert("vmgenid".into(), inst.random_uuid());
    }
}

/// `PVE::GuestHelpers::get_unique_tags`: split, de-duplicate, sort, join with `;`.
pub fn unique_tags(tags: &str) -> String {
    let mut list: Vec<&str> = crate::schema::format::split_list(tags).collect();
    list.sort_unstable();
    list.dedup();
    list.join(";")
}

/// `PVE::Tools::validate_ssh_public_keys` on the once-decoded `sshkeys`
/// value: every non-empty line must hold a parsable public key.
pub fn validate_ssh_keys(encoded: &str) -> Result<(), ApiError> {
    let decoded = crate::http::decode::uri_unescape(encoded);
    if decoded
        .lines()
        .filter(|l| !l.trim().is_empty())
        .all(is_public_key_line)
    {
        Ok(())
    } else {
        Err(ApiError::internal("SSH public key validation error"))
    }
}

/// `[options] <type> <base64 blob> [comment]`, where the blob names its type.
fn is_public_key_line(line: &str) -> bool {
    use base64::Engine;
    let tokens: Vec<&str> = line.split_whitespace().collect();
    tokens.windows(2).any(|w| {
        let Ok(blob) = base64::engine::general_purpose::STANDARD.decode(w[1]) else {
            return false;
        };
        let Some(len) = blob
            .get(..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            return false;
        };
        let end = 4 + len as usize;
        blob.get(4..end).is_some_and(|t| t == w[0].as_bytes()) && blob.len() > end
    })
}

/// Ends a task that built a new VM behind its placeholder lock (create,
/// clone): the built config replaces the placeholder, or, as PVE does on
/// failure, the placeholder and the volumes created so far go again and the
/// VMID is free.
pub fn settle_new_vm(
    ctx: &TaskCtx,
    vmid: u32,
    built: Result<BTreeMap<String, String>, String>,
    created: Vec<String>,
) -> Result<(), String> {
    let mut cluster = ctx.inst.cluster();
    match built {
        Ok(config) => {
            if let Some(vm) = cluster.vms.get_mut(&vmid) {
                vm.config = config;
            }
            Ok(())
        }
        Err(e) => {
            cluster.vms.remove(&vmid);
            for volid in created {
                cluster.free_volume(&ctx.node, &volid);
            }
            Err(e)
        }
    }
}

/// The lock check inside a task (the VM must still exist), honouring skiplock.
pub fn task_lock_check(ctx: &TaskCtx, vmid: u32, skiplock: bool) -> Result<(), String> {
    let cluster = ctx.inst.cluster();
    let vm = cluster.vm(&ctx.node, vmid)?;
    if skiplock { Ok(()) } else { vm.check_lock() }
}

/// Starts a worker task (id = VMID) whose body runs under the VM's config
/// flock with the 10 s timeout, like PVE's `lock_config` inside most workers.
pub fn spawn_locked<F, Fut>(
    inst: &Arc<Instance>,
    call: &Call,
    task_type: &str,
    vmid: u32,
    body: F,
) -> Reply
where
    F: FnOnce(TaskCtx) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let node = call.params.node().to_owned();
    Reply::data(tasks::spawn(
        inst,
        call,
        &node,
        task_type,
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
            body(ctx).await
        },
    ))
}

pub const POOL: Param = Param::string("pool").format(Named::PvePoolid).opt();
