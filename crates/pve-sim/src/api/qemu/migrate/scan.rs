//! The volume scan of a migration, after qemu-server's
//! `QemuMigrate::scan_local_volumes`: which volumes on non-shared storages
//! move with the VM (attached, unused, generated cloud-init drives, and
//! volumes only snapshots still reference), and the per-volume problems
//! that abort the migration with "can't migrate VM - check log".

use std::collections::BTreeMap;

use crate::state::vm::drives_of;
use crate::state::{Cluster, StorageKind, Vm};

/// A volume that moves to the target node.
pub struct LocalVolume {
    pub volid: String,
    pub size: u64,
}

/// How the VM references a volume (`foreach_volid`'s attributes).
#[derive(Default)]
struct Refs {
    attached: bool,
    unused: bool,
    in_snapshot: bool,
    cdrom: bool,
}

/// What the scan found, or the error the migration dies with. Its log
/// lines go to `log` in the order `QemuMigrate` prints them.
pub fn scan(
    cluster: &Cluster,
    vm: &Vm,
    running: bool,
    with_local_disks: bool,
    log: &mut Vec<String>,
) -> Result<Vec<LocalVolume>, String> {
    let mut refs: BTreeMap<String, Refs> = BTreeMap::new();
    let mut other_errors = Vec::new();
    let configs = std::iter::once((&vm.config, false))
        .chain(vm.snapshots.values().map(|s| (&s.config, true)));
    for (config, snapshot) in configs {
        for (key, drive) in drives_of(config) {
            let Some(file) = drive.get("file") else {
                continue;
            };
            let cdrom = drive.get("media").is_some_and(|m| m == "cdrom");
            match file.as_str() {
                "none" => continue,
                "cdrom" => {
                    other_errors.push("can't migrate local cdrom drive".to_owned());
                    continue;
                }
                _ => {}
            }
            let r = refs.entry(file.clone()).or_default();
            r.cdrom |= cdrom;
            if snapshot {
                r.in_snapshot = true;
            } else if key.starts_with("unused") {
                r.unused = true;
            } else {
                r.attached = true;
            }
        }
    }

    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    let mut found = Vec::new();
    for (volid, r) in &refs {
        if volid.starts_with('/') {
            errors.insert(volid.clone(), "local file/device".into());
            continue;
        }
        let Some((sid, name)) = volid.split_once(':') else {
            continue;
        };
        let Some(storage) = cluster.storage(&vm.node, sid) else {
            errors.insert(volid.clone(), format!("storage '{sid}' does not exist"));
            continue;
        };
        let Some(vol) = storage.volumes.get(name).filter(|_| !storage.shared) else {
            continue;
        };
        let generated = r.cdrom && name.contains("-cloudinit");
        found.push((volid.clone(), r, generated, vol.size, vol.base.clone()));
        let problem = if r.cdrom && !generated {
            Some("local cdrom image")
        } else if r.in_snapshot && !generated && running {
            Some("online storage migration not possible if non-replicated snapshot exists")
        } else if r.in_snapshot
            && !generated
            // Only in-qcow2 snapshots travel with an offline migration.
            && !(vol.format == "qcow2" && matches!(storage.kind, StorageKind::Dir { .. }))
        {
            Some("non-migratable snapshot exists")
        } else if storage.base_in_use(name) {
            Some("referenced by linked clone(s)")
        } else {
            None
        };
        if let Some(problem) = problem {
            errors.insert(volid.clone(), problem.into());
        }
    }

    for (volid, r, generated, _, _) in &found {
        let how = if *generated {
            log.push(format!(
                "found generated disk '{volid}' (in current VM config)"
            ));
            continue;
        } else if r.attached {
            if running && !with_local_disks {
                errors.insert(
                    volid.clone(),
                    "can't live migrate attached local disks without with-local-disks option"
                        .into(),
                );
            }
            "attached"
        } else if r.unused {
            "unused"
        } else {
            "referenced by snapshot(s)"
        };
        log.push(format!("found local disk '{volid}' ({how})"));
    }
    for (volid, err) in &errors {
        log.push(format!("can't migrate local disk '{volid}': {err}"));
    }
    log.extend(other_errors.iter().cloned());
    if !errors.is_empty() || !other_errors.is_empty() {
        return Err("can't migrate VM - check log".into());
    }
    // A linked clone's volume on local storage cannot leave its base.
    if let Some((volid, .., base)) = found.iter().find(|f| f.4.is_some()) {
        return Err(format!(
            "can't migrate '{volid}' as it's a clone of '{}'",
            base.as_deref().unwrap_or_default()
        ));
    }
    Ok(found
        .into_iter()
        .map(|(volid, .., size, _)| LocalVolume { volid, size })
        .collect())
}
