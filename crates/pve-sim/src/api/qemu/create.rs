//! `POST /nodes/{node}/qemu`: create a VM. `lock: create` is written before
//! the task starts and held (with the flock) through disk imports; a failed
//! task removes the VM again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::disks::{self, DiskOp};
use super::{
    check_option_privileges, complete_net, creation_defaults, is_cdrom, options, power,
    settle_new_vm, unique_tags, validate_ssh_keys,
};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::qemu;
use crate::state::Vm;
use crate::tasks::{self, TaskCtx};

pub async fn create(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    if let Some(archive) = call.params.get("archive") {
        return restore(&inst, &call, archive);
    }
    let node = call.params.node().to_owned();
    let vmid = call.params.vmid("vmid");
    let vm_path = format!("/vms/{vmid}");
    // qemu-server checks VM.Allocate on the VM or its pool "inside" and
    // raises a bare `Permission check failed` when neither is granted.
    let on_pool = call.params.get("pool").is_some_and(|pool| {
        inst.auth
            .has(&call.identity, &format!("/pool/{pool}"), "VM.Allocate")
    });
    if !inst.auth.has(&call.identity, &vm_path, "VM.Allocate") && !on_pool {
        return Err(ApiError::Forbidden(None));
    }
    if let Some(keys) = call.params.get("sshkeys") {
        validate_ssh_keys(keys)?;
    }
    if let Some(storage) = call.params.get("storage") {
        inst.auth.check(
            &call.identity,
            &format!("/storage/{storage}"),
            &["Datastore.AllocateSpace"],
        )?;
    }
    let opts = options(&call);
    if call.params.flag("start") == Some(true) {
        inst.auth
            .check(&call.identity, &vm_path, &["VM.PowerMgmt"])?;
    }
    let drive_opts: Vec<_> = opts
        .iter()
        .filter(|(k, _)| qemu::is_drive(k))
        .cloned()
        .collect();
    let ops = disks::plan(&inst, &call.identity, &node, &drive_opts)?;
    check_option_privileges(&inst, &call, vmid, &opts, true)?;

    {
        let mut cluster = inst.cluster();
        if let Some(existing) = cluster.vms.get(&vmid) {
            return Err(ApiError::internal(format!(
                "unable to create VM {vmid} - VM {vmid} already exists on node '{}'",
                existing.node
            )));
        }
        let mut placeholder = Vm::locked(vmid, &node, "create");
        placeholder.pool = call.params.get("pool").map(str::to_owned);
        cluster.vms.insert(vmid, placeholder);
    }

    let plain: BTreeMap<String, String> = opts
        .into_iter()
        .filter(|(k, _)| !qemu::is_drive(k))
        .collect();
    let start = call.params.flag("start") == Some(true);
    let autostart_call = Call {
        route_key: "POST /nodes/{node}/qemu/{vmid}/status/start".to_string(),
        ..call.clone()
    };
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmcreate",
        &vmid.to_string(),
        move |ctx| async move {
            let result = run(&ctx, vmid, plain, ops).await;
            if result.is_ok() && start {
                ctx.log("Execute autostart");
                let node = ctx.node.clone();
                tasks::spawn(
                    &ctx.inst,
                    &autostart_call,
                    &node,
                    "qmstart",
                    &vmid.to_string(),
                    move |c| async move { power::start(&c, vmid).await },
                );
            }
            result.map_err(|e| format!("unable to create VM {vmid} - {e}"))
        },
    );
    Ok(Reply::data(upid))
}

async fn run(
    ctx: &TaskCtx,
    vmid: u32,
    plain: BTreeMap<String, String>,
    ops: Vec<DiskOp>,
) -> Result<(), String> {
    // Create takes the config flock with a 1 s timeout and holds it
    // throughout. qemu-server's worker removes the placeholder config after
    // any error, a flock timeout included.
    let _flock = match ctx.flock(vmid, Duration::from_secs(1)).await {
        Ok(flock) => flock,
        Err(e) => return settle_new_vm(ctx, vmid, Err(e), Vec::new()),
    };
    let mut created = Vec::new();
    let result = build(ctx, vmid, plain, ops, &mut created).await;
    settle_new_vm(ctx, vmid, result, created)
}

