//! `POST /nodes/{node}/lxc` (`vzcreate`) and `DELETE .../lxc/{vmid}`
//! (`vzdestroy`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::power::start_task;
use crate::api::qemu::disks::allocate;
use crate::api::qemu::{settle_new_vm, spawn_locked};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::parse_size;
use crate::schema::qemu::{NODE, VMID};
use crate::schema::{Named, Param, propstr};
use crate::state::{GuestKind, Vm};
use crate::tasks::{self, TaskCtx};

pub const CREATE: &[Param] = &[
    NODE,
    VMID,
    Param::string("ostemplate").max_len(255),
    Param::string("password").opt(),
    Param::string("ssh-public-keys").opt(),
    Param::boolean("start").opt(),
    Param::string("storage").format(Named::PveStorageId).opt(),
    Param::string("pool").format(Named::PvePoolid).opt(),
    Param::boolean("force").opt(),
    Param::boolean("restore").opt(),
    Param::boolean("unique").requires("restore").opt(),
    Param::boolean("ignore-unpack-errors").opt(),
];

/// Parameters that steer the create rather than being container options.
const CONTROL: &[&str] = &[
    "node",
    "vmid",
    "ostemplate",
    "password",
    "ssh-public-keys",
    "start",
    "storage",
    "pool",
    "force",
    "restore",
    "unique",
    "ignore-unpack-errors",
];

/// A NIC with `hwaddr` and `type=veth` filled in, as PVE writes it.
pub fn complete_net(inst: &Instance, key: &str, value: &str) -> String {
    let Ok(mut net) = propstr::LXC_NET.parse(key, value) else {
        return value.to_owned();
    };
    net.entry("hwaddr".into())
        .or_insert_with(|| inst.random_mac());
    net.entry("type".into()).or_insert_with(|| "veth".into());
    let name = net.remove("name").unwrap_or_default();
    let mut parts = vec![format!("name={name}")];
    parts.extend(net.iter().map(|(k, v)| format!("{k}={v}")));
    parts.join(",")
}

/// The OS type PVE detects from a template's name.
fn ostype_of(template: &str) -> &'static str {
    let name = template.rsplit('/').next().unwrap_or_default();
    [
        "debian",
        "ubuntu",
        "alpine",
        "centos",
        "fedora",
        "archlinux",
        "opensuse",
        "gentoo",
        "devuan",
        "nixos",
    ]
    .into_iter()
    .find(|os| name.starts_with(os))
    .unwrap_or("unmanaged")
}

struct Plan {
    vmid: u32,
    template: String,
    template_size: u64,
    storage: String,
    bytes: u64,
    config: BTreeMap<String, String>,
}

pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    if p.flag("restore") == Some(true) {
        return restore(&inst, &call);
    }
    let node = p.node().to_owned();
    let vmid = p.vmid("vmid");
    let id = &call.identity;
    let on_pool = p
        .get("pool")
        .is_some_and(|pool| inst.auth.has(id, &format!("/pool/{pool}"), "VM.Allocate"));
    if !inst.auth.has(id, &format!("/vms/{vmid}"), "VM.Allocate") && !on_pool {
        return Err(ApiError::Forbidden(None));
    }
    let storage = p.get("storage").unwrap_or("local").to_owned();
    let rootfs = p
        .get("rootfs")
        .map_or_else(|| format!("{storage}:4"), str::to_owned);
    let rootfs = propstr::LXC_ROOTFS
        .parse("rootfs", &rootfs)
        .map_err(|e| ApiError::param("rootfs", format!("invalid format - {e}")))?;
    let volume = rootfs.get("volume").cloned().unwrap_or_default();
    let Some((target, size)) = volume.split_once(':') else {
        return Err(ApiError::param(
            "rootfs",
            "rootfs needs a new volume (STORAGE:SIZE_IN_GiB)",
        ));
    };
    let bytes = match rootfs.get("size") {
        Some(s) => parse_size(s).unwrap_or(0),
        None => (size.parse::<f64>().unwrap_or(0.0) * (1u64 << 30) as f64) as u64,
    };
    inst.auth.check(
        id,
        &format!("/storage/{target}"),
        &["Datastore.AllocateSpace"],
    )?;
    let template = p.get("ostemplate").unwrap_or_default().to_owned();
    let template_size = {
        let cluster = inst.cluster();
        let s = cluster
            .storage(&node, target)
            .ok_or_else(|| ApiError::internal(format!("storage '{target}' does not exist")))?;
        if !s.supports("rootdir") {
            return Err(ApiError::internal(format!(
                "storage '{target}' does not support container directories"
            )));
        }
        let (_, vol) = cluster
            .volume(&node, &template)
            .ok_or_else(|| ApiError::internal(format!("volume '{template}' does not exist")))?;
        if let Some(existing) = cluster.vms.get(&vmid) {
            let kind = if existing.kind == GuestKind::Lxc {
                "CT"
            } else {
                "VM"
            };
            return Err(ApiError::internal(format!(
                "{kind} {vmid} already exists on node '{}'",
                existing.node
            )));
        }
        vol.size
    };
    let mut config: BTreeMap<String, String> = p
        .iter()
        .filter(|(k, _)| !CONTROL.contains(&k.as_str()) && *k != "rootfs")
        .map(|(k, v)| {
            let v = if k.starts_with("net") {
                complete_net(&inst, k, v)
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    config
        .entry("arch".into())
        .or_insert_with(|| "amd64".into());
    config
        .entry("hostname".into())
        .or_insert_with(|| format!("CT{vmid}"));
    config
        .entry("memory".into())
        .or_insert_with(|| "512".into());
    config.entry("swap".into()).or_insert_with(|| "512".into());
    config
        .entry("ostype".into())
        .or_insert_with(|| ostype_of(&template).into());
    inst.cluster().vms.insert(vmid, {
        let mut ct = Vm::locked(vmid, &node, "create");
        ct.kind = GuestKind::Lxc;
        ct.pool = p.get("pool").map(str::to_owned);
        ct
    });
    let plan = Plan {
        vmid,
        template,
        template_size,
        storage: target.to_owned(),
        bytes,
        config,
    };
    let start = p.flag("start") == Some(true);
    let start_call = Call {
        route_key: "POST /nodes/{node}/lxc/{vmid}/status/start".into(),
        ..call.clone()
    };
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "vzcreate",
        &vmid.to_string(),
        move |ctx| async move {
            // As for VMs: a failed worker removes the placeholder config.
            let _flock = match ctx.flock(vmid, Duration::from_secs(1)).await {
                Ok(flock) => flock,
                Err(e) => return settle_new_vm(&ctx, vmid, Err(e), Vec::new()),
            };
            let mut created = Vec::new();
            let built = build(&ctx, plan, &mut created).await;
            let result = settle_new_vm(&ctx, vmid, built, created);
            if result.is_ok() && start {
                start_task(&ctx.inst, &start_call, &ctx.node, vmid);
            }
            result.map_err(|e| format!("unable to create CT {vmid} - {e}"))
        },
    );
    Ok(Reply::data(upid))
}

/// `restore=1`: `ostemplate` names the archive; the call's container
/// options but `rootfs` go over the archived config.
fn restore(inst: &Arc<Instance>, call: &Call) -> Result<Reply, ApiError> {
    let archive = call.params.get("ostemplate").unwrap_or_default();
    let overrides = call
        .params
        .iter()
        .filter(|(k, _)| !CONTROL.contains(&k.as_str()) && *k != "rootfs")
        .map(|(k, v)| {
            let v = if k.starts_with("net") {
                complete_net(inst, k, v)
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    crate::api::restore::start(inst, call, GuestKind::Lxc, archive, overrides)
}

async fn build(
    ctx: &TaskCtx,
    plan: Plan,
    created: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, String> {
    let vmid = plan.vmid;
    let volid = allocate(ctx, &plan.storage, vmid, None, plan.bytes, created)?;
    let blocks = plan.bytes / 4096;
    ctx.log(format!(
        "Creating filesystem with {blocks} 4k blocks and {} inodes",
        blocks / 4
    ));
    let path = {
        let cluster = ctx.inst.cluster();
        let (sid, name) = plan.template.split_once(':').unwrap_or_default();
        cluster
            .storage(&ctx.node, sid)
            .map(|s| s.path(name))
            .unwrap_or_default()
    };
    ctx.log(format!("extracting archive '{path}'"));
    let rate = ctx.inst.durations.import_bytes_per_sec.max(1);
    ctx.sleep(Duration::from_secs_f64(
        plan.template_size as f64 * 4.0 / rate as f64,
    ))
    .await;
    ctx.log(format!(
        "Total bytes read: {} ({}MiB, 180MiB/s)",
        plan.template_size * 4,
        (plan.template_size * 4) >> 20
    ));
    ctx.log(format!(
        "Detected container architecture: {}",
        plan.config.get("arch").map_or("amd64", String::as_str)
    ));
    // The archive unpacks to about four times its compressed size.
    crate::api::qemu::disks::wrote(ctx, &volid, plan.template_size * 4)?;
    ctx.log("Creating SSH host key 'ssh_host_ed25519_key' - this may take some time ...");
    ctx.checkpoint()?;
    let mut config = plan.config;
    // Mount points asking for a new volume (`STORAGE:SIZE_GiB,mp=PATH`)
    // get one, as `rootfs` does (`PVE::LXC::create_disks`).
    let new_mounts: Vec<(String, String, u64, String)> = config
        .iter()
        .filter(|(k, _)| k.starts_with("mp"))
        .filter_map(|(k, v)| {
            let (volume, rest) = v.split_once(',').unwrap_or((v.as_str(), ""));
            let (storage, size) = volume.split_once(':')?;
            let gib = size.parse::<f64>().ok()?;
            Some((
                k.clone(),
                storage.to_owned(),
                (gib * (1u64 << 30) as f64) as u64,
                rest.to_owned(),
            ))
        })
        .collect();
    for (key, storage, bytes, rest) in new_mounts {
        let volid = allocate(ctx, &storage, vmid, None, bytes, created)?;
        let size = crate::schema::format::format_size(bytes);
        let value = match rest.is_empty() {
            true => format!("{volid},size={size}"),
            false => format!("{volid},{rest},size={size}"),
        };
        config.insert(key, value);
    }
    config.insert(
        "rootfs".into(),
        format!(
            "{volid},size={}",
            crate::schema::format::format_size(plan.bytes)
        ),
    );
    Ok(config)
}

pub async fn destroy(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Allocate"])?;
    let force = call.params.flag("force") == Some(true);
    {
        let cluster = inst.cluster();
        let ct = cluster.ct(call.params.node(), vmid)?;
        ct.check_lock().map_err(ApiError::Internal)?;
        if ct.config.get("protection").is_some_and(|p| p == "1") {
            return Err(ApiError::internal(format!(
                "can't remove CT {vmid} - protection mode enabled"
            )));
        }
        if cluster.ha.is_managed(ct) && call.params.flag("purge") != Some(true) {
            return Err(ApiError::internal(format!(
                "unable to remove CT {vmid} - used in HA resources and purge parameter not set."
            )));
        }
        if ct.is_running() && !force {
            return Err(ApiError::internal(format!(
                "unable to destroy CT {vmid} - container is running"
            )));
        }
    }
    Ok(spawn_locked(
        &inst,
        &call,
        "vzdestroy",
        vmid,
        move |ctx| async move {
            let volumes = {
                let mut cluster = ctx.inst.cluster();
                let ct = cluster.ct_mut(&ctx.node, vmid)?;
                ct.check_lock()?;
                if ct.is_running() {
                    ctx.warn(&format!("forced to stop CT {vmid} before destroying!"));
                    ct.running = None;
                }
                ct.config
                    .iter()
                    .filter(|(k, _)| {
                        *k == "rootfs" || k.starts_with("mp") || k.starts_with("unused")
                    })
                    .filter_map(|(_, v)| v.split(',').next().map(str::to_owned))
                    .filter(|v| v.contains(':'))
                    .collect::<Vec<_>>()
            };
            ctx.sleep(ctx.inst.durations.destroy).await;
            ctx.checkpoint()?;
            let mut cluster = ctx.inst.cluster();
            for volid in volumes {
                if cluster.free_volume(&ctx.node, &volid) {
                    let name = volid.split_once(':').map_or(volid.as_str(), |(_, n)| n);
                    ctx.log(format!("  Logical volume \"{name}\" successfully removed."));
                }
            }
            cluster.vms.remove(&vmid);
            cluster.ha.resources.remove(&format!("ct:{vmid}"));
            Ok(())
        },
    ))
}
