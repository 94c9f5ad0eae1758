//! The EFI vars disk (`efidisk0`) and the TPM state (`tpmstate0`): volumes
//! created with the VM, or added to a VM that lacks them. What they were
//! created with (storage, layout, Secure Boot keys, TPM version) cannot be
//! changed in place, so a difference is reported, never "corrected" by a
//! new volume that would lose the guest's UEFI settings or TPM secrets.

use pve_client::vm::{EfiDisk, EfiType, TpmState, TpmVersion, VmParams};

use super::super::drift::{Diff, effective};
use super::super::input::VmConfig;
use crate::api::vm::{self as spec, VmParameters};

const EFI: &str = "efidisk0";
const TPM: &str = "tpmstate0";

fn efi_type(t: spec::EfiType) -> EfiType {
    match t {
        spec::EfiType::FourMb => EfiType::FourMb,
        spec::EfiType::TwoMb => EfiType::TwoMb,
    }
}

fn tpm_version(v: spec::TpmVersion) -> TpmVersion {
    match v {
        spec::TpmVersion::V2_0 => TpmVersion::V2_0,
        spec::TpmVersion::V1_2 => TpmVersion::V1_2,
    }
}

fn new_efi(efi: &spec::EfiDisk) -> EfiDisk {
    EfiDisk::alloc(&efi.storage, efi_type(efi.type_), efi.pre_enrolled_keys)
}

fn new_tpm(tpm: &spec::TpmState) -> TpmState {
    TpmState::alloc(&tpm.storage, tpm_version(tpm.version))
}

/// The volumes a new VM is created with.
pub(in super::super) fn create(spec: &VmParameters, vm: &mut VmParams) {
    vm.hardware.efidisk0 = spec.hardware.efi_disk.as_ref().map(new_efi);
    vm.hardware.tpmstate0 = spec.hardware.tpm_state.as_ref().map(new_tpm);
}

/// Adds the volumes the VM lacks; reports those that differ from the spec.
pub(in super::super) fn drift(spec: &VmParameters, config: &VmConfig, d: &mut Diff) {
    if let Some(efi) = &spec.hardware.efi_disk {
        match present(config, EFI, d).map(str::parse::<EfiDisk>) {
            None => d.changes.set.hardware.efidisk0 = Some(new_efi(efi)),
            Some(Err(e)) => d
                .problems
                .push(format!("{EFI} holds a value the provider cannot read: {e}")),
            Some(Ok(have)) => {
                let mut differs = vec![];
                if have.efitype_or_default() != efi_type(efi.type_) {
                    differs.push(format!("type {}", layout(have.efitype_or_default())));
                }
                if have.keys_enrolled() != efi.pre_enrolled_keys {
                    let with = if have.keys_enrolled() {
                        "with"
                    } else {
                        "without"
                    };
                    differs.push(format!("{with} pre-enrolled Secure Boot keys"));
                }
                report(
                    d,
                    "EFI disk",
                    EFI,
                    have.drive.storage(),
                    &efi.storage,
                    &differs,
                );
            }
        }
    }
    if let Some(tpm) = &spec.hardware.tpm_state {
        match present(config, TPM, d).map(str::parse::<TpmState>) {
            None => d.changes.set.hardware.tpmstate0 = Some(new_tpm(tpm)),
            Some(Err(e)) => d
                .problems
                .push(format!("{TPM} holds a value the provider cannot read: {e}")),
            Some(Ok(have)) => {
                let version = have.version_or_default();
                let differs: Vec<String> = (version != tpm_version(tpm.version))
                    .then(|| format!("version {}", version.as_str()))
                    .into_iter()
                    .collect();
                report(
                    d,
                    "TPM state",
                    TPM,
                    have.drive.storage(),
                    &tpm.storage,
                    &differs,
                );
            }
        }
    }
}

fn layout(t: EfiType) -> &'static str {
    match t {
        EfiType::TwoMb => "2m",
        EfiType::FourMb => "4m",
    }
}

/// The volume's value once pending changes apply; a volume added but not
/// yet in use (the VM runs) is a pending change.
fn present<'c>(config: &'c VmConfig, key: &str, d: &mut Diff) -> Option<&'c str> {
    let value = effective(config, key)?;
    if !config.current.contains_key(key) && !d.pending.iter().any(|k| k == key) {
        d.pending.push(key.to_owned());
    }
    Some(value)
}

/// Reports a volume on another storage, or created otherwise than the spec
/// says: neither can change without losing what the volume holds.
fn report(
    d: &mut Diff,
    what: &str,
    key: &str,
    storage: Option<&str>,
    wanted: &str,
    differs: &[String],
) {
    let storage = storage.unwrap_or("(no storage)");
    if storage != wanted {
        d.problems.push(format!(
            "the {what} ({key}) is on storage {storage}, the spec says {wanted}; moving it is not supported"
        ));
    }
    if !differs.is_empty() {
        d.problems.push(format!(
            "the {what} ({key}) was created with {}, which cannot change in place; to have the provider create a new one, delete {key} in Proxmox (the guest loses what it holds)",
            differs.join(" and ")
        ));
    }
}
