//! `POST .../clone`: a template clones linked by default, anything else (or
//! `full=1`) is copied. The target holds `lock: clone` while the task runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::disks::{self, print_drive};
use super::{NODE_VMID, POOL, complete_net, creation_defaults};
use crate::sim::http::{ApiError, Call, Reply};
use crate::sim::instance::Instance;
use crate::sim::schema::format::{format_size, parse_size};
use crate::sim::schema::{Named, Param, propstr};
use crate::sim::state::Vm;
use crate::sim::tasks::{self, TaskCtx};

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
];
pub const PARAMS: &[&[Param]] = &[NODE_VMID, CLONE];

/// One disk to copy.
#[derive(Clone, Debug)]
struct DiskCopy {
    key: String,
    source: String,
    opts: BTreeMap<String, String>,
    cloudinit: bool,
}

pub async fn clone(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node().to_owned();
    let vmid = p.vmid("vmid");
    let newid = p.vmid("newid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Clone"])?;
    match p.get("pool") {
        Some(pool) => {
            inst.auth
                .check(&call.identity, &format!("/pool/{pool}"), &["VM.Allocate"])?
        }
        None => inst
            .auth
            .check(&call.identity, &format!("/vms/{newid}"), &["VM.Allocate"])?,
    }
    let storage = p.get("storage").map(str::to_owned);
    let (source_config, full, copies) = {
        let cluster = inst.cluster();
        let source = cluster.vm(&node, vmid)?;
        if let Some(lock) = source.lock() {
            return Err(ApiError::internal(format!("VM is locked ({lock})")));
        }
        let full = p.flag("full").unwrap_or(!source.is_template());
        if !full && storage.is_some() {
            return Err(ApiError::internal(
                "parameter 'storage' not allowed for linked clones",
            ));
        }
        if !full && p.has("format") {
            return Err(ApiError::internal(
                "parameter 'format' not allowed for linked clones",
            ));
        }
        let mut copies = Vec::new();
        for (key, drive) in source.drives() {
            let Some(file) = drive.get("file").filter(|f| f.contains(':')) else {
                continue;
            };
            if key.starts_with("unused") {
                continue;
            }
            let cloudinit = file.contains("-cloudinit");
            if drive.get("media").is_some_and(|m| m == "cdrom") && !cloudinit {
                continue;
            }
            if !full && !cloudinit && !source.is_template() {
                return Err(ApiError::internal(format!(
                    "Linked clone feature is not supported for drive '{key}'"
                )));
            }
            copies.push(DiskCopy {
                key,
                source: file.clone(),
                opts: drive,
                cloudinit,
            });
        }
        let targets: Vec<String> = match &storage {
            Some(s) => vec![s.clone()],
            None => copies
                .iter()
                .filter_map(|c| c.source.split_once(':').map(|(s, _)| s.to_owned()))
                .collect(),
        };
        for s in targets {
            inst.auth.check(
                &call.identity,
                &format!("/storage/{s}"),
                &["Datastore.AllocateSpace"],
            )?;
            if cluster.storage(&node, &s).is_none() {
                return Err(ApiError::internal(format!("storage '{s}' does not exist")));
            }
        }
        (source.config.clone(), full, copies)
    };
    {
        let mut cluster = inst.cluster();
        if cluster.vms.contains_key(&newid) {
            return Err(ApiError::internal(format!(
                "unable to create VM {newid}: config file already exists"
            )));
        }
        cluster.vms.insert(newid, Vm::locked(newid, &node, "clone"));
    }
    let name = p.get("name").map(str::to_owned);
    let description = p.get("description").map(str::to_owned);
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmclone",
        &vmid.to_string(),
        move |ctx| async move {
            let mut created = Vec::new();
            let plan = ClonePlan {
                newid,
                full,
                storage,
                copies,
                source_config,
                name,
                description,
            };
            let result = run(&ctx, plan, &mut created).await;
            let mut cluster = ctx.inst.cluster();
            match result {
                Ok(config) => {
                    if let Some(vm) = cluster.vms.get_mut(&newid) {
                        vm.config = config;
                    }
                    Ok(())
                }
                Err(e) => {
                    cluster.vms.remove(&newid);
                    for volid in created {
                        cluster.free_volume(&ctx.node, &volid);
                    }
                    Err(e)
                }
            }
        },
    );
    Ok(Reply::data(upid))
}

