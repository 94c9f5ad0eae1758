//! `/nodes/{node}/storage`: list, status and content of storages.

use std::sync::Arc;

use serde_json::Value;

use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::format::split_list;
use crate::schema::qemu::NODE;
use crate::schema::{Named, Param};
use crate::state::Storage;

pub const STORAGE: Param = Param::string("storage").format(Named::PveStorageId);
pub const LIST: &[Param] = &[
    NODE,
    Param::string("content")
        .format(Named::PveStorageContentList)
        .opt(),
    Param::boolean("enabled").opt(),
    Param::boolean("format").opt(),
    Param::string("storage").format(Named::PveStorageId).opt(),
    Param::string("target").format(Named::PveNode).opt(),
];
pub const ONE: &[Param] = &[NODE, STORAGE];
pub const CONTENT: &[Param] = &[
    NODE,
    STORAGE,
    Param::string("content")
        .format(Named::PveStorageContent)
        .opt(),
    Param::integer("vmid")
        .format(Named::PveVmid)
        .min(100)
        .max(999_999_999)
        .opt(),
];

fn may_see(inst: &Instance, call: &Call, storage: &str) -> bool {
    let path = format!("/storage/{storage}");
    inst.auth.has(&call.identity, &path, "Datastore.Audit")
        || inst
            .auth
            .has(&call.identity, &path, "Datastore.AllocateSpace")
}

pub async fn list(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let content: Vec<&str> = p
        .get("content")
        .map(|c| split_list(c).collect())
        .unwrap_or_default();
    let cluster = inst.cluster();
    let items: Vec<Value> = cluster
        .storages
        .get(p.node())
        .into_iter()
        .flatten()
        .filter(|s| may_see(&inst, &call, &s.id))
        .filter(|s| p.get("storage").is_none_or(|id| id == s.id))
        .filter(|s| content.is_empty() || content.iter().any(|c| s.supports(c)))
        .map(|s| s.status_json())
        .collect();
    Ok(Reply::data(items))
}

/// Runs `f` on the storage a call names, after PVE's audit check.
fn with_storage<R>(
    inst: &Instance,
    call: &Call,
    f: impl FnOnce(&Storage) -> R,
) -> Result<R, ApiError> {
    let id = call.params.get("storage").unwrap_or_default();
    let privs = ["Datastore.Audit", "Datastore.AllocateSpace"];
    inst.auth
        .check(&call.identity, &format!("/storage/{id}"), &privs)?;
    let cluster = inst.cluster();
    let storage = cluster.storage(call.params.node(), id);
    storage
        .map(f)
        .ok_or_else(|| ApiError::internal(format!("storage '{id}' does not exist")))
}

pub async fn status(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    with_storage(&inst, &call, |s| Reply::data(s.status_json()))
}

pub async fn content(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    with_storage(&inst, &call, |s| {
        let items: Vec<Value> = s
            .volumes
            .values()
            .filter(|v| p.get("content").is_none_or(|c| c == v.content))
            .filter(|v| {
                p.get("vmid")
                    .is_none_or(|id| v.vmid.map(|x| x.to_string()).as_deref() == Some(id))
            })
            .map(|v| s.content_json(v))
            .collect();
        Reply::data(items)
    })
}

// The schema marks `storage` optional here (the volume ID may name it).
pub const VOLUME: &[Param] = &[NODE, STORAGE.opt(), Param::string("volume")];
pub const VOLUME_DELETE: &[Param] = &[
    NODE,
    STORAGE.opt(),
    Param::string("volume"),
    Param::integer("delay").min(1).max(30).opt(),
];

/// `storage:volname` for a `{volume}` given with or without its storage.
fn full_volid(storage: &str, volume: &str) -> String {
    if volume.contains(':') {
        volume.to_owned()
    } else {
        format!("{storage}:{volume}")
    }
}

/// `GET .../content/{volume}`: path, size, used, format.
pub async fn volume_info(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let sid = call.params.get("storage").unwrap_or_default();
    let volid = full_volid(sid, call.params.get("volume").unwrap_or_default());
    with_storage(&inst, &call, |_| ())?;
    let cluster = inst.cluster();
    let (s, v) = cluster.volume(call.params.node(), &volid).ok_or_else(|| {
        ApiError::internal(format!("volume_size_info on '{volid}' failed - no format"))
    })?;
    Ok(Reply::data(serde_json::json!({
        "path": s.path(&v.volname),
        "size": if v.content == "images" { v.virtual_size } else { v.size },
        "used": v.size,
        "format": v.format,
    })))
}

