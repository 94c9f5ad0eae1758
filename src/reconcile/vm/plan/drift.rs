//! Drift: what must change on an existing VM for it to match the spec.
//!
//! Only declared fields count. Values waiting in Proxmox's pending config
//! (changes that apply at the next reboot) count as applied, so a running VM
//! is not reconfigured on every pass; they are reported instead.

use pve_client::Secret;
use pve_client::vm::{Drive, DriveKey};

use super::context::Ctx;
use super::input::{PasswordState, VmConfig};
use super::output::ConfigChanges;
use super::render::{self, ceil_gib, ceil_mib, disk_bytes};
use super::tenancy;
use crate::api::quantity::human_bytes;

/// The difference between the spec and a VM's config.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Diff {
    /// Keys to set (one config update; boxed, as it is carried in a step).
    pub changes: Box<ConfigChanges>,
    /// Keys whose wanted value waits for a reboot.
    pub pending: Vec<String>,
    /// Disks to grow: slot and new size in bytes.
    pub resizes: Vec<(String, u64)>,
    /// What the spec asks and the provider will not do, for people.
    pub problems: Vec<String>,
    /// Among them, a Secret, ConfigMap or key the spec names is missing.
    pub missing_data: bool,
    /// Among them, a disk to add imports a disk of a VM it may not copy
    /// ([`super::tenancy::import_refusal`]).
    pub not_copied: bool,
    /// The password Secret version the changes apply, if they set it.
    pub password_version: Option<String>,
    /// Disks to move: slot and the storage the spec names.
    pub moves: Vec<(String, String)>,
}

/// The config value a key will have once pending changes apply.
pub(super) fn effective<'c>(config: &'c VmConfig, key: &str) -> Option<&'c str> {
    match config.pending.get(key) {
        Some(pending) => pending.as_deref(),
        None => config.current.get(key).map(String::as_str),
    }
}

/// Computes the drift of `config` from the spec.
pub(super) fn diff(ctx: &Ctx, config: &VmConfig) -> Result<Diff, String> {
    let mut d = Diff {
        changes: Box::new(ConfigChanges {
            digest: config.current.get("digest").cloned(),
            ..ConfigChanges::default()
        }),
        ..Diff::default()
    };
    for want in render::managed(ctx)? {
        let key = want.key();
        let eff = effective(config, &key);
        if want.matches(eff) {
            let current = config.current.get(&key).map(String::as_str);
            if !want.matches(current) && !d.pending.contains(&key) {
                d.pending.push(key);
            }
            continue;
        }
        want.apply(eff, &mut d.changes.set);
    }
    super::hardware::volumes::drift(ctx.spec, config, &mut d);
    cloud_init_drive(ctx, config, &mut d)?;
    password(ctx, &mut d);
    if let Some(why) = super::seed::unreadable(ctx) {
        d.problems.push(why);
        d.missing_data = true;
    }
    disks(ctx, config, &mut d)?;
    Ok(d)
}

/// A cloud-init drive is added when the spec has cloud-init and the VM has
/// no drive (a cloned template may lack one).
fn cloud_init_drive(ctx: &Ctx, config: &VmConfig, d: &mut Diff) -> Result<(), String> {
    let Some(ci) = &ctx.spec.cloud_init else {
        return Ok(());
    };
    let has_drive = config.current.iter().any(|(k, v)| {
        k.parse::<DriveKey>().is_ok() && Drive::parse(v).is_ok_and(|d| d.is_cloudinit())
    });
    if has_drive {
        return Ok(());
    }
    match config.current.get(&ci.drive_slot) {
        Some(other) => d.problems.push(format!(
            "cloud-init drive slot {} already holds {other:?}; choose another cloudInit.driveSlot",
            ci.drive_slot
        )),
        None => {
            let slot = render::drive_key(&ci.drive_slot)?;
            d.changes
                .set
                .disks
                .insert(slot, render::cloud_init_drive(ci));
        }
    }
    Ok(())
}

/// Proxmox never shows the password (`**********`), so the Secret's version
/// last applied is what tells whether to send it again.
fn password(ctx: &Ctx, d: &mut Diff) {
    match &ctx.obs.password {
        Some(PasswordState::Available { value, version })
            if ctx.status.at_provider.password_version.as_ref() != Some(version) =>
        {
            d.changes.set.cipassword = Some(Secret::new(value.expose()));
            d.password_version = Some(version.clone());
        }
        Some(PasswordState::Missing(why)) => {
            d.problems.push(format!("cloud-init password: {why}"));
            d.missing_data = true;
        }
        // Applied already, or not asked for.
        Some(PasswordState::Available { .. }) | None => {}
    }
}

/// Disks: add declared disks the VM lacks, grow smaller ones, move those on
/// another storage, report what cannot be done (shrinking, importing an
/// image after creation).
fn disks(ctx: &Ctx, config: &VmConfig, d: &mut Diff) -> Result<(), String> {
    for (i, disk) in ctx.spec.disks.iter().enumerate() {
        let Some(value) = effective(config, &disk.slot) else {
            if disk.image.is_some() {
                d.problems.push(format!(
                    "disk {} downloads an image, which is only done when the VM is created; the VM has no {}",
                    disk.slot, disk.slot
                ));
            } else if let Some(why) = tenancy::import_refusal(ctx, [(i, disk)]) {
                d.problems.push(why);
                d.not_copied = true;
            } else {
                let slot = render::drive_key(&disk.slot)?;
                d.changes
                    .set
                    .disks
                    .insert(slot, render::disk_create(disk, &ctx.obs.named_images)?);
            }
            continue;
        };
        let drive = match Drive::parse(value) {
            Ok(drive) if !drive.is_cdrom() && !drive.is_cloudinit() => drive,
            Ok(_) => {
                d.problems.push(format!(
                    "slot {} holds a CD-ROM or cloud-init drive, not a disk",
                    disk.slot
                ));
                continue;
            }
            Err(e) => {
                d.problems.push(format!(
                    "slot {} holds a value the provider cannot read: {e}",
                    disk.slot
                ));
                continue;
            }
        };
        let storage = drive
            .storage()
            .map_or_else(|| drive.file.to_string(), str::to_owned);
        if storage != disk.storage {
            d.moves.push((disk.slot.clone(), disk.storage.clone()));
        }
        let (Some(want), Some(have)) = (disk_bytes(disk)?, drive.size) else {
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