struct ClonePlan {
    newid: u32,
    full: bool,
    storage: Option<String>,
    copies: Vec<DiskCopy>,
    source_config: BTreeMap<String, String>,
    name: Option<String>,
    description: Option<String>,
}

async fn run(
    ctx: &TaskCtx,
    plan: ClonePlan,
    created: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, String> {
    let newid = plan.newid;
    let _flock = ctx.flock(newid, std::time::Duration::from_secs(1)).await?;
    let mut config = plan.source_config.clone();
    for key in ["template", "lock", "meta", "vmgenid"] {
        config.remove(key);
    }
    config.retain(|k, _| !k.starts_with("unused"));
    for copy in plan.copies {
        let target = plan.storage.clone().unwrap_or_else(|| {
            copy.source
                .split_once(':')
                .map(|(s, _)| s.to_owned())
                .unwrap_or_default()
        });
        let mut opts = copy.opts.clone();
        opts.remove("file");
        let size = opts.get("size").and_then(|s| parse_size(s)).unwrap_or(0);
        let value = if copy.cloudinit {
            let volid = disks::allocate(
                ctx,
                &target,
                newid,
                Some(format!("vm-{newid}-cloudinit")),
                4 << 20,
                created,
            )?;
            print_drive(&volid, &opts)
        } else if plan.full {
            ctx.log(format!(
                "create full clone of drive {} ({})",
                copy.key, copy.source
            ));
            let volid = disks::allocate(ctx, &target, newid, None, size, created)?;
            disks::copy_with_progress(ctx, size, None)
                .await
                .map_err(|_| "copy failed".to_owned())?;
            opts.insert("size".into(), format_size(size));
            print_drive(&volid, &opts)
        } else {
            ctx.log(format!(
                "create linked clone of drive {} ({})",
                copy.key, copy.source
            ));
            let volid = disks::allocate(ctx, &target, newid, None, size, created)?;
            ctx.sleep(ctx.inst.durations.linked_clone).await;
            print_drive(&volid, &opts)
        };
        config.insert(copy.key, value);
    }
    ctx.checkpoint()?;
    let old_name = config
        .get("name")
        .cloned()
        .unwrap_or_else(|| format!("VM{}", newid));
    config.insert(
        "name".into(),
        plan.name
            .unwrap_or_else(|| format!("Copy-of-VM-{old_name}")),
    );
    if let Some(d) = plan.description {
        config.insert("description".into(), d);
    }
    let nets: Vec<(String, String)> = config
        .iter()
        .filter(|(k, _)| k.starts_with("net"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in nets {
        // A clone gets new MAC addresses.
        let without_mac = propstr::NET.parse(&key, &value).map(|mut n| {
            n.remove("macaddr");
            let model = n.remove("model").unwrap_or_else(|| "virtio".into());
            std::iter::once(model)
                .chain(n.iter().map(|(k, v)| format!("{k}={v}")))
                .collect::<Vec<_>>()
                .join(",")
        });
        config.insert(
            key.clone(),
            complete_net(&ctx.inst, &key, &without_mac.unwrap_or(value)),
        );
    }
    if let Some(smbios) = config.get("smbios1").cloned() {
        let rest: Vec<&str> = smbios
            .split(',')
            .filter(|p| !p.starts_with("uuid="))
            .collect();
        if rest.is_empty() {
            config.remove("smbios1");
        } else {
            config.insert("smbios1".into(), rest.join(","));
        }
    }
    creation_defaults(&ctx.inst, &mut config);
    Ok(config)
}
