//! Proxmox names for objects that are cluster-wide on Proxmox but belong
//! to one namespaced resource: the resource's name for people, and a hash
//! of its namespace and name so two teams' resources of the same name
//! never share (and never change or delete) one object, as ProxmoxImage's
//! file names do.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use crate::reconcile::common::owner::marker_line_of;

/// `<stem>-<8 hex digits>`, at most `max` characters, starting with a
/// letter and made of letters, digits, `-` and `_` (pve-firewall's name
/// pattern, which the other cluster-wide objects share). The stem is the
/// resource's name with other characters as `-`, cut to fit; `max` is at
/// least 11.
pub fn derived(namespace: &str, name: &str, max: usize) -> String {
    let owner = Sha256::digest(format!("{namespace}/{name}").as_bytes());
    let hash: String = owner.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let mut stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if !stem.starts_with(|c: char| c.is_ascii_alphabetic()) {
        stem.insert(0, 'k');
    }
    stem.truncate(max.saturating_sub(hash.len() + 1));
    format!("{stem}-{hash}")
}

/// [`derived`] for the resource with `meta`.
pub fn of(meta: &ObjectMeta, max: usize) -> String {
    derived(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        max,
    )
}

/// The one-line comment an object carries: the owner marker of the
/// resource of `kind` with `meta` (only its UID decides ownership), then
/// the spec's note. Firewall objects keep comments on one line, so the
/// note follows the marker on it.
pub fn marked_comment(kind: &str, meta: &ObjectMeta, note: Option<&str>) -> String {
    let marker = marker_line_of(
        kind,
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default(),
    );
    match note.filter(|n| !n.trim().is_empty()) {
        Some(note) => format!("{marker} | {note}"),
        None => marker,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_pve_and_never_collide_across_namespaces() {
        let a = derived("team-a", "web", 18);
        let b = derived("team-b", "web", 18);
        assert_ne!(a, b);
        assert!(a.starts_with("web-") && a.len() == 12, "{a}");
        let long = derived("ns", "a.very-long-name.of-a-group", 18);
        assert_eq!(long.len(), 18, "{long}");
        assert!(long.starts_with("a-very-lo-"), "{long}");
        let digit = derived("ns", "1st", 18);
        assert!(digit.starts_with("k1st-"), "{digit}");
        for n in [a, long, digit, derived("ns", "x", 64)] {
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            );
            assert!(n.starts_with(|c: char| c.is_ascii_alphabetic()));
        }
    }

    #[test]
    fn the_marker_comes_first_and_is_read_back_as_ours() {
        use crate::reconcile::common::owner::{Ownership, owner_of};
        let meta = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("web".into()),
            uid: Some("u-1".into()),
            ..ObjectMeta::default()
        };
        let with_note = marked_comment("Kind", &meta, Some("uid=u-2 says hi"));
        assert_eq!(owner_of(Some(&with_note), "u-1"), Ownership::Ours);
        assert_eq!(
            owner_of(Some(&with_note), "u-2"),
            Ownership::Foreign("u-1".into())
        );
        assert!(!with_note.contains('\n'));
        assert_eq!(owner_of(Some("a note"), "u-1"), Ownership::Unmarked);
    }
}
