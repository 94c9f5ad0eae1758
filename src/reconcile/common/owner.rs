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

/// Who the last marker line names, for people (`ProxmoxVM team-b/db
/// uid=...`): the marker does not say which cluster wrote it, only the UID
/// (a resource's UID is unique to its cluster).
pub fn marker_owner(description: Option<&str>) -> Option<String> {
    description?
        .lines()
        .filter_map(|line| line.trim().strip_prefix(PREFIX))
        .next_back()
        .map(|rest| rest.trim().to_owned())
}

/// Whether a guest this resource did not create is taken over, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// Write this description (the notes as they are, and this resource's
    /// marker): from then on the guest is this resource's.
    Adopt(String),
    /// Left untouched: why, for the `NotOwned` condition.
    Refuse(String),
}

/// What to do with a guest whose marker is not this resource's, when the
/// resource may change it. `adopt`: the resource carries
/// [`crate::api::meta::ADOPT`] `"true"`; `guest`: "VM 100 on node pve1".
/// Only a guest without any marker is adopted: one carrying another
/// resource's (of this cluster or another) is never claimed.
pub fn takeover(
    guest: &str,
    ownership: &Ownership,
    observed: Option<&str>,
    adopt: bool,
    marker: &str,
) -> Takeover {
    let annotation = crate::api::meta::ADOPT;
    match ownership {
        Ownership::Ours => Takeover::Adopt(description(
            Some(&user_part(observed.unwrap_or_default())),
            marker,
        )),
        Ownership::Unmarked if adopt => Takeover::Adopt(description(
            Some(&user_part(observed.unwrap_or_default())),
            marker,
        )),
        Ownership::Unmarked => Takeover::Refuse(format!(
            "{guest} was not created by this resource (its notes carry no owner marker); it is left untouched. To only observe it, set managementPolicies to [\"Observe\"]; to take it over, annotate this resource {annotation}=true"
        )),
        Ownership::Foreign(uid) => {
            let owner = marker_owner(observed).unwrap_or_else(|| format!("uid={uid}"));
            let hint = if adopt {
                format!(
                    "; {annotation} never takes over a guest another resource marked (here or in another cluster): if that resource is gone, delete its marker line from the notes in Proxmox first"
                )
            } else {
                String::new()
            };
            Takeover::Refuse(format!(
                "{guest} belongs to another resource ({owner}); it is left untouched{hint}"
            ))
        }
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
    fn only_an_unmarked_guest_is_taken_over_and_only_when_asked() {
        let ours = marker_line("ns", "web", "u-1");
        let theirs = marker_line("other", "db", "u-2");
        let foreign_notes = description(Some("their notes"), &theirs);
        // Name, the notes seen, the opt-in; the notes kept or words of the refusal.
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            bool,
            Result<&'a str, &'a [&'a str]>,
        );
        let cases: [Case; 6] = [
            ("unmarked, asked", Some("hand made"), true, Ok("hand made")),
            ("no notes at all, asked", None, true, Ok("")),
            (
                "unmarked, not asked",
                Some("hand made"),
                false,
                Err(&["no owner marker", "proxmox.crossplane.io/adopt=true"]),
            ),
            (
                "another's marker, asked",
                Some(&foreign_notes),
                true,
                Err(&["ProxmoxVM other/db uid=u-2", "never takes over"]),
            ),
            (
                "another's marker, not asked",
                Some(&foreign_notes),
                false,
                Err(&["ProxmoxVM other/db uid=u-2"]),
            ),
            (
                "a forged marker of ours above another's",
                Some(&format!("{ours}\n{theirs}")),
                true,
                Err(&["ProxmoxVM other/db uid=u-2"]),
            ),
        ];
        for (name, observed, adopt, want) in cases {
            let owner = owner_of(observed, "u-1");
            let got = takeover("VM 100", &owner, observed, adopt, &ours);
            match (got, want) {
                (Takeover::Adopt(written), Ok(notes)) => {
                    assert_eq!(owner_of(Some(&written), "u-1"), Ownership::Ours, "{name}");
                    assert_eq!(user_part(&written), notes, "{name}");
                }
                (Takeover::Refuse(why), Err(words)) => {
                    for word in words {
                        assert!(why.contains(word), "{name}: {why}");
                    }
                }
                (got, want) => panic!("{name}: {got:?}, wanted {want:?}"),
            }
        }
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
