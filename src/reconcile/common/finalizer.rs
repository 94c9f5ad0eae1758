//! The managed-resource finalizer of every kind: one name, one check, one
//! list to write. The write itself is a merge patch carrying the
//! resourceVersion read, so a write from a stale read fails with 409 and
//! nobody else's finalizer is lost.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

pub use crate::api::meta::FINALIZER;

/// Whether the resource carries our finalizer.
pub fn has_finalizer(meta: &ObjectMeta) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == FINALIZER)
}

/// The resource's finalizers with ours added (`present`) or removed, the
/// others kept in their order.
pub fn finalizers(meta: &ObjectMeta, present: bool) -> Vec<&str> {
    let others = meta
        .finalizers
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|f| *f != FINALIZER);
    if present {
        others.chain([FINALIZER]).collect()
    } else {
        others.collect()
    }
}

/// The merge patch that adds or removes our finalizer, on the
/// resourceVersion read.
pub fn patch(meta: &ObjectMeta, present: bool) -> Value {
    json!({"metadata": {
        "resourceVersion": meta.resource_version,
        "finalizers": finalizers(meta, present),
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            resource_version: Some("7".into()),
            finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn ours_is_added_or_removed_and_the_others_are_kept() {
        let m = meta(&["other.example.com"]);
        assert!(!has_finalizer(&m));
        assert_eq!(finalizers(&m, true), ["other.example.com", FINALIZER]);
        let m = meta(&[FINALIZER, "other.example.com"]);
        assert!(has_finalizer(&m));
        assert_eq!(finalizers(&m, false), ["other.example.com"]);
        assert_eq!(
            patch(&m, false),
            json!({"metadata": {"resourceVersion": "7", "finalizers": ["other.example.com"]}}),
            "on the version read"
        );
        assert!(!has_finalizer(&ObjectMeta::default()));
    }
}
