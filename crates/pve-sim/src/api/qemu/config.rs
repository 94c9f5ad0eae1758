//! `GET/POST/PUT .../config` and `GET .../pending`. POST runs as a
//! `qmconfig` task; PUT does the same work inside the request, holding the
//! flock (a `got timeout` then is a 500). A running VM keeps changes that
//! cannot be hot-plugged pending until its next start.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::disks::{self, DiskOp};
use super::{check_lock_sync, check_option_privileges, options};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::split_list;
use crate::schema::qemu::{self, NODE, VMID};
use crate::schema::{Named, Param};
use crate::tasks::{self, TaskCtx};

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
    let cluster = inst.cluster();
    let vm = cluster.vm(call.params.node(), vmid)?;
    if let Some(snap) = call.params.get("snapshot") {
        let s = vm
            .snapshots
            .get(snap)
            .ok_or_else(|| ApiError::internal(format!("snapshot '{snap}' does not exist")))?;
        let out: Map<String, Value> = s
            .config
            .iter()
            .map(|(k, v)| (k.clone(), masked(k, v)))
            .collect();
        return Ok(Reply::data(Value::Object(out)));
    }
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
        // Like every key of the parsed config, its digest is listed too
        // (pve-guest-common `config_with_pending_array` walks the whole
        // hash `load_config` returns, `digest` included).
        .chain([json!({"key": "digest", "value": vm.digest()})])
        .collect();
    Ok(Reply::data(items))
}

/// A checked update, ready to run.
pub(super) struct Update {
    pub(super) vmid: u32,
    /// `-key value ...` for the task log line.
    pub(super) summary: String,
    pub(super) set: Vec<(String, String)>,
    pub(super) disks: Vec<DiskOp>,
    pub(super) delete: Vec<String>,
    pub(super) revert: Vec<String>,
    pub(super) skiplock: bool,
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
    let known = |k: &str| crate::schema::find(qemu::CONFIG.iter(), k).is_some();
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
    // The work runs in pvedaemon; pveproxy gives up on it after 30 s (an
    // inline import can take longer) while the work itself goes on.
    let work = tokio::spawn(async move { super::update::run(&ctx, update, false).await });
    match tokio::time::timeout(inst.clock.scaled(inst.durations.proxy_timeout), work).await {
        Ok(Ok(result)) => result.map(|()| Reply::null()).map_err(ApiError::Internal),
        Ok(Err(join)) => Err(ApiError::internal(format!(
            "pve-sim: update failed: {join}"
        ))),
        Err(_) => Err(ApiError::Status {
            code: 596,
            reason: "Connection timed out".into(),
        }),
    }
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
        move |ctx| async move { super::update::run(&ctx, update, true).await },
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
