//! The owner marker: a line in a guest's description (a VM's, a
//! container's) naming the resource that created it.
//!
//! It is passed in the create/clone call itself, so the VM carries it from
//! its first moment; a VM without it (or with another resource's UID) is
//! never modified or deleted.
//!
//! The provider writes the marker as the last line of the description, after
//! the spec's notes, and only the last marker line counts: a marker-like line
//! in the notes can neither claim the VM for another resource nor hide this
//! one's (the spec may not contain one anyway, see `tenancy`).

/// What starts the marker line.
pub(crate) const PREFIX: &str = "Managed by crossplane-provider-proxmox:";

/// Who owns a VM, according to its description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// The marker holds this resource's UID.
    Ours,
    /// The marker holds another resource's UID.
    Foreign(String),
    /// No marker.
    Unmarked,
}

/// The marker line for a resource of `kind` (ProxmoxVM, ProxmoxContainer):
/// only its UID decides ownership, the kind and name are for people.
pub fn marker_line_of(kind: &str, namespace: &str, name: &str, uid: &str) -> String {
    format!("{PREFIX} {kind} {namespace}/{name} uid={uid}")
}

/// Reads the owner UID from a description: that of its last marker line,
/// the one the provider writes after the notes.
fn marker_uid(description: &str) -> Option<&str> {
    let rest = description
        .lines()
        .filter_map(|line| line.trim().strip_prefix(PREFIX))
        .next_back()?;
    rest.split_whitespace()
        .find_map(|word| word.strip_prefix("uid="))
}

/// Who owns the guest (VM or container) with this description, as seen by
/// the resource with `uid`.
pub fn owner_of(description: Option<&str>, uid: &str) -> Ownership {
    match description.and_then(marker_uid) {
        Some(found) if found == uid && !uid.is_empty() => Ownership::Ours,
        Some(found) => Ownership::Foreign(found.to_owned()),
        None => Ownership::Unmarked,
    }
}

/// The description to write: the user's text (if any) and the marker.
pub(crate) fn description(user: Option<&str>, marker: &str) -> String {
    match user.map(str::trim_end).filter(|d| !d.trim().is_empty()) {
        Some(text) => format!("{text}\n\n{marker}"),
        None => marker.to_owned(),
    }
}

/// The user's part of an observed description: everything but marker lines,
/// trimmed.
pub(crate) fn user_part(description: &str) -> String {
    description
        .lines()
        .filter(|line| !line.trim().starts_with(PREFIX))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker_line(namespace: &str, name: &str, uid: &str) -> String {
        marker_line_of("ProxmoxVM", namespace, name, uid)
    }

    #[test]
    fn reads_the_marker_wherever_it_is() {
        let marker = marker_line("default", "web", "u-1");
        let cases = [
            ("marker alone", Some(marker.clone()), Ownership::Ours),
            (
                "after notes, with a trailing newline",
                Some(format!("{}\n", description(Some("my notes"), &marker))),
                Ownership::Ours,
            ),
            (
                "another resource's",
                Some(marker_line("default", "db", "u-2")),
                Ownership::Foreign("u-2".into()),
            ),
            ("no description", None, Ownership::Unmarked),
            ("notes only", Some("hand made".into()), Ownership::Unmarked),
        ];
        for (name, desc, want) in cases {
            assert_eq!(owner_of(desc.as_deref(), "u-1"), want, "{name}");
        }
    }

    #[test]
    fn only_the_last_marker_line_counts() {
        let ours = marker_line("team-a", "web", "u-1");
        let forged = marker_line("team-b", "db", "u-2");
        let cases = [
            (
                "a forged marker in the notes, ours after it",
                description(Some(&format!("notes\n{forged}")), &ours),
                Ownership::Ours,
            ),
            (
                "ours, then notes added in Proxmox below it",
                format!("{ours}\nmore notes\n"),
                Ownership::Ours,
            ),
            (
                "another resource's marker after ours",
                format!("{ours}\n{forged}"),
                Ownership::Foreign("u-2".into()),
            ),
            (
                "a last marker line without a uid",
                format!("{ours}\n{PREFIX} ProxmoxVM x/y"),
                Ownership::Unmarked,
            ),
        ];
        for (name, desc, want) in cases {
            assert_eq!(owner_of(Some(&desc), "u-1"), want, "{name}");
        }
    }

    #[test]
    fn an_empty_uid_owns_nothing() {
        let marker = marker_line("default", "web", "");
        assert_ne!(owner_of(Some(&marker), ""), Ownership::Ours);
    }

    #[test]
    fn user_part_drops_the_marker() {
        let marker = marker_line("ns", "web", "u-1");
        let full = description(Some("line one\nline two\n"), &marker);
        assert_eq!(user_part(&full), "line one\nline two");
        assert_eq!(description(None, &marker), marker);
        assert_eq!(description(Some("  "), &marker), marker);
    }
}
