//! `POST /nodes/{node}/vzdump` (pve-manager `PVE::API2::VZDump`,
//! `PVE::VZDump`): a backup of one guest on this node, as a `vzdump` task
//! (its ID the VMID when one guest is backed up) that holds the guest's
//! `lock: backup` while it runs and leaves an archive in the storage's
//! `backup` content: `backup/vzdump-<qemu|lxc>-<vmid>-<YYYY_MM_DD-HH_MM_SS>.
//! <vma|tar>[.zst|.gz|.lzo]`, recording the guest's config and what each
//! disk held, so a restore recreates them.
//!
//! As PVE: `VM.Backup` on the guest and `Datastore.AllocateSpace` on the
//! storage (default `local`, as vzdump.conf's); a storage without `backup`
//! content is refused; a locked guest fails the task (`job errors`). The
//! simulator backs up one guest per call (`vmid` naming one guest) and
//! never prunes (`remove` is accepted and does nothing: it keeps all).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::qemu::disks::{copy_with_progress, render_bytes};
use crate::clock::Clock;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::{Named, Param};
use crate::state::storage::{ArchivedDisk, Backup};
use crate::state::{GuestKind, Vm, Volume};
use crate::tasks::{self, TaskCtx};

pub const PARAMS: &[Param] = &[
    // Optional in PVE's schema ("only run if executed on this node").
    Param::string("node").format(Named::PveNode).opt(),
    Param::string("vmid").opt(),
    Param::string("storage").format(Named::PveStorageId).opt(),
    Param::string("mode")
        .enums(&["snapshot", "suspend", "stop"])
        .opt(),
    Param::string("compress")
        .enums(&["0", "1", "gzip", "lzo", "zstd"])
        .opt(),
    Param::string("notes-template")
        .max_len(1024)
        .requires("storage")
        .opt(),
    Param::boolean("protected").requires("storage").opt(),
    Param::boolean("remove").opt(),
];

/// The archive's extension and `format` after the compressor.
fn format(kind: GuestKind, compress: &str) -> String {
    let base = match kind {
        GuestKind::Qemu => "vma",
        GuestKind::Lxc => "tar",
    };
    match compress {
        "1" | "lzo" => format!("{base}.lzo"),
        "gzip" => format!("{base}.gz"),
        "zstd" => format!("{base}.zst"),
        _ => base.to_owned(),
    }
}

/// How much of the data the compressor leaves.
fn ratio(compress: &str) -> f64 {
    match compress {
        "1" | "lzo" => 0.6,
        "gzip" => 0.5,
        "zstd" => 0.45,
        _ => 1.0,
    }
}

/// `YYYY_MM_DD-HH_MM_SS` (UTC) of the archive's name.
fn timestamp(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = super::download::civil_from_days(days as i64);
    format!(
        "{y:04}_{m:02}_{d:02}-{:02}_{:02}_{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The notes template with its escapes read (`\n` a new line, `\\` a
/// backslash, any other an error) and its variables filled in, as
/// `PVE::VZDump::generate_notes` does.
pub fn notes(template: &str, vm: &Vm, node: &str) -> Result<String, String> {
    let mut unescaped = String::with_capacity(template.len());
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            unescaped.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => unescaped.push('\n'),
            Some('\\') => unescaped.push('\\'),
            Some(other) => return Err(format!("unexpected escape character '{other}'")),
            None => return Err("unexpected escape character ''".into()),
        }
    }
    let guestname = match vm.kind {
        GuestKind::Qemu => vm.name(),
        GuestKind::Lxc => vm
            .config
            .get("hostname")
            .cloned()
            .unwrap_or_else(|| format!("CT{}", vm.vmid)),
    };
    Ok(unescaped
        .replace("{{cluster}}", crate::state::CLUSTER_NAME)
        .replace("{{guestname}}", &guestname)
        .replace("{{node}}", node)
        .replace("{{vmid}}", &vm.vmid.to_string()))
}

/// The disks a backup includes: a VM's drives but CD-ROMs, cloud-init
/// drives, unused volumes and those marked `backup=0`; a container's
/// `rootfs` and its mount points with `backup=1`. Key → volume ID.
pub fn backed_up_disks(vm: &Vm) -> BTreeMap<String, String> {
    let volid_of = |value: &str| {
        value
            .split(',')
            .next()
            .map(|v| v.trim_start_matches("volume=").trim_start_matches("file="))
            .filter(|v| v.contains(':') && !v.starts_with('/'))
            .map(str::to_owned)
    };
    match vm.kind {
        GuestKind::Qemu => vm
            .drives()
            .into_iter()
            .filter(|(k, d)| {
                !k.starts_with("unused")
                    && d.get("media").is_none_or(|m| m != "cdrom")
                    && d.get("backup").is_none_or(|b| b != "0")
                    && d.get("file").is_some_and(|f| !f.contains("cloudinit"))
            })
            .filter_map(|(k, d)| volid_of(d.get("file")?).map(|v| (k, v)))
            .collect(),
        GuestKind::Lxc => vm
            .config
            .iter()
            .filter(|(k, v)| *k == "rootfs" || (k.starts_with("mp") && v.contains("backup=1")))
            .filter_map(|(k, v)| volid_of(v).map(|volid| (k.clone(), volid)))
            .collect(),
    }
}

