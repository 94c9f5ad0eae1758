//! The VM's owner marker: the marker line and reading it from a VM's
//! config. The marker itself is every guest's
//! ([`crate::reconcile::common::owner`]).

use super::input::VmConfig;
pub use crate::reconcile::common::owner::{Ownership, marker_line_of, owner_of};
pub(crate) use crate::reconcile::common::owner::{PREFIX, description, user_part};

/// The marker line for a ProxmoxVM.
pub fn marker_line(namespace: &str, name: &str, uid: &str) -> String {
    marker_line_of("ProxmoxVM", namespace, name, uid)
}

/// Who owns the VM with this config, as seen by the resource with `uid`.
pub fn ownership(config: &VmConfig, uid: &str) -> Ownership {
    owner_of(config.current.get("description").map(String::as_str), uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vm_is_owned_by_the_marker_in_its_description() {
        let mut config = VmConfig::default();
        assert_eq!(ownership(&config, "u-1"), Ownership::Unmarked);
        config.current.insert(
            "description".into(),
            description(Some("notes"), &marker_line("ns", "web", "u-1")),
        );
        assert_eq!(ownership(&config, "u-1"), Ownership::Ours);
        assert_eq!(ownership(&config, "u-2"), Ownership::Foreign("u-1".into()));
    }
}
