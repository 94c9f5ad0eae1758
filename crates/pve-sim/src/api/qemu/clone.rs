//! `POST .../clone`: a template clones linked by default, anything else (or
//! `full=1`) is copied. The task writes `lock: clone` as the target's
//! config first and removes it again if the clone fails.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::disks::{self, print_drive};
use super::{NODE_VMID, POOL, assert_config_exists, complete_net, settle_new_vm};
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::{format_size, parse_size};
use crate::schema::{Named, Param, propstr};
use crate::state::Vm;
use crate::tasks::{self, TaskCtx};

pub const CLONE: &[Param] = &[
    Param::integer("newid")
        .format(Named::PveVmid)
        .min(100)
        .max(999_999_999),
    Param::string("name").format(Named::DnsName).opt(),
    Param::string("description").opt(),
    Param::boolean("full").opt(),
    POOL,
    Param::string("storage").format(Named::PveStorageId).opt(),
    Param::string("format")
        .enums(&["raw", "qcow2", "vmdk"])
        .opt(),
    Param::string("target").format(Named::PveNode).opt(),
    Param::string("snapname")
        .format(Named::PveConfigid)
        .max_len(40)
        .opt(),
    Param::integer("bwlimit").min(0).opt(),
];
pub const PARAMS: &[&[Param]] = &[NODE_VMID, CLONE];

/// One disk to copy or clone.
#[derive(Clone, Debug)]
struct DiskCopy {
    key: String,
    source: String,
    opts: BTreeMap<String, String>,
    /// Copied (full clone, or always for the cloud-init drive) vs. linked.
    full: bool,
}

struct Plan {
    vmid: u32,
    newid: u32,
    storage: Option<String>,
    copies: Vec<DiskCopy>,
    config: BTreeMap<String, String>,
    name: Option<String>,
    description: Option<String>,
}

pub async fn clone(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node().to_owned();
    let vmid = p.vmid("vmid");
    let newid = p.vmid("newid");
    let id = &call.identity;
    inst.auth
        .check(id, &format!("/vms/{vmid}"), &["VM.Clone"])?;
    match p.get("pool") {
        Some(pool) => inst
            .auth
            .check(id, &format!("/pool/{pool}"), &["VM.Allocate"])?,
        None => inst
            .auth
            .check(id, &format!("/vms/{newid}"), &["VM.Allocate"])?,
    }
    assert_config_exists(&inst, &node, vmid)?;
    let storage = p.get("storage").map(str::to_owned);
    let (config, copies) = check(&inst, &call, &node, vmid, storage.as_deref())?;
    // `target`: only for VMs whose disks all live on shared storage.
    let target = p.get("target").filter(|t| *t != node).map(str::to_owned);
    if let Some(t) = &target {
        let cluster = inst.cluster();
        if !cluster.has_node(t) {
            return Err(ApiError::internal(format!("no such cluster node '{t}'")));
        }
        let local = copies.iter().any(|c| {
            let sid = storage
                .as_deref()
                .unwrap_or_else(|| c.source.split_once(':').map_or("", |(s, _)| s));
            cluster.storage(&node, sid).is_none_or(|s| !s.shared)
        });
        if local {
            return Err(ApiError::internal(format!(
                "can't clone VM to node '{t}' (VM uses local storage)"
            )));
        }
    }
    let pool = p.get("pool").map(str::to_owned);
    if inst.cluster().vms.contains_key(&newid) {
        return Err(ApiError::internal(format!(
            "unable to create VM {newid}: config file already exists"
        )));
    }
    let plan = Plan {
        vmid,
        newid,
        storage,
        copies,
        config,
        name: p.get("name").map(str::to_owned),
        description: p.get("description").map(str::to_owned),
    };
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmclone",
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = ctx.flock(newid, Duration::from_secs(1)).await?;
            {
                let mut cluster = ctx.inst.cluster();
                if cluster.vms.contains_key(&newid) {
                    return Err(format!(
                        "unable to create VM {newid}: config file already exists"
                    ));
                }
                cluster
                    .vms
                    .insert(newid, Vm::locked(newid, &ctx.node, "clone"));
            }
            let mut created = Vec::new();
            let result = run(&ctx, plan, &mut created).await;
            settle_new_vm(&ctx, newid, result, created.clone())
                .map_err(|e| format!("clone failed: {e}"))?;
            let mut cluster = ctx.inst.cluster();
            if let Some(vm) = cluster.vms.get_mut(&newid) {
                vm.pool = pool;
                if let Some(t) = &target {
                    vm.node = t.clone();
                }
            }
            if let Some(t) = &target {
                // Shared storage: the same volumes, seen from the target node.
                for volid in &created {
                    let (sid, name) = volid.split_once(':').unwrap_or_default();
                    let vol = cluster
                        .storage_mut(&ctx.node, sid)
                        .and_then(|s| s.volumes.remove(name));
                    if let (Some(vol), Some(dest)) = (vol, cluster.storage_mut(t, sid)) {
                        dest.volumes.insert(name.to_owned(), vol);
                    }
                }
            }
            Ok(())
        },
    );
    Ok(Reply::data(upid))
}