/// One guest's backup.
pub(crate) struct Job {
    pub vmid: u32,
    pub kind: GuestKind,
    pub storage: String,
    pub mode: String,
    pub compress: String,
    pub notes_template: Option<String>,
    pub protected: bool,
}

pub async fn vzdump(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node().to_owned();
    let vmids: Vec<&str> = crate::schema::format::split_list(p.get("vmid").unwrap_or_default())
        .filter(|v| !v.is_empty())
        .collect();
    let vmid = match vmids.as_slice() {
        [one] => one.parse::<u32>().map_err(|_| {
            ApiError::param(
                "vmid",
                format!("value '{one}' does not look like a valid VM ID"),
            )
        })?,
        [] => return Err(ApiError::internal("please specify at least one VM")),
        _ => {
            return Err(ApiError::param(
                "vmid",
                "the simulator backs up one guest per call",
            ));
        }
    };
    let storage = p.get("storage").unwrap_or("local").to_owned();
    inst.auth.check(
        &call.identity,
        &format!("/storage/{storage}"),
        &["Datastore.AllocateSpace"],
    )?;
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Backup"])?;
    let kind = {
        let cluster = inst.cluster();
        let s = cluster
            .storage(&node, &storage)
            .ok_or_else(|| ApiError::internal(format!("storage '{storage}' does not exist")))?;
        if !s.supports("backup") {
            return Err(ApiError::internal(format!(
                "storage '{storage}' does not support vzdump backups"
            )));
        }
        match cluster.vms.get(&vmid) {
            Some(vm) if vm.node == node => vm.kind,
            _ => {
                return Err(ApiError::internal(format!(
                    "Unable to find VM/CT {vmid} on node '{node}'"
                )));
            }
        }
    };
    let job = Job {
        vmid,
        kind,
        storage,
        mode: p.get("mode").unwrap_or("snapshot").to_owned(),
        compress: p.get("compress").unwrap_or("0").to_owned(),
        notes_template: p.get("notes-template").map(str::to_owned),
        protected: p.flag("protected") == Some(true),
    };
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "vzdump",
        &vmid.to_string(),
        move |ctx| async move {
            let vmid = job.vmid;
            let result = backup(&ctx, job).await;
            if let Err(e) = &result {
                ctx.log(format!("ERROR: Backup of VM {vmid} failed - {e}"));
                ctx.log("INFO: Failed at ".to_owned() + &crate::api::download::wget_time());
                return Err("job errors".into());
            }
            ctx.log("INFO: Backup job finished successfully");
            Ok(())
        },
    );
    Ok(Reply::data(upid))
}

/// What the task recorded of the guest under its lock.
struct Taken {
    config: BTreeMap<String, String>,
    disks: BTreeMap<String, ArchivedDisk>,
    notes: String,
}

/// Backs up one guest inside a `vzdump` task.
pub(crate) async fn backup(ctx: &TaskCtx, job: Job) -> Result<(), String> {
    let (vmid, kind) = (job.vmid, job.kind);
    ctx.log(format!(
        "INFO: Starting Backup of VM {vmid} ({})",
        kind.type_name()
    ));
    ctx.log(format!(
        "INFO: Backup started at {}",
        crate::api::download::wget_time()
    ));
    let taken = lock_and_take(ctx, &job)?;
    let result = write_archive(ctx, &job, taken).await;
    // The lock goes whatever became of the archive.
    if let Ok(vm) = ctx.inst.cluster().guest_mut(&ctx.node, vmid, kind)
        && vm.lock() == Some("backup")
    {
        vm.config.remove("lock");
    }
    result
}

/// Takes `lock: backup` and records the config and disks.
fn lock_and_take(ctx: &TaskCtx, job: &Job) -> Result<Taken, String> {
    let mut cluster = ctx.inst.cluster();
    let vm = cluster.guest(&ctx.node, job.vmid, job.kind)?.clone();
    vm.check_lock()?;
    let config = vm.config.clone();
    let notes = job
        .notes_template
        .as_deref()
        .map(|t| notes(t, &vm, &ctx.node))
        .transpose()?
        .unwrap_or_default();
    let mut disks = BTreeMap::new();
    for (key, volid) in backed_up_disks(&vm) {
        let (storage, vol) = cluster
            .volume(&ctx.node, &volid)
            .ok_or_else(|| format!("volume '{volid}' does not exist"))?;
        disks.insert(
            key,
            ArchivedDisk {
                contents: vol.holds(&volid),
                size: vol.virtual_size,
                data: if storage.is_thin() {
                    vol.size
                } else {
                    vol.virtual_size.min(vol.size)
                },
                storage: storage.id.clone(),
            },
        );
    }
    // Taken only once everything was read: a failure above leaves no lock.
    cluster
        .guest_mut(&ctx.node, job.vmid, job.kind)?
        .config
        .insert("lock".into(), "backup".into());
    Ok(Taken {
        config,
        disks,
        notes,
    })
}

