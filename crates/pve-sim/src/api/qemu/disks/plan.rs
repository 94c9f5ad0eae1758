//! The synchronous part: what PVE checks before it forks the worker.

use crate::auth::Identity;
use crate::http::ApiError;
use crate::instance::Instance;
use crate::schema::qemu;
use crate::state::Cluster;

use super::{DiskOp, volume_type};

/// Checks drive parameters before the task starts. `params` are (key, value)
/// of validated drive options.
pub fn plan(
    inst: &Instance,
    id: &Identity,
    node: &str,
    params: &[(String, String)],
) -> Result<Vec<DiskOp>, ApiError> {
    let mut ops = Vec::new();
    let mut cloudinit_key: Option<String> = None;
    for (key, value) in params {
        let Some(format) = qemu::drive_format(key) else {
            continue;
        };
        let opts = format
            .parse(key, value)
            .map_err(|e| ApiError::param(key.clone(), format!("invalid format - {e}")))?;
        let file = opts.get("file").cloned().unwrap_or_default();
        let mut rest = opts.clone();
        rest.remove("file");
        let new_disk = file
            .split_once(':')
            .filter(|(s, n)| !s.is_empty() && !s.contains('/') && is_size(n));
        if let Some(source) = opts.get("import-from") {
            let Some((storage, "0")) = new_disk else {
                return Err(ApiError::param(
                    key.clone(),
                    "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>",
                ));
            };
            check_target(inst, id, node, storage)?;
            check_import_source(inst, id, node, key, source)?;
            let required: &[&str] = match key.as_str() {
                "efidisk0" => &["efitype", "pre-enrolled-keys"],
                "tpmstate0" => &["version"],
                _ => &[],
            };
            if let Some(missing) = required.iter().find(|r| !opts.contains_key(**r)) {
                return Err(ApiError::param(
                    key.clone(),
                    format!("need to specify '{missing}' when using 'import-from'"),
                ));
            }
            rest.remove("import-from");
            ops.push(DiskOp::Import {
                key: key.clone(),
                storage: storage.to_owned(),
                source: source.clone(),
                opts: rest,
            });
        } else if let Some((storage, size)) = new_disk {
            check_target(inst, id, node, storage)?;
            let gib: f64 = size.parse().unwrap_or_default();
            // EFI vars and TPM state have fixed sizes; the given one is ignored.
            let bytes = match key.as_str() {
                "efidisk0" if rest.get("efitype").is_some_and(|t| t == "4m") => 540_672,
                "efidisk0" => 131_072,
                "tpmstate0" => 4 << 20,
                _ => (gib * (1u64 << 30) as f64) as u64,
            };
            ops.push(DiskOp::Alloc {
                key: key.clone(),
                storage: storage.to_owned(),
                bytes,
                opts: rest,
            });
        } else if let Some((storage, "cloudinit")) = file.split_once(':') {
            check_target(inst, id, node, storage)?;
            if let Some(prev) = &cloudinit_key {
                return Err(ApiError::internal(format!(
                    "{key} - cloud-init drive is already attached at '{prev}'"
                )));
            }
            cloudinit_key = Some(key.clone());
            ops.push(DiskOp::CloudInit {
                key: key.clone(),
                storage: storage.to_owned(),
                opts: rest,
            });
        } else {
            if let Some((storage, volname)) =
                file.split_once(':').filter(|(s, _)| !s.starts_with('/'))
            {
                if inst.cluster().storage(node, storage).is_none() {
                    return Err(ApiError::internal(format!(
                        "storage '{storage}' does not exist"
                    )));
                }
                let vtype = volume_type(volname);
                if vtype != "images" && vtype != "iso" {
                    return Err(ApiError::param(
                        key.clone(),
                        "content type needs to be 'images' or 'iso'",
                    ));
                }
                if vtype == "iso" && opts.get("media").is_none_or(|m| m != "cdrom") {
                    return Err(ApiError::param(
                        key.clone(),
                        "explicit 'media=cdrom' is required for iso images",
                    ));
                }
            }
            ops.push(DiskOp::Keep {
                key: key.clone(),
                value: value.clone(),
            });
        }
    }
    Ok(ops)
}

fn is_size(s: &str) -> bool {
    crate::schema::regex_matches(r"\d+(\.\d+)?", s)
}

fn check_target(inst: &Instance, id: &Identity, node: &str, storage: &str) -> Result<(), ApiError> {
    inst.auth.check(
        id,
        &format!("/storage/{storage}"),
        &["Datastore.AllocateSpace"],
    )?;
    check_images_storage(&inst.cluster(), node, storage)
}

/// The storage exists on the node and holds VM images.
pub fn check_images_storage(cluster: &Cluster, node: &str, storage: &str) -> Result<(), ApiError> {
    let s = cluster
        .storage(node, storage)
        .ok_or_else(|| ApiError::internal(format!("storage '{storage}' does not exist")))?;
    if !s.supports("images") {
        return Err(ApiError::param(
            "storage",
            format!("storage '{storage}' does not support vm images"),
        ));
    }
    Ok(())
}

fn check_import_source(
    inst: &Instance,
    id: &Identity,
    node: &str,
    key: &str,
    source: &str,
) -> Result<(), ApiError> {
    if source.starts_with('/') {
        if !id.is_root() {
            return Err(ApiError::internal(
                "Only root can pass arbitrary filesystem paths. at /usr/share/perl5/PVE/Storage.pm line 565.",
            ));
        }
        return Ok(());
    }
    let (storage, volname) = source.split_once(':').unwrap_or_default();
    let vtype = volname.split_once('/').map_or("images", |(t, _)| t);
    let vtype = if volname.starts_with("vm-") || volname.starts_with("base-") {
        "images"
    } else {
        vtype
    };
    if vtype != "images" && vtype != "import" {
        return Err(ApiError::param(
            key,
            format!("{source} has wrong type '{vtype}' - needs to be 'images' or 'import'"),
        ));
    }
    if inst.cluster().storage(node, storage).is_none() {
        return Err(ApiError::internal(format!(
            "storage '{storage}' does not exist"
        )));
    }
    let path = format!("/storage/{storage}");
    if vtype == "import" {
        inst.auth.check(
            id,
            &path,
            &[
                "Datastore.Allocate",
                "Datastore.AllocateSpace",
                "Datastore.Audit",
            ],
        )?;
    } else if let Some(owner) = volname
        .split('-')
        .nth(1)
        .and_then(|v| v.parse::<u32>().ok())
    {
        inst.auth
            .check(id, &format!("/vms/{owner}"), &["VM.Clone"])?;
    }
    Ok(())
}