pub const VOLUME_UPDATE: &[Param] = &[
    NODE,
    STORAGE.opt(),
    Param::string("volume"),
    Param::string("notes").opt(),
    Param::boolean("protected").opt(),
];

/// `PUT .../content/{volume}`: a backup's notes and protection (PVE keeps
/// them beside the archive; other volumes have neither).
pub async fn volume_update(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let node = call.params.node().to_owned();
    let sid = call.params.get("storage").unwrap_or_default().to_owned();
    let volid = full_volid(&sid, call.params.get("volume").unwrap_or_default());
    check_volume_access(&inst, &call, &node, &volid)?;
    let mut cluster = inst.cluster();
    let (storage, name) = storage_and_name(&volid);
    let vol = cluster
        .storage_mut(&node, storage)
        .and_then(|s| s.volumes.get_mut(name))
        .ok_or_else(|| ApiError::internal(format!("volume '{volid}' does not exist")))?;
    let Some(backup) = vol.backup.as_mut() else {
        return Err(ApiError::internal(format!(
            "notes and protection are only supported for backups, not '{volid}'"
        )));
    };
    if let Some(notes) = call.params.get("notes") {
        backup.notes = notes.to_owned();
    }
    if let Some(protected) = call.params.flag("protected") {
        backup.protected = protected;
    }
    Ok(Reply::data(serde_json::Value::Null))
}

fn storage_and_name(volid: &str) -> (&str, &str) {
    volid.split_once(':').unwrap_or(("", volid))
}

/// `check_volume_access` for a volume's owner: a backup needs
/// `Datastore.AllocateSpace` and `VM.Backup` on its guest, anything else
/// (or without `VM.Backup`) `Datastore.Allocate`.
fn check_volume_access(
    inst: &Instance,
    call: &Call,
    node: &str,
    volid: &str,
) -> Result<(), ApiError> {
    let (owner, is_backup) = match inst.cluster().volume(node, volid) {
        Some((_, v)) => (v.vmid, v.content == "backup"),
        None => {
            return Err(ApiError::internal(format!(
                "volume_size_info on '{volid}' failed - no format"
            )));
        }
    };
    let storage_path = format!("/storage/{}", storage_and_name(volid).0);
    match owner.filter(|_| is_backup) {
        Some(vmid) => {
            inst.auth
                .check(&call.identity, &storage_path, &["Datastore.AllocateSpace"])?;
            inst.auth
                .check(&call.identity, &format!("/vms/{vmid}"), &["VM.Backup"])
        }
        None => inst
            .auth
            .check(&call.identity, &storage_path, &["Datastore.Allocate"]),
    }
}

/// `DELETE .../content/{volume}`: an `imgdel` task removes the volume.
pub async fn volume_delete(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let node = call.params.node().to_owned();
    let sid = call.params.get("storage").unwrap_or_default().to_owned();
    let volid = full_volid(&sid, call.params.get("volume").unwrap_or_default());
    check_volume_access(&inst, &call, &node, &volid)?;
    let owner = inst
        .cluster()
        .volume(&node, &volid)
        .and_then(|(_, v)| v.vmid);
    // pve-storage names the task after the owner and storage, not the volume.
    let id = match owner {
        Some(vmid) => format!("{vmid}@{sid}"),
        None => sid,
    };
    Ok(Reply::data(crate::tasks::spawn(
        &inst,
        &call,
        &node,
        "imgdel",
        &id,
        move |ctx| async move {
            ctx.checkpoint()?;
            // pve-storage's `free_image`: a protected volume stays.
            if let Some((s, v)) = ctx.inst.cluster().volume(&ctx.node, &volid)
                && v.backup.as_ref().is_some_and(|b| b.protected)
            {
                return Err(format!(
                    "cannot remove protected volume '{}' on '{}'",
                    v.volname, s.id
                ));
            }
            if !ctx.inst.cluster().free_volume(&ctx.node, &volid) {
                return Err(format!("volume '{volid}' does not exist"));
            }
            ctx.log(format!("Removed volume '{volid}'"));
            Ok(())
        },
    )))
}
