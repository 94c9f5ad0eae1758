//! A string that never shows itself in logs, errors or `Debug` output.

use std::fmt;

/// A secret value: an API token secret, a password, a ticket, a CSRF token.
///
/// `Debug` and `Display` print `<redacted>`; the only way to read the value
/// is [`Secret::expose`], which makes every use greppable.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// Returns the value. Call this only where the value goes on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty (an unset secret).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Replaces every occurrence of any of `secrets` in `text` with `<redacted>`.
///
/// Server messages can echo request values (`type check ... failed - got
/// '<value>'`); this keeps a password the client sent out of the error it
/// builds from the answer.
pub(crate) fn redact(text: &str, secrets: &[Secret]) -> String {
    let mut out = text.to_owned();
    for secret in secrets {
        // Very short values would redact unrelated text and hide nothing.
        if secret.0.len() >= 4 && out.contains(secret.expose()) {
            out = out.replace(secret.expose(), "<redacted>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new("hunter2-very-secret");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert!(!format!("{s}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2-very-secret");
    }

    #[test]
    fn redact_replaces_every_occurrence() {
        let s = Secret::new("p4ssw0rd");
        let out = redact("got 'p4ssw0rd' and p4ssw0rd again", &[s]);
        assert_eq!(out, "got '<redacted>' and <redacted> again");
        // Values too short to be meaningful are left alone.
        let tiny = Secret::new("ab");
        assert_eq!(redact("abc", &[tiny]), "abc");
    }
}
