//! PVE "property strings": `default-value,key=value,key=value`.

use std::collections::BTreeMap;

/// Splits a property string into an optional leading bare value (the
/// default key's value) and `key=value` pairs. Spaces around items are
/// ignored; empty items are skipped.
pub(crate) fn split(s: &str) -> (Option<String>, Vec<(String, String)>) {
    let mut bare = None;
    let mut pairs = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match item.split_once('=') {
            Some((k, v)) => pairs.push((k.trim().to_owned(), v.trim().to_owned())),
            None if bare.is_none() && pairs.is_empty() => bare = Some(item.to_owned()),
            // A bare flag later in the string: keep it as key with no value.
            None => pairs.push((item.to_owned(), String::new())),
        }
    }
    (bare, pairs)
}

/// Joins a leading value and sorted options back into a property string.
pub(crate) fn join(
    first: Option<&str>,
    ordered: &[(&str, String)],
    rest: &BTreeMap<String, String>,
) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(f) = first {
        parts.push(f.to_owned());
    }
    for (k, v) in ordered {
        parts.push(format!("{k}={v}"));
    }
    for (k, v) in rest {
        if v.is_empty() {
            parts.push(k.clone());
        } else {
            parts.push(format!("{k}={v}"));
        }
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_handles_spacing_and_bare_values() {
        let (bare, pairs) = split(" local-lvm:vm-100-disk-0 , size=32G,ssd=1,");
        assert_eq!(bare.as_deref(), Some("local-lvm:vm-100-disk-0"));
        assert_eq!(
            pairs,
            [("size".into(), "32G".into()), ("ssd".into(), "1".into())]
        );
        let (bare, pairs) = split("ip=dhcp");
        assert!(bare.is_none());
        assert_eq!(pairs.len(), 1);
        assert_eq!(split(""), (None, vec![]));
    }
}