/// `load_and_check` of qemu-server's clone: the source's lock, linked vs.
/// full, storage access, and which disks to copy.
fn check(
    inst: &Instance,
    call: &Call,
    node: &str,
    vmid: u32,
    storage: Option<&str>,
) -> Result<(BTreeMap<String, String>, Vec<DiskCopy>), ApiError> {
    let cluster = inst.cluster();
    if let Some(s) = storage {
        disks::check_images_storage(&cluster, node, s)?;
    }
    let source = cluster.vm(node, vmid)?;
    source.check_lock().map_err(ApiError::Internal)?;
    let full = call.params.flag("full").unwrap_or(!source.is_template());
    if storage.is_some() && !full {
        return Err(ApiError::internal(
            "parameter 'storage' not allowed for linked clones",
        ));
    }
    if call.params.has("format") && !full {
        return Err(ApiError::internal(
            "parameter 'format' not allowed for linked clones",
        ));
    }
    let mut copies = Vec::new();
    for (key, drive) in source.drives() {
        let file = drive.get("file").cloned().unwrap_or_default();
        let cdrom = drive.get("media").is_some_and(|m| m == "cdrom");
        let cloudinit = file.contains("-cloudinit");
        if key.starts_with("unused") || file == "none" || (cdrom && !cloudinit) {
            continue;
        }
        let (sid, volname) = file.split_once(':').unwrap_or_default();
        let target = storage.unwrap_or(sid);
        inst.auth.check(
            &call.identity,
            &format!("/storage/{target}"),
            &["Datastore.AllocateSpace"],
        )?;
        let copy = full || cloudinit || key == "tpmstate0";
        let file_name = volname.rsplit('/').next().unwrap_or(volname);
        if !copy && !file_name.starts_with("base-") {
            return Err(ApiError::internal(format!(
                "Linked clone feature is not supported for '{file}' ({key})"
            )));
        }
        copies.push(DiskCopy {
            key,
            source: file,
            opts: drive,
            full: copy,
        });
    }
    Ok((source.config.clone(), copies))
}

