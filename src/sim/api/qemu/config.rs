//! `GET/POST/PUT .../config` and `GET .../pending`. POST runs as a
//! `qmconfig` task; PUT does the same work inside the request, holding the
//! flock (a `got timeout` then is a 500). A running VM keeps changes that
//! cannot be hot-plugged pending until its next start.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::disks::{self, DiskOp};
use super::{check_lock_sync, check_option_privileges, complete_net, options, unique_tags};
use crate::sim::http::{ApiError, Call, Reply};
use crate::sim::instance::Instance;
use crate::sim::schema::format::split_list;
use crate::sim::schema::qemu::{self, NODE, VMID};
use crate::sim::schema::{Named, Param, propstr};
use crate::sim::state::Vm;
use crate::sim::tasks::{self, TaskCtx};

pub const GET: &[Param] = &[
    NODE,
    VMID,
    Param::boolean("current").opt(),
    Param::string("snapshot")
        .format(Named::PveConfigid)
        .max_len(40)
        .opt(),
];

const MASK: &str = "**********";

/// Options a running VM applies at once (the rest stays pending): the
/// "fast plug" options, `cipassword` (written directly) and what the
/// default `hotplug=network,disk,usb` covers.
fn applies_while_running(key: &str) -> bool {
    const FAST: &[&str] = &[
        "name",
        "description",
        "tags",
        "onboot",
        "protection",
        "startup",
        "cipassword",
        "hookscript",
    ];
    let indexed = |prefix: &str| {
        key.strip_prefix(prefix)
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
    };
    FAST.contains(&key)
        || ["net", "scsi", "virtio", "unused"]
            .iter()
            .any(|p| indexed(p))
}

fn masked(key: &str, value: &str) -> Value {
    if key == "cipassword" {
        json!(MASK)
    } else {
        qemu::typed(key, value)
    }
}

pub async fn get(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Audit"])?;
    if let Some(snap) = call.params.get("snapshot") {
        return Err(ApiError::internal(format!(
            "snapshot '{snap}' does not exist"
        )));
    }
    let cluster = inst.cluster();
    let vm = cluster.vm(call.params.node(), vmid)?;
    let mut config = vm.config.clone();
    if call.params.flag("current") != Some(true) {
        config.extend(vm.pending.clone());
        for key in &vm.pending_delete {
            config.remove(key);
        }
    }
    let mut out: Map<String, Value> = config
        .iter()
        .map(|(k, v)| (k.clone(), masked(k, v)))
        .collect();
    out.insert("digest".into(), json!(vm.digest()));
    Ok(Reply::data(Value::Object(out)))
}

pub async fn pending(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Audit"])?;
    let cluster = inst.cluster();
    let vm = cluster.vm(call.params.node(), vmid)?;
    let mut keys: Vec<&String> = vm
        .config
        .keys()
        .chain(vm.pending.keys())
        .chain(vm.pending_delete.iter())
        .collect();
    keys.sort();
    keys.dedup();
    let items: Vec<Value> = keys
        .into_iter()
        .map(|k| {
            let mut item = json!({"key": k});
            if let Some(v) = vm.config.get(k) {
                item["value"] = masked(k, v);
            }
            if let Some(p) = vm.pending.get(k) {
                // PVE masks a pending cipassword with a trailing space (sic).
                item["pending"] = if k == "cipassword" {
                    json!(format!("{MASK} "))
                } else {
                    qemu::typed(k, p)
                };
            }
            if vm.pending_delete.contains(k) {
                item["delete"] = json!(1);
            }
            item
        })
        .collect();
    Ok(Reply::data(items))
}

/// A checked update, ready to run.
struct Update {
    vmid: u32,
    /// `-key value ...` for the task log line.
    summary: String,
    set: Vec<(String, String)>,
    disks: Vec<DiskOp>,
    delete: Vec<String>,
    revert: Vec<String>,
    skiplock: bool,
}

const CONFIG_PRIVS: &[&str] = &[
    "VM.Config.Disk",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.HWType",
    "VM.Config.Options",
    "VM.Config.Cloudinit",
];

