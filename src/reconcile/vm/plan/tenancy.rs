//! What one namespace's spec may not reach in a Proxmox shared by many
//! teams: another resource's owner marker, host paths outside plain device
//! names, the disks of other VMs unless the provider config allows them
//! ([`may_copy`]: clone sources and imports alike); and in the cluster, a
//! connection Secret that is not this resource's.
//!
//! The CRD refuses the spec's part at apply time (CEL, in `src/api/vm`);
//! [`refusal`] refuses objects written around the schema (an older or
//! looser CRD), before anything is sent to Proxmox. Which VMs' disks may be
//! copied depends on Proxmox (is it a template, its pool and tags) and on
//! the provider config, so it is decided when the copy is: nothing is
//! cloned or imported meanwhile.

use k8s_openapi::jiff::Timestamp;

use super::context::Ctx;
use super::input::{ProviderState, TemplateLookup};
use super::output::Plan;
use super::owner::PREFIX;
use crate::api::ProxmoxVM;
use crate::api::provider_config::CloneSources;
use crate::api::vm::{Disk, VmParameters};
use crate::reconcile::managed::connection_secret;

/// Why the spec is refused, naming each field, or `None`.
pub(super) fn refusal(spec: &VmParameters) -> Option<String> {
    let mut problems = vec![];
    if spec
        .description
        .as_deref()
        .is_some_and(|d| d.contains(PREFIX))
    {
        problems.push(format!(
            "spec.forProvider.description contains the owner marker {PREFIX:?}: the provider adds that line itself; remove it"
        ));
    }
    for (i, port) in spec.hardware.serial_ports.iter().enumerate() {
        if !serial_device(&port.device) {
            problems.push(format!(
                "spec.forProvider.serialPorts[{i}].device {:?} is neither socket nor a device name under /dev/ (letters, digits, . _ - and /, no empty, . or .. parts)",
                port.device
            ));
        }
    }
    for (i, disk) in spec.disks.iter().enumerate() {
        let Some(volume) = &disk.import_from else {
            continue;
        };
        if volume_path(volume).any(|part| part == "..") {
            problems.push(format!(
                "spec.forProvider.disks[{i}].importFrom {volume:?} contains a .. path part"
            ));
        }
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// A VM whose disks a resource would copy: the source of a clone, or the
/// VM whose disk one of its disks imports (`importFrom: ...vm-N-...`), as
/// the cluster view shows it when the copy is decided.
pub(super) struct CopySource<'a> {
    /// Its VMID.
    pub vmid: u32,
    /// Whether it is a template (`false` for a VM the view does not show).
    pub template: bool,
    /// Its pool.
    pub pool: Option<&'a str>,
    /// Its tags.
    pub tags: &'a [String],
}

impl<'a> CopySource<'a> {
    /// VM `vmid` as looked up (a VM not found has no pool or tags).
    pub fn of(vmid: u32, found: Option<&'a TemplateLookup>) -> Self {
        match found {
            Some(TemplateLookup::Found {
                vmid,
                template,
                pool,
                tags,
                ..
            }) => Self {
                vmid: *vmid,
                template: *template,
                pool: pool.as_deref(),
                tags,
            },
            Some(
                TemplateLookup::NotFound
                | TemplateLookup::Ambiguous(_)
                | TemplateLookup::Coming { .. },
            )
            | None => Self {
                vmid,
                template: false,
                pool: None,
                tags: &[],
            },
        }
    }
}

/// The rule for copying another VM's disks, by cloning it or by importing
/// one of its disks: a template always (templates are shared by design),
/// another VM only when the copy is full (a linked clone needs a
/// template's base disks) and the provider config's
/// `clonePolicy.allowNonTemplates` names it ([`policy_names`]).
pub(super) fn may_copy(ctx: &Ctx, source: &CopySource, full: bool) -> bool {
    source.template || (full && policy_names(ctx, source))
}

/// Whether the provider config's `clonePolicy.allowNonTemplates` names
/// `source` (by pool, tag or VMID range).
pub(super) fn policy_names(ctx: &Ctx, source: &CopySource) -> bool {
    let allowed: Option<&CloneSources> = match ctx.provider {
        Some(ProviderState::Ready { clones, .. }) => clones.as_ref(),
        Some(
            ProviderState::NotFound { .. }
            | ProviderState::Unusable { .. }
            | ProviderState::Forbidden { .. },
        )
        | None => None,
    };
    allowed.is_some_and(|a| a.allows(source.vmid, source.pool, source.tags))
}

/// Why `source` is not copied (a clone or an import, `copied` says which:
/// "cloned", "imported"); `allowed_full`: a full clone would be.
pub(super) fn not_a_template(source: &CopySource, allowed_full: bool, copied: &str) -> String {
    let vmid = source.vmid;
    if allowed_full {
        format!(
            "VM {vmid} is not a template (yet): the provider config's clonePolicy allows full clones of it, but a linked clone (full: false) needs a template; nothing is {copied}"
        )
    } else {
        format!(
            "VM {vmid} is not a template (yet): only a Proxmox template (template: 1), or a VM the provider config's clonePolicy.allowNonTemplates names (by pool, tag or VMID range), can be {copied}; nothing is {copied} until it is one"
        )
    }
}

/// Why `disks` (those about to be created: every disk of a create, a disk
/// added to an existing VM) may not import what they name, naming each:
/// the disk of another VM ([`vm_disk_of`]) that [`may_copy`] refuses, as
/// the cluster view showed that VM ([`super::Observation::import_sources`]).
/// Import volumes and templates' base volumes are always imported.
pub(super) fn import_refusal<'d>(
    ctx: &Ctx,
    disks: impl IntoIterator<Item = (usize, &'d Disk)>,
) -> Option<String> {
    let mut problems = vec![];
    for (i, disk) in disks {
        let Some(volume) = &disk.import_from else {
            continue;
        };
        let Some(owner) = vm_disk_of(volume) else {
            continue;
        };
        let seen = ctx.obs.import_sources.get(&owner);
        let source = CopySource::of(owner, seen);
        if may_copy(ctx, &source, true) {
            continue;
        }
        let why = match seen {
            Some(TemplateLookup::NotFound) => format!(
                "VM {owner} does not exist: only the disks of a Proxmox template, or of a VM the provider config's clonePolicy.allowNonTemplates names (a VM that does not exist only by its VMID range), can be imported; nothing is imported"
            ),
            None => format!("VM {owner} was not looked up; nothing is imported"),
            Some(_) => not_a_template(&source, false, "imported"),
        };
        problems.push(format!(
            "spec.forProvider.disks[{i}].importFrom {volume:?} is a disk of VM {owner}: {why}"
        ));
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// The VMs whose disks `spec`'s disks import (`importFrom: ...vm-N-...`).
pub(super) fn import_sources(spec: &VmParameters) -> Vec<u32> {
    let mut vmids: Vec<u32> = spec
        .disks
        .iter()
        .filter_map(|d| d.import_from.as_deref().and_then(vm_disk_of))
        .collect();
    vmids.sort_unstable();
    vmids.dedup();
    vmids
}

/// The plan once the connection Secret was not written because it is not
/// this resource's (`why`): Synced=False `ConnectionSecretConflict` naming
/// it, unless Synced already says something is wrong with the VM, whose
/// message then ends with it. Ready, the step and the VM are as planned.
pub fn connection_refused(plan: &mut Plan, vm: &ProxmoxVM, now: Timestamp, why: &str) {
    connection_secret::refused(
        &mut plan.status.conditions,
        (vm.metadata.generation, now),
        why,
    );
}

/// `socket`, or `/dev/` and parts of `[A-Za-z0-9._-]`, none empty or only
/// dots (`/dev/ttyS0`, `/dev/serial/by-id/usb-FTDI_...`).
pub(super) fn serial_device(device: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.bytes().any(|b| b != b'.')
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    device == "socket"
        || device
            .strip_prefix("/dev/")
            .is_some_and(|path| path.split('/').all(part))
}

/// The `/`-separated parts of a volume ID's name (after `storage:`).
fn volume_path(volume: &str) -> std::str::Split<'_, char> {
    volume
        .split_once(':')
        .map_or(volume, |(_, name)| name)
        .split('/')
}

/// The VM whose own disk the volume is (`vm-777-disk-0`,
/// `777/vm-777-disk-0.qcow2`, a linked clone's `base-9000-disk-0/vm-777-disk-0`),
/// or `None` for import volumes and templates' base volumes.
pub(super) fn vm_disk_of(volume: &str) -> Option<u32> {
    let mut parts = volume_path(volume).peekable();
    if parts.peek() == Some(&"import") {
        return None;
    }
    parts.find_map(|part| {
        let rest = part
            .strip_prefix("vm-")
            .or_else(|| part.strip_prefix("subvol-"))?;
        let (id, _) = rest.split_once('-')?;
        id.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_devices_are_plain_device_names() {
        for good in [
            "socket",
            "/dev/ttyS0",
            "/dev/ttyUSB1",
            "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A1-if00-port0",
            "/dev/.hidden",
        ] {
            assert!(serial_device(good), "{good}");
        }
        for bad in [
            "/dev/../etc/shadow",
            "/dev/serial/../../etc/shadow",
            "/dev/./ttyS0",
            "/dev//ttyS0",
            "/dev/ttyS0/",
            "/dev/",
            "/dev/tty S0",
            "/dev/tty;rm",
            "/etc/shadow",
            "Socket",
            "/dev/..",
        ] {
            assert!(!serial_device(bad), "{bad}");
        }
    }

    #[test]
    fn disks_of_vms_are_not_import_sources() {
        for (volume, owner) in [
            ("local-lvm:vm-777-disk-0", Some(777)),
            ("local:777/vm-777-disk-0.qcow2", Some(777)),
            ("zfs:base-9000-disk-0/vm-101-disk-0", Some(101)),
            ("zfs:subvol-300-disk-0", Some(300)),
            ("local-lvm:base-9000-disk-0", None),
            ("local:9000/base-9000-disk-0.qcow2", None),
            ("local:import/jammy.qcow2", None),
            ("local:import/vm-100-disk-0.qcow2", None),
            ("local-lvm:myvm-1-disk", None),
        ] {
            assert_eq!(vm_disk_of(volume), owner, "{volume}");
        }
    }
}
