//! The Warning condition: what the spec asks works, but not as one would
//! expect. Set while it holds, removed once it does not (the status is
//! applied whole, so a condition left out goes away).

use super::context::Ctx;
use super::decision::Out;
use super::input::VmState;
use super::output::time;
use crate::api::{Condition, ConditionStatus, ConditionType, Reason, set_condition, vm::Bios};

/// Sets or clears the Warning condition: one condition for every warning
/// that holds, with the first one's reason and all their messages.
pub(super) fn update(ctx: &Ctx, out: &mut Out) {
    let conditions = &mut out.status.conditions;
    let warnings: Vec<(Reason, String)> = [
        (Reason::NoEfiDisk, ovmf_without_efi_disk(ctx)),
        (Reason::Overprovisioned, super::limits::overprovisioned(ctx)),
        (
            Reason::InvalidAnnotation,
            super::limits::annotations(ctx.vm),
        ),
    ]
    .into_iter()
    .filter_map(|(reason, message)| Some((reason, message?)))
    .collect();
    match warnings.first() {
        Some((reason, _)) => {
            let message: Vec<&str> = warnings.iter().map(|(_, m)| m.as_str()).collect();
            let mut c = Condition::new(
                ConditionType::Warning,
                ConditionStatus::True,
                *reason,
                message.join("; also: "),
                time(ctx.now),
            );
            c.observed_generation = ctx.vm.metadata.generation;
            set_condition(conditions, c);
        }
        None => conditions.retain(|c| c.type_ != ConditionType::Warning.as_str()),
    }
}

/// OVMF keeps its variables (boot entries, Secure Boot state) on the EFI
/// disk. Without one, qemu-server logs "no efidisk configured! Using
/// temporary efivars disk." and starts from a fresh copy every time. The
/// provider does not add a disk nobody asked for: it says so.
fn ovmf_without_efi_disk(ctx: &Ctx) -> Option<String> {
    let hw = &ctx.spec.hardware;
    if hw.bios != Some(Bios::OVMF) || hw.efi_disk.is_some() {
        return None;
    }
    let has_one = match &ctx.obs.vm {
        VmState::Present(vm) => vm.config.as_ref().is_some_and(|c| {
            c.current.contains_key("efidisk0")
                || c.pending.get("efidisk0").is_some_and(Option::is_some)
        }),
        VmState::Absent | VmState::Unknown => false,
    };
    (!has_one).then(|| {
        "bios is OVMF but no efiDisk is declared and the VM has none: Proxmox starts it with \
         a temporary copy of the EFI variables, so boot entries, UEFI settings and the Secure \
         Boot state are lost at every start; declare spec.forProvider.efiDisk to keep them"
            .to_owned()
    })
}
