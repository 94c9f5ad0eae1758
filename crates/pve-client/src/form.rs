//! Request parameters encoded exactly as PVE expects them.
//!
//! PVE accepts booleans only as `1`/`0` (`"true"` is a 400), sizes as
//! `[+]N[KMGT]`, lists in `delete=` comma-separated, and `sshkeys` strictly
//! percent-encoded *before* the usual form encoding (so the wire shows
//! `%2520` for a space). Parameters go in the query string for GET/DELETE
//! (a body there is a 501) and in an `application/x-www-form-urlencoded`
//! body for POST/PUT.

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::secret::Secret;

/// RFC 3986 unreserved characters stay; everything else is escaped. PVE's
/// check is `/^[-%a-zA-Z0-9_.!~*'()]*$/`, which this always satisfies.
const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Strict RFC 3986 percent-encoding: space → `%20` (never `+`), `+` → `%2B`,
/// `=` → `%3D`, `@` → `%40`, newline → `%0A`.
pub fn strict_percent_encode(value: &str) -> String {
    utf8_percent_encode(value, STRICT).to_string()
}

/// Ordered `key=value` parameters. `Debug` shows keys only, because values
/// may be secrets (`cipassword`, `password`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
    secrets: Vec<Secret>,
}

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a string parameter.
    pub fn text(mut self, key: &str, value: impl fmt::Display) -> Self {
        self.set(key, value.to_string());
        self
    }

    /// Adds a string parameter if present.
    pub fn opt(self, key: &str, value: Option<impl fmt::Display>) -> Self {
        match value {
            Some(v) => self.text(key, v),
            None => self,
        }
    }

    /// Adds a boolean as `1`/`0`.
    pub fn flag(self, key: &str, value: bool) -> Self {
        self.text(key, if value { "1" } else { "0" })
    }

    /// Adds a boolean as `1`/`0` if present.
    pub fn opt_flag(self, key: &str, value: Option<bool>) -> Self {
        match value {
            Some(v) => self.flag(key, v),
            None => self,
        }
    }

    /// Adds a secret value; it is remembered for redaction.
    pub fn secret(mut self, key: &str, value: &Secret) -> Self {
        self.set(key, value.expose());
        self.secrets.push(value.clone());
        self
    }

    /// Adds or replaces a parameter in place.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        if let Some(slot) = self.pairs.iter_mut().find(|(k, _)| k == key) {
            slot.1 = value;
        } else {
            self.pairs.push((key.to_owned(), value));
        }
    }

    /// Appends another set of parameters.
    pub fn extend(mut self, other: Params) -> Self {
        for (k, v) in other.pairs {
            self.set(&k, v);
        }
        self.secrets.extend(other.secrets);
        self
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The pairs, in insertion order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    pub(crate) fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    /// `application/x-www-form-urlencoded` encoding.
    pub fn to_form(&self) -> String {
        let mut ser = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &self.pairs {
            ser.append_pair(k, v);
        }
        ser.finish()
    }
}

impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.pairs.iter().map(|(k, _)| k))
            .finish()
    }
}

#[cfg(test)]
mod prop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_encoding_table() {
        let cases = [
            (
                "ssh-ed25519 AAAA user@host",
                "ssh-ed25519%20AAAA%20user%40host",
            ),
            ("a+b=c", "a%2Bb%3Dc"),
            ("k1\nk2", "k1%0Ak2"),
            ("x:y/z", "x%3Ay%2Fz"),
            ("safe-._~", "safe-._~"),
            ("é", "%C3%A9"),
        ];
        for (input, want) in cases {
            assert_eq!(strict_percent_encode(input), want, "{input:?}");
        }
    }

    #[test]
    fn sshkeys_are_double_encoded_on_the_wire() {
        let p = Params::new().text("sshkeys", strict_percent_encode("ssh-ed25519 AAAA+x= me@h"));
        assert_eq!(
            p.to_form(),
            "sshkeys=ssh-ed25519%2520AAAA%252Bx%253D%2520me%2540h"
        );
    }

    #[test]
    fn booleans_are_numbers_and_options_skip() {
        let p = Params::new()
            .flag("onboot", true)
            .flag("template", false)
            .opt_flag("start", None)
            .opt("name", None::<&str>)
            .opt("cores", Some(2))
            .text("delete", "net1,ide2");
        assert_eq!(
            p.to_form(),
            "onboot=1&template=0&cores=2&delete=net1%2Cide2"
        );
        assert_eq!(p.get("cores"), Some("2"));
    }

    #[test]
    fn debug_hides_values() {
        let p = Params::new()
            .text("ciuser", "ubuntu")
            .secret("cipassword", &Secret::new("s3cr3t-pw"));
        let dbg = format!("{p:?}");
        assert!(
            dbg.contains("cipassword") && !dbg.contains("s3cr3t"),
            "{dbg}"
        );
        assert_eq!(p.secrets().len(), 1);
    }

    #[test]
    fn set_replaces() {
        let mut p = Params::new().text("a", 1);
        p.set("a", "2");
        p.set("b", "3");
        assert_eq!(p.to_form(), "a=2&b=3");
    }
}
