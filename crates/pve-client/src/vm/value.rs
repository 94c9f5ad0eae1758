//! What every value of the model shares: the parse error, PVE's booleans,
//! and the identifier formats several values use.

/// A string that is not a valid value of its kind, as PVE would refuse it
/// (or as the model does not read it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {reason}")]
pub struct InvalidValue {
    /// The kind of value: `drive`, `net`, `ipconfig`, ...
    pub what: &'static str,
    /// The text that was read.
    pub value: String,
    /// Why it was refused.
    pub reason: String,
}

impl InvalidValue {
    pub(crate) fn new(what: &'static str, value: &str, reason: impl Into<String>) -> Self {
        Self {
            what,
            value: value.to_owned(),
            reason: reason.into(),
        }
    }
}

/// A boolean as pve-common's `parse_boolean` reads it: `1`/`on`/`yes`/`true`
/// and `0`/`off`/`no`/`false`, in any case. PVE itself always writes `1`/`0`.
pub fn parse_bool(s: &str) -> Option<bool> {
    const TRUE: [&str; 4] = ["1", "on", "yes", "true"];
    const FALSE: [&str; 4] = ["0", "off", "no", "false"];
    if TRUE.iter().any(|t| t.eq_ignore_ascii_case(s)) {
        Some(true)
    } else if FALSE.iter().any(|f| f.eq_ignore_ascii_case(s)) {
        Some(false)
    } else {
        None
    }
}

/// A boolean as PVE writes (and accepts) it.
pub(crate) fn bool_text(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// A storage ID (`pve-storage-id`): a letter, then letters, digits, `-`, `_`
/// and `.`, ending in a letter or digit.
pub fn is_storage_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A DNS name (`dns-name`): labels of letters, digits and inner dashes,
/// separated by dots.
pub fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// PVE's `split_list`: items separated by NUL bytes if there are any, else
/// by `,`, `;` and whitespace.
pub(crate) fn split_list(s: &str) -> Vec<String> {
    if s.contains('\0') {
        return s.split('\0').map(str::to_owned).collect();
    }
    s.split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .filter(|i| !i.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The index of `<prefix><n>` with `n < count` (`net3` → 3), digits only.
pub(crate) fn indexed(key: &str, prefix: &str, count: u32) -> Option<u32> {
    let digits = key.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // `net01` is not a key PVE knows.
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    digits.parse().ok().filter(|n| *n < count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_as_pve_reads_them() {
        for t in ["1", "on", "YES", "True"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["0", "off", "No", "FALSE"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        for x in ["", "2", "y", " 1", "enabled"] {
            assert_eq!(parse_bool(x), None, "{x:?}");
        }
    }

    #[test]
    fn identifiers() {
        assert!(is_storage_id("local-lvm") && is_storage_id("ceph.pool_1"));
        assert!(!is_storage_id("1local") && !is_storage_id("local-") && !is_storage_id("l"));
        assert!(is_dns_name("web-1") && is_dns_name("a.example.org"));
        assert!(!is_dns_name("-web") && !is_dns_name("a..b") && !is_dns_name(""));
        assert_eq!(split_list(" a, b;c  d"), ["a", "b", "c", "d"]);
        assert_eq!(split_list("a b\0c"), ["a b", "c"]);
        assert_eq!(indexed("net31", "net", 32), Some(31));
        assert_eq!(indexed("net32", "net", 32), None);
        assert_eq!(indexed("net01", "net", 32), None);
        assert_eq!(indexed("netx", "net", 32), None);
    }
}