async fn run(
    ctx: &TaskCtx,
    plan: Plan,
    created: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, String> {
    let newid = plan.newid;
    ctx.log(format!(
        "creating a clone of VM {} with ID {newid}",
        plan.vmid
    ));
    let mut config: BTreeMap<String, String> = plan
        .config
        .into_iter()
        .filter(|(k, _)| {
            !k.starts_with("unused")
                && !["template", "lock", "parent", "vmstate"].contains(&k.as_str())
        })
        .collect();
    for copy in plan.copies {
        let (sid, _) = copy.source.split_once(':').unwrap_or_default();
        let target = plan.storage.clone().unwrap_or_else(|| sid.to_owned());
        let kind = if copy.full { "full" } else { "linked" };
        ctx.log(format!(
            "create {kind} clone of drive {} ({})",
            copy.key, copy.source
        ));
        let mut opts = copy.opts.clone();
        opts.remove("file");
        let size = opts.get("size").and_then(|s| parse_size(s)).unwrap_or(0);
        let volid = if copy.source.contains("-cloudinit") {
            disks::allocate_cloudinit(ctx, &target, newid, created)?
        } else {
            let volid = disks::allocate(ctx, &target, newid, None, size, created)?;
            if copy.full {
                disks::copy_with_progress(ctx, size, None)
                    .await
                    .map_err(|_| "copy failed".to_owned())?;
                let data = ctx
                    .inst
                    .cluster()
                    .volume(&ctx.node, &copy.source)
                    .map_or(size, |(_, v)| v.size);
                disks::wrote(ctx, &volid, data)?;
                opts.insert("size".into(), format_size(size));
                volid
            } else {
                ctx.sleep(ctx.inst.durations.linked_clone).await;
                mark_linked(ctx, &volid, &copy.source, created)
            }
        };
        config.insert(copy.key, print_drive(&volid, &opts));
    }
    ctx.checkpoint()?;
    let name = plan.name.unwrap_or_else(|| {
        format!(
            "Copy-of-VM-{}",
            config.get("name").cloned().unwrap_or(plan.vmid.to_string())
        )
    });
    config.insert("name".into(), name);
    if let Some(d) = plan.description {
        config.insert("description".into(), d);
    }
    let nets: Vec<(String, String)> = config
        .iter()
        .filter(|(k, _)| k.starts_with("net"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in nets {
        // "always change MAC! address"
        let without_mac = propstr::NET.parse(&key, &value).map(|mut n| {
            n.remove("macaddr");
            n.remove("model")
                .into_iter()
                .chain(n.iter().map(|(k, v)| format!("{k}={v}")))
                .collect::<Vec<_>>()
                .join(",")
        });
        config.insert(
            key.clone(),
            complete_net(&ctx.inst, &key, &without_mac.unwrap_or(value)),
        );
    }
    let smbios: Vec<String> = config
        .get("smbios1")
        .map(|s| {
            s.split(',')
                .filter(|p| !p.starts_with("uuid="))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut smbios = smbios;
    smbios.push(format!("uuid={}", ctx.inst.random_uuid()));
    smbios.sort();
    config.insert("smbios1".into(), smbios.join(","));
    if config.contains_key("vmgenid") {
        config.insert("vmgenid".into(), ctx.inst.random_uuid());
    }
    Ok(config)
}

/// Records that `volid` is a linked clone of the base volume `source`
/// (destroying the base then fails where PVE counts the clone, migrating
/// the clone too) and returns the clone's volume ID: on a directory
/// storage PVE names the base first (`100/base-100-disk-0.qcow2/101/
/// vm-101-disk-0.qcow2`, Plugin.pm's `clone_image`), on LVM-thin the
/// clone is a thin snapshot under its own name.
fn mark_linked(ctx: &TaskCtx, volid: &str, source: &str, created: &mut [String]) -> String {
    let base = source.split_once(':').map(|(_, n)| n.to_owned());
    let mut cluster = ctx.inst.cluster();
    let Some((sid, name)) = volid.split_once(':') else {
        return volid.to_owned();
    };
    let Some(storage) = cluster.storage_mut(&ctx.node, sid) else {
        return volid.to_owned();
    };
    let Some(mut vol) = storage.volumes.remove(name) else {
        return volid.to_owned();
    };
    vol.base = base.clone();
    if let (Some(base), true) = (&base, storage.is_file_based()) {
        vol.volname = format!("{base}/{name}");
    }
    let renamed = storage.volid(&vol.volname);
    storage.volumes.insert(vol.volname.clone(), vol);
    for c in created.iter_mut().filter(|c| c.as_str() == volid) {
        c.clone_from(&renamed);
    }
    renamed
}
