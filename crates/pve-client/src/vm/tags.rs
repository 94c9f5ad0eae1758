//! VM tags (`pve-tag-list`).
//!
//! PVE reads the list with `split_list` (`;`, `,` or spaces between tags) and
//! stores it lower-cased, sorted, de-duplicated and `;`-separated (unless
//! the datacenter's `tag-style` says otherwise), so tags compare as a
//! case-insensitive set.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::fmt;
use std::str::FromStr;

/// VM tags, in the order given.
#[derive(Clone, Debug, Default)]
pub struct Tags(Vec<String>);

impl Tags {
    /// Reads a tag list; every string is one (possibly empty). Unlike PVE's
    /// `split_list`, a NUL byte is just one more separator (PVE would only
    /// split on NULs then, and refuse the tags with spaces that leaves).
    pub fn parse(s: &str) -> Self {
        Self(
            s.split(|c: char| matches!(c, ',' | ';' | '\0') || c.is_whitespace())
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    /// Builds tags from items.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Self {
        Self(items.into_iter().map(Into::into).collect())
    }

    /// The tags as given.
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// Lower-cased, sorted, de-duplicated: the form to compare.
    pub fn normalized(&self) -> BTreeSet<String> {
        self.0.iter().map(|t| t.to_lowercase()).collect()
    }

    /// Whether a tag is present (case-insensitive).
    pub fn contains(&self, tag: &str) -> bool {
        self.0.iter().any(|t| t.eq_ignore_ascii_case(tag))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether every tag matches PVE's tag pattern
    /// (`[a-z0-9_][a-z0-9_+.-]*`, any case).
    pub fn is_valid(&self) -> bool {
        self.0.iter().all(|t| {
            t.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'.' | b'-'))
        })
    }
}

impl PartialEq for Tags {
    fn eq(&self, other: &Self) -> bool {
        self.normalized() == other.normalized()
    }
}

impl Eq for Tags {}

impl FromStr for Tags {
    type Err = Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::parse(s))
    }
}

impl fmt::Display for Tags {
    /// `;`-separated, as given (PVE normalises on its side).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(";"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_as_case_insensitive_sets() {
        assert_eq!(Tags::parse("b;A"), Tags::parse("a, B"));
        assert_eq!(Tags::parse("b;A").to_string(), "b;A");
        assert_ne!(Tags::parse("a"), Tags::parse("a;b"));
        assert!(Tags::parse("Prod").contains("prod"));
        assert!(Tags::parse(" ; ,").is_empty());
        assert!(Tags::parse("k8s;a_b+c.d-e").is_valid());
        assert!(!Tags::new(["-x"]).is_valid() && !Tags::new([""]).is_valid());
    }
}