async fn build(
    ctx: &TaskCtx,
    vmid: u32,
    plain: BTreeMap<String, String>,
    ops: Vec<DiskOp>,
    created: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, String> {
    let mut config = BTreeMap::new();
    for op in ops {
        let (key, value) = disks::execute(ctx, vmid, op, created).await?;
        config.insert(key, value);
    }
    ctx.checkpoint()?;
    for (key, value) in plain {
        let value = match key.as_str() {
            k if k.starts_with("net") => complete_net(&ctx.inst, &key, &value),
            "tags" => unique_tags(&value),
            _ => value,
        };
        config.insert(key, value);
    }
    if !config.contains_key("boot")
        && let Some(order) = default_boot_order(&config)
    {
        config.insert("boot".into(), order);
    }
    creation_defaults(&ctx.inst, &mut config);
    if let Some(pinned) = pin_windows_machine(&config) {
        ctx.log(format!(
            "pinning machine type to '{pinned}' for Windows guest OS"
        ));
        config.insert("machine".into(), pinned);
    }
    Ok(config)
}

/// The machine version the simulator's QEMU (9.2.0, see `meta`) runs, with
/// its newest PVE revision.
const PINNED_MACHINE_VERSION: &str = "9.2+pve1";

/// `check_and_pin_machine_string`: a Windows guest created without a
/// versioned machine type gets the newest version pinned, "they get
/// confused too easily" by a changing one. `None`: nothing to pin.
fn pin_windows_machine(config: &BTreeMap<String, String>) -> Option<String> {
    let windows = config
        .get("ostype")
        .is_some_and(|os| os.starts_with('w') && os != "other");
    if !windows {
        return None;
    }
    let machine = config.get("machine").map(String::as_str).unwrap_or("pc");
    let (type_, rest) = match machine.split_once(',') {
        Some((t, r)) if !t.contains('=') => (t, Some(r)),
        _ if machine.contains('=') => return None,
        _ => (machine, None),
    };
    let pinned = match type_ {
        "pc" | "" => format!("pc-i440fx-{PINNED_MACHINE_VERSION}"),
        "q35" => format!("pc-q35-{PINNED_MACHINE_VERSION}"),
        _ => return None,
    };
    Some(rest.map_or(pinned.clone(), |r| format!("{pinned},{r}")))
}

/// PVE's `get_default_bootdevices`: the first disk, the first CD-ROM
/// (not the cloud-init drive), the first NIC.
fn default_boot_order(config: &BTreeMap<String, String>) -> Option<String> {
    let mut drives: Vec<&String> = config
        .keys()
        .filter(|k| {
            ["ide", "sata", "scsi", "virtio"]
                .iter()
                .any(|b| k.starts_with(b))
        })
        .collect();
    drives.sort_by_key(|k| boot_rank(k));
    let disk = drives.iter().find(|k| !is_cdrom(&config[**k]));
    let cdrom = drives
        .iter()
        .find(|k| is_cdrom(&config[**k]) && !config[**k].contains("cloudinit"));
    let net = config.keys().find(|k| k.starts_with("net"));
    let order: Vec<&str> = disk
        .into_iter()
        .chain(cdrom)
        .map(|k| k.as_str())
        .chain(net.map(String::as_str))
        .collect();
    (!order.is_empty()).then(|| format!("order={}", order.join(";")))
}

/// Disks by bus (ide, sata, scsi, virtio) and index.
fn boot_rank(key: &str) -> (usize, u32) {
    let buses = ["ide", "sata", "scsi", "virtio", "efidisk", "tpmstate"];
    let bus = buses
        .iter()
        .position(|b| key.starts_with(b))
        .unwrap_or(buses.len());
    let idx = key
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or(0);
    (bus, idx)
}

/// `archive=`: a restore, whose options but drives go over the archived
/// config (`override_conf`); a drive conflicts with the archive.
fn restore(inst: &Arc<Instance>, call: &Call, archive: &str) -> Result<Reply, ApiError> {
    let mut overrides = Vec::new();
    for (key, value) in options(call) {
        if qemu::is_drive(&key) {
            return Err(ApiError::param(
                key,
                "option conflicts with option 'archive'",
            ));
        }
        let value = if key.starts_with("net") {
            complete_net(inst, &key, &value)
        } else {
            value
        };
        overrides.push((key, value));
    }
    crate::api::restore::start(
        inst,
        call,
        crate::state::GuestKind::Qemu,
        archive,
        overrides,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_guests_get_a_pinned_machine() {
        let config = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let pin = |pairs: &[(&str, &str)]| pin_windows_machine(&config(pairs));
        assert_eq!(
            pin(&[("ostype", "win11")]).as_deref(),
            Some("pc-i440fx-9.2+pve1")
        );
        assert_eq!(
            pin(&[("ostype", "win11"), ("machine", "q35,viommu=intel")]).as_deref(),
            Some("pc-q35-9.2+pve1,viommu=intel")
        );
        assert_eq!(pin(&[("ostype", "win10"), ("machine", "pc-q35-8.1")]), None);
        assert_eq!(pin(&[("ostype", "l26"), ("machine", "q35")]), None);
        assert_eq!(pin(&[("machine", "q35")]), None);
    }
}
