//! What one namespace's spec may not reach in a Proxmox shared by many
//! teams: another resource's owner marker.
//!
//! The CRD refuses the same at apply time (CEL, in `src/api/vm`); this
//! refuses objects written around the schema (an older or looser CRD), before
//! anything is sent to Proxmox.

use super::owner::PREFIX;
use crate::api::vm::VmParameters;

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
    (!problems.is_empty()).then(|| problems.join("; "))
}
