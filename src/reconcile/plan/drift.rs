//! Drift: what must change on an existing VM for it to match the spec.
//!
//! Only declared fields count. Values waiting in Proxmox's pending config
//! (changes that apply at the next reboot) count as applied, so a running VM
//! is not reconfigured on every pass; they are reported instead.

use super::context::Ctx;
use super::input::{PasswordState, VmConfig};
use super::output::{ConfigChanges, Param};
use super::render::{self, ceil_gib, ceil_mib, disk_bytes, drive_size};
use crate::api::quantity::human_bytes;

/// The difference between the spec and a VM's config.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Diff {
    /// Keys to set (one config update).
    pub changes: ConfigChanges,
    /// Keys whose wanted value waits for a reboot.
    pub pending: Vec<String>,
    /// Disks to grow: slot and new size in bytes.
    pub resizes: Vec<(String, u64)>,
    /// What the spec asks and the provider will not do, for people.
    pub problems: Vec<String>,
    /// The password Secret version the changes apply, if they set it.
    pub password_version: Option<String>,
}

/// The config value a key will have once pending changes apply.
fn effective<'c>(config: &'c VmConfig, key: &str) -> Option<&'c str> {
    match config.pending.get(key) {
        Some(pending) => pending.as_deref(),
        None => config.current.get(key).map(String::as_str),
    }
}

fn is_drive_key(key: &str) -> bool {
    ["ide", "sata", "scsi", "virtio"].iter().any(|bus| {
        key.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Computes the drift of `config` from the spec.
pub(super) fn diff(ctx: &Ctx, config: &VmConfig) -> Result<Diff, String> {
    let mut d = Diff {
        changes: ConfigChanges {
            digest: config.current.get("digest").cloned(),
            ..ConfigChanges::default()
        },
        ..Diff::default()
    };
    for want in render::managed(ctx)? {
        let eff = effective(config, &want.key);
        if want.matches(eff) {
            let current = config.current.get(&want.key).map(String::as_str);
            if !want.matches(current) {
                d.pending.push(want.key.clone());
            }
            continue;
        }
        let value = want.value_given(eff);
        d.changes.set.insert(want.key, Param::Plain(value));
    }
    cloud_init_drive(ctx, config, &mut d);
    password(ctx, &mut d);
    disks(ctx, config, &mut d)?;
    Ok(d)
}

/// A cloud-init drive is added when the spec has cloud-init and the VM has
/// no drive (a cloned template may lack one).
fn cloud_init_drive(ctx: &Ctx, config: &VmConfig, d: &mut Diff) {
    let Some(ci) = &ctx.spec.cloud_init else {
        return;
    };
    let has_drive = config
        .current
        .iter()
        .any(|(k, v)| is_drive_key(k) && v.contains("cloudinit"));
    if has_drive {
        return;
    }
    match config.current.get(&ci.drive_slot) {
        Some(other) => d.problems.push(format!(
            "cloud-init drive slot {} already holds {other:?}; choose another cloudInit.driveSlot",
            ci.drive_slot
        )),
        None => {
            let value = Param::Plain(render::cloud_init_drive(ci));
            d.changes.set.insert(ci.drive_slot.clone(), value);
        }
    }
}

/// Proxmox never shows the password (`**********`), so the Secret's version
/// last applied is what tells whether to send it again.
fn password(ctx: &Ctx, d: &mut Diff) {
    match &ctx.obs.password {
        Some(PasswordState::Available { value, version })
            if ctx.status.at_provider.password_version.as_ref() != Some(version) =>
        {
            d.changes
                .set
                .insert("cipassword".into(), Param::Secret(value.clone()));
            d.password_version = Some(version.clone());
        }
        Some(PasswordState::Missing(why)) => {
            d.problems.push(format!("cloud-init password: {why}"));
        }
        _ => {}
    }
}

/// Disks: add declared disks the VM lacks, grow smaller ones, report what
/// cannot be done (shrinking, moving, importing an image after creation).
fn disks(ctx: &Ctx, config: &VmConfig, d: &mut Diff) -> Result<(), String> {
    for disk in &ctx.spec.disks {
        let Some(value) = effective(config, &disk.slot) else {
            if disk.image.is_some() {
                d.problems.push(format!(
                    "disk {} downloads an image, which is only done when the VM is created; the VM has no {}",
                    disk.slot, disk.slot
                ));
            } else {
                let value = Param::Plain(render::disk_create_value(disk)?);
                d.changes.set.insert(disk.slot.clone(), value);
            }
            continue;
        };
        if value.contains("media=cdrom") || value.contains("cloudinit") {
            d.problems.push(format!(
                "slot {} holds a CD-ROM or cloud-init drive, not a disk",
                disk.slot
            ));
            continue;
        }
        let storage = value.split(':').next().unwrap_or_default();
        if storage != disk.storage {
            d.problems.push(format!(
                "disk {} is on storage {storage}, the spec says {}; moving disks is not supported",
                disk.slot, disk.storage
            ));
        }
        let (Some(want), Some(have)) = (disk_bytes(disk)?, drive_size(value)) else {
            continue;
        };
        if have < ceil_mib(want) {
            d.resizes.push((disk.slot.clone(), ceil_mib(want)));
        } else if have > ceil_gib(want) {
            d.problems.push(format!(
                "disk {} is {} on Proxmox, the spec asks {}; disks only grow",
                disk.slot,
                human_bytes(have),
                human_bytes(want)
            ));
        }
    }
    Ok(())
}