async fn write_archive(ctx: &TaskCtx, job: &Job, taken: Taken) -> Result<(), String> {
    let now = Clock::epoch_secs();
    let format = format(job.kind, &job.compress);
    let volname = format!(
        "backup/vzdump-{}-{}-{}.{format}",
        job.kind.type_name(),
        job.vmid,
        timestamp(now)
    );
    let path = {
        let cluster = ctx.inst.cluster();
        let s = cluster
            .storage(&ctx.node, &job.storage)
            .ok_or_else(|| format!("storage '{}' does not exist", job.storage))?;
        if s.volumes.contains_key(&volname) {
            return Err(format!(
                "archive file '{}' already exists",
                s.path(&volname)
            ));
        }
        s.path(&volname)
    };
    ctx.log(format!("INFO: backup mode: {}", job.mode));
    ctx.log(format!("INFO: creating vzdump archive '{path}'"));
    let data: u64 = taken.disks.values().map(|d| d.data).sum();
    copy_with_progress(ctx, data.max(1 << 20), None)
        .await
        .map_err(|at| format!("backup write failed at byte {at}"))?;
    ctx.checkpoint()?;
    let size = (data as f64 * ratio(&job.compress)) as u64 + (64 << 10);
    ctx.log(format!("INFO: archive file size: {}", render_bytes(size)));
    let mut cluster = ctx.inst.cluster();
    let s = cluster
        .storage_mut(&ctx.node, &job.storage)
        .ok_or_else(|| format!("storage '{}' does not exist", job.storage))?;
    if s.used() + size > s.total {
        return Err(format!(
            "vma_queue_write: write error - No space left on device ({path})"
        ));
    }
    if !taken.notes.is_empty() {
        ctx.log("INFO: adding notes to backup");
    }
    if job.protected {
        ctx.log("INFO: marking backup as protected");
    }
    s.volumes.insert(
        volname.clone(),
        Volume {
            volname,
            content: "backup",
            format,
            size,
            virtual_size: size,
            vmid: Some(job.vmid),
            ctime: now,
            corrupt: false,
            checksums: BTreeMap::new(),
            base: None,
            contents: None,
            backup: Some(Box::new(Backup {
                subtype: job.kind,
                config: taken.config,
                disks: taken.disks,
                notes: taken.notes,
                protected: job.protected,
            })),
        },
    );
    ctx.log(format!("INFO: Finished Backup of VM {}", job.vmid));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_names_follow_vzdump() {
        assert_eq!(timestamp(0), "1970_01_01-00_00_00");
        assert_eq!(timestamp(1_700_000_000), "2023_11_14-22_13_20");
        assert_eq!(format(GuestKind::Qemu, "zstd"), "vma.zst");
        assert_eq!(format(GuestKind::Lxc, "gzip"), "tar.gz");
        assert_eq!(format(GuestKind::Qemu, "1"), "vma.lzo");
        assert_eq!(format(GuestKind::Qemu, "0"), "vma");
    }

    #[test]
    fn notes_fill_the_template() {
        let mut vm = Vm::new(101, "pve1", BTreeMap::from([("name".into(), "web".into())]));
        let filled = |t: &str, vm: &Vm| notes(t, vm, "pve1");
        assert_eq!(
            filled("{{guestname}} ({{vmid}}) on {{node}}", &vm).as_deref(),
            Ok("web (101) on pve1")
        );
        assert_eq!(
            filled(r"first\nsecond \\o/", &vm).as_deref(),
            Ok("first\nsecond \\o/")
        );
        assert_eq!(
            filled(r"C:\temp", &vm),
            Err("unexpected escape character 't'".to_owned())
        );
        vm.kind = GuestKind::Lxc;
        assert_eq!(filled("{{guestname}}", &vm).as_deref(), Ok("CT101"));
    }

    #[test]
    fn a_backup_skips_cdroms_cloud_init_and_excluded_disks() {
        let vm = Vm::new(
            100,
            "pve1",
            BTreeMap::from([
                ("scsi0".into(), "local-lvm:vm-100-disk-0,size=4G".into()),
                (
                    "scsi1".into(),
                    "local-lvm:vm-100-disk-1,backup=0,size=4G".into(),
                ),
                (
                    "ide2".into(),
                    "local-lvm:vm-100-cloudinit,media=cdrom".into(),
                ),
                ("ide0".into(), "local:iso/x.iso,media=cdrom".into()),
            ]),
        );
        let disks = backed_up_disks(&vm);
        assert_eq!(
            disks,
            BTreeMap::from([("scsi0".into(), "local-lvm:vm-100-disk-0".into())])
        );
    }
}
