//! `GET/POST/PUT .../config` and `GET .../pending`. POST runs as a
//! `qmconfig` task; PUT does the same work inside the request, holding the
//! flock (a `got timeout` then is a 500). A running VM keeps changes that
//! cannot be hot-plugged pending until its next start.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::disks::{self, DiskOp};
use super::{check_lock_sync, check_option_privileges, complete_net, options};
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
    Param::string("snapshot").format(Named::PveConfigid).opt(),
];

const MASK: &str = "**********";

/// Options a running VM applies at once (the rest stays pending).
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
    FAST.contains(&key)
        || ["net", "scsi", "virtio", "unused"]
            .iter()
            .any(|p| key.starts_with(p) && key[p.len()..].bytes().all(|b| b.is_ascii_digit()))
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
    if call.params.has("snapshot") {
        return Err(ApiError::internal(format!(
            "snapshot '{}' does not exist",
            call.params.get("snapshot").unwrap_or_default()
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
                item["pending"] = masked(k, p);
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
    set: Vec<(String, String)>,
    disks: Vec<DiskOp>,
    delete: Vec<String>,
    revert: Vec<String>,
    skiplock: bool,
}

/// The synchronous part both PUT and POST share.
fn prepare(inst: &Instance, call: &Call) -> Result<Update, ApiError> {
    let node = call.params.node();
    let vmid = call.params.vmid("vmid");
    let path = format!("/vms/{vmid}");
    let gate = [
        "VM.Config.Disk",
        "VM.Config.CDROM",
        "VM.Config.CPU",
        "VM.Config.Memory",
        "VM.Config.Network",
        "VM.Config.HWType",
        "VM.Config.Options",
        "VM.Config.Cloudinit",
    ];
    inst.auth.check(&call.identity, &path, &gate)?;
    let opts = options(call);
    let delete: Vec<String> = call
        .params
        .get("delete")
        .map(|d| split_list(d).map(str::to_owned).collect())
        .unwrap_or_default();
    let revert: Vec<String> = call
        .params
        .get("revert")
        .map(|d| split_list(d).map(str::to_owned).collect())
        .unwrap_or_default();
    if opts.is_empty() && delete.is_empty() && revert.is_empty() {
        return Err(ApiError::internal("no options specified"));
    }
    for key in &delete {
        if opts.iter().any(|(k, _)| k == key) {
            return Err(ApiError::param(
                "delete",
                format!("you can't use '-{key}' and -delete {key}' at the same time"),
            ));
        }
    }
    let deleted: Vec<(String, String)> =
        delete.iter().map(|k| (k.clone(), String::new())).collect();
    check_option_privileges(inst, call, vmid, &opts)?;
    let path_privs: Vec<_> = deleted
        .iter()
        .filter(|(k, _)| qemu::option_privileges(k).is_some())
        .cloned()
        .collect();
    check_option_privileges(inst, call, vmid, &path_privs)?;
    {
        let cluster = inst.cluster();
        let vm = cluster.vm(node, vmid)?;
        if let Some(digest) = call.params.get("digest")
            && digest != vm.digest()
        {
            return Err(ApiError::internal(
                "checksum mismatch (file change by other user?)",
            ));
        }
        check_lock_sync(call, vm.lock())?;
    }
    let drive_opts: Vec<_> = opts
        .iter()
        .filter(|(k, _)| qemu::is_drive(k))
        .cloned()
        .collect();
    let disks = disks::plan(inst, &call.identity, node, &drive_opts)?;
    let set = opts
        .into_iter()
        .filter(|(k, _)| !qemu::is_drive(k))
        .collect();
    Ok(Update {
        vmid,
        set,
        disks,
        delete,
        revert,
        skiplock: call.params.flag("skiplock") == Some(true),
    })
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
    let id = update.vmid.to_string();
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmconfig",
        &id,
        move |ctx| async move { run(&ctx, update, true).await },
    );
    Ok(Reply::data(upid))
}

async fn run(ctx: &TaskCtx, u: Update, in_task: bool) -> Result<(), String> {
    let vmid = u.vmid;
    let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
    {
        let cluster = ctx.inst.cluster();
        let vm = cluster.vm(&ctx.node, vmid).map_err(|_| {
            format!(
                "Configuration file 'nodes/{}/qemu-server/{vmid}.conf' does not exist",
                ctx.node
            )
        })?;
        if !u.skiplock {
            vm.check_lock()?;
        }
    }
    ctx.checkpoint()?;
    if in_task {
        let summary: Vec<String> = u
            .set
            .iter()
            .map(|(k, v)| format!("-{k} {}", if k == "cipassword" { "<hidden>" } else { v }))
            .collect();
        ctx.log(
            format!("update VM {vmid}: {}", summary.join(" "))
                .trim_end()
                .to_owned(),
        );
        ctx.sleep(ctx.inst.durations.config).await;
    }
    let mut created = Vec::new();
    let mut values = u.set.clone();
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
    let vm = cluster.vm_mut(&node, vmid).map_err(|_| {
        format!("Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
    })?;
    let running = vm.is_running();
    for (key, value) in values {
        let value = normalize(ctx, vm, &key, value);
        if running && !applies_while_running(&key) {
            vm.pending_delete.remove(&key);
            vm.pending.insert(key, value);
        } else {
            if let Some(old) = vm.config.get(&key).cloned()
                && qemu::is_drive(&key)
                && volume_of(&old) != volume_of(&value)
            {
                detach(vm, &key, &old, &mut freed);
            }
            vm.pending.remove(&key);
            vm.config.insert(key, value);
        }
    }
    for key in u.delete {
        if running && !applies_while_running(&key) {
            vm.pending.remove(&key);
            vm.pending_delete.insert(key);
        } else if let Some(old) = vm.config.remove(&key) {
            detach(vm, &key, &old, &mut freed);
        }
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

/// A new value as PVE stores it: NICs keep their MAC, passwords are hashed.
fn normalize(ctx: &TaskCtx, vm: &Vm, key: &str, value: String) -> String {
    if key.starts_with("net") {
        let old_mac = vm
            .config
            .get(key)
            .and_then(|old| propstr::NET.parse(key, old).ok())
            .and_then(|n| n.get("macaddr").cloned());
        let with_mac = match (old_mac, propstr::NET.parse(key, &value)) {
            (Some(mac), Ok(new)) if !new.contains_key("macaddr") => {
                format!("{value},macaddr={mac}")
            }
            _ => value,
        };
        return complete_net(&ctx.inst, key, &with_mac);
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