/// The synchronous part both PUT and POST share (`update_vm_api` up to the fork).
fn prepare(inst: &Instance, call: &Call) -> Result<Update, ApiError> {
    let node = call.params.node();
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), CONFIG_PRIVS)?;
    let summary = call
        .params
        .iter()
        .filter(|(k, _)| !["node", "vmid", "digest", "background_delay"].contains(&k.as_str()))
        .map(|(k, v)| format!("-{k} {}", if k == "cipassword" { "<hidden>" } else { v }))
        .collect::<Vec<_>>()
        .join(" ");
    super::check_root_only(call, &["skiplock"])?;
    if let Some(keys) = call.params.get("sshkeys") {
        super::validate_ssh_keys(keys)?;
    }
    let opts = options(call);
    let list = |name: &str| -> Vec<String> {
        call.params
            .get(name)
            .map(|d| split_list(d).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let (delete, revert) = (list("delete"), list("revert"));
    if opts.is_empty() && delete.is_empty() && revert.is_empty() {
        return Err(ApiError::internal("no options specified"));
    }
    check_delete_revert(&opts, &delete, &revert)?;
    let deleted: Vec<(String, String)> = delete
        .iter()
        .filter(|k| !qemu::is_drive(k))
        .map(|k| (k.clone(), String::new()))
        .collect();
    check_option_privileges(inst, call, vmid, &deleted, false)?;
    check_option_privileges(inst, call, vmid, &opts, false)?;
    let drive_opts: Vec<_> = opts
        .iter()
        .filter(|(k, _)| qemu::is_drive(k))
        .cloned()
        .collect();
    let disks = disks::plan(inst, &call.identity, node, &drive_opts)?;
    {
        let cluster = inst.cluster();
        let vm = cluster.vm(node, vmid)?;
        if call.params.get("digest").is_some_and(|d| d != vm.digest()) {
            return Err(ApiError::internal(
                "checksum mismatch (file change by other user?)",
            ));
        }
        check_lock_sync(call, vm.lock())?;
    }
    let set = opts
        .into_iter()
        .filter(|(k, _)| !qemu::is_drive(k))
        .collect();
    let skiplock = call.params.flag("skiplock") == Some(true);
    Ok(Update {
        vmid,
        summary,
        set,
        disks,
        delete,
        revert,
        skiplock,
    })
}

fn check_delete_revert(
    opts: &[(String, String)],
    delete: &[String],
    revert: &[String],
) -> Result<(), ApiError> {
    let known = |k: &str| crate::sim::schema::find(qemu::CONFIG.iter(), k).is_some();
    let given = |k: &str| opts.iter().any(|(o, _)| o == k);
    for key in revert {
        if !known(key) {
            return Err(ApiError::param("revert", format!("unknown option '{key}'")));
        }
        if given(key) {
            return Err(ApiError::param(
                "delete",
                format!("you can't use '-{key}' and -revert {key}' at the same time"),
            ));
        }
    }
    for key in delete {
        if given(key) {
            return Err(ApiError::param(
                "delete",
                format!("you can't use '-{key}' and -delete {key}' at the same time"),
            ));
        }
        if revert.contains(key) {
            let msg = format!("you can't use '-delete {key}' and -revert {key}' at the same time");
            return Err(ApiError::param("revert", msg));
        }
        if !known(key) {
            return Err(ApiError::param("delete", format!("unknown option '{key}'")));
        }
    }
    Ok(())
}

pub async fn put(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let update = prepare(&inst, &call)?;
    let ctx = TaskCtx::inline(inst.clone(), call.params.node(), call.lock_timeout);
    run(&ctx, update, false).await.map_err(ApiError::Internal)?;
    Ok(Reply::null())
}

pub async fn post(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let update = prepare(&inst, &call)?;
    let node = call.params.node().to_owned();
    let vmid = update.vmid;
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmconfig",
        &vmid.to_string(),
        move |ctx| async move { run(&ctx, update, true).await },
    );
    // `background_delay`: wait for the task; null if it ended well in time.
    if let Some(delay) = call.params.int("background_delay") {
        let deadline = inst
            .clock
            .deadline(Duration::from_secs(delay.max(0) as u64));
        while tokio::time::Instant::now() < deadline {
            if let Some(exit) = inst.tasks.find(&upid).and_then(|r| r.exit) {
                if exit == "OK" || exit.starts_with("WARNINGS: ") {
                    return Ok(Reply::null());
                }
                return Err(ApiError::internal(format!(
                    "failed to update VM {vmid}: {exit}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    Ok(Reply::data(upid))
}

fn missing(node: &str, vmid: u32) -> String {
    format!("Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
}

async fn run(ctx: &TaskCtx, u: Update, in_task: bool) -> Result<(), String> {
    let vmid = u.vmid;
    let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
    {
        let cluster = ctx.inst.cluster();
        let vm = cluster
            .vm(&ctx.node, vmid)
            .map_err(|_| missing(&ctx.node, vmid))?;
        if !u.skiplock {
            vm.check_lock()?;
        }
    }
    ctx.checkpoint()?;
    ctx.log(format!("update VM {vmid}: {}", u.summary));
    if in_task {
        ctx.sleep(ctx.inst.durations.config).await;
    }
    let mut created = Vec::new();
    let mut values = u.set;
    for op in u.disks {
        match disks::execute(ctx, vmid, op, &mut created).await {
            Ok(kv) => values.push(kv),
            Err(e) => {
                let mut cluster = ctx.inst.cluster();
                for volid in created {
                    cluster.free_volume(&ctx.node, &volid);
                }
                return Err(e);
            }
        }
    }
    let mut cluster = ctx.inst.cluster();
    let node = ctx.node.clone();
    let mut freed = Vec::new();
    let vm = cluster
        .vm_mut(&node, vmid)
        .map_err(|_| missing(&node, vmid))?;
    for key in u.delete {
        delete_key(ctx, vm, key, &mut freed);
    }
    for (key, value) in values {
        set_key(ctx, vm, key, value, &mut freed);
    }
    for key in u.revert {
        vm.pending.remove(&key);
        vm.pending_delete.remove(&key);
    }
    for volid in freed {
        cluster.free_volume(&node, &volid);
    }
    Ok(())
}

fn set_key(ctx: &TaskCtx, vm: &mut Vm, key: String, value: String, freed: &mut Vec<String>) {
    let value = normalize(ctx, &key, value);
    vm.pending_delete.remove(&key);
    if vm.is_running() && !applies_while_running(&key) {
        vm.pending.insert(key, value);
        return;
    }
    if let Some(old) = vm.config.get(&key).cloned()
        && qemu::is_drive(&key)
        && volume_of(&old) != volume_of(&value)
    {
        detach(vm, &key, &old, freed);
    }
    vm.pending.remove(&key);
    vm.config.insert(key, value);
}

fn delete_key(ctx: &TaskCtx, vm: &mut Vm, key: String, freed: &mut Vec<String>) {
    if !vm.config.contains_key(&key) && !vm.pending.contains_key(&key) {
        ctx.log(format!(
            "cannot delete '{key}' - not set in current configuration!"
        ));
        return;
    }
    remove_from_boot_order(vm, &key);
    vm.pending.remove(&key);
    if vm.is_running() && !applies_while_running(&key) {
        vm.pending_delete.insert(key);
    } else if let Some(old) = vm.config.remove(&key) {
        detach(vm, &key, &old, freed);
    }
}

/// A new value as PVE stores it. A NIC given without `macaddr` gets a new
/// random MAC (PVE's `parse_net` does not keep the old one), tags are
/// de-duplicated and sorted, a plain `cipassword` is hashed.
fn normalize(ctx: &TaskCtx, key: &str, value: String) -> String {
    if key.starts_with("net") {
        return complete_net(&ctx.inst, key, &value);
    }
    if key == "tags" {
        return unique_tags(&value);
    }
    if key == "cipassword"
        && !["$1$", "$5$", "$6$", "$2a$", "$2y$"]
            .iter()
            .any(|p| value.starts_with(p))
    {
        use sha2::{Digest, Sha256};
        let hash: String = Sha256::digest(value.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        return format!("$5$pvesim${hash}");
    }
    value
}

/// Deleting a device also removes it from `boot: order=...`.
fn remove_from_boot_order(vm: &mut Vm, key: &str) {
    let Some(boot) = vm.config.get("boot").cloned() else {
        return;
    };
    let Ok(parsed) = propstr::BOOT.parse("boot", &boot) else {
        return;
    };
    let Some(order) = parsed.get("order") else {
        return;
    };
    let devices: Vec<&str> = order.split(';').collect();
    if devices.contains(&key) {
        let kept: Vec<&str> = devices.into_iter().filter(|d| *d != key).collect();
        vm.config
            .insert("boot".into(), format!("order={}", kept.join(";")));
    }
}

fn volume_of(drive: &str) -> Option<String> {
    drive
        .split(',')
        .next()
        .filter(|f| f.contains(':'))
        .map(str::to_owned)
}

/// Removing a drive: disks become `unusedN`, the cloud-init volume and
/// `unusedN` volumes are destroyed, CD-ROMs just go away.
fn detach(vm: &mut Vm, key: &str, old: &str, freed: &mut Vec<String>) {
    let Some(volid) = volume_of(old) else { return };
    if key.starts_with("unused") || volid.contains("-cloudinit") {
        freed.push(volid);
    } else if qemu::is_drive(key) && !old.contains("media=cdrom") {
        let slot = (0..256)
            .map(|i| format!("unused{i}"))
            .find(|k| !vm.config.contains_key(k))
            .unwrap_or_default();
        vm.config.insert(slot, volid);
    }
}
