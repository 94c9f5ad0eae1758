//! The VM's notes (`description`).
//!
//! qemu-server keeps them as `#` comment lines at the top of the config
//! file: written line by line, read back with trailing whitespace removed.
//! So a description compares by its text without trailing whitespace.

use std::fmt;
use std::str::FromStr;

use crate::vm::value::InvalidValue;

/// At most this many characters (`maxLength`).
pub const MAX_DESCRIPTION: usize = 8192;

/// The VM's notes.
#[derive(Clone, Debug, Default)]
pub struct Description(String);

impl Description {
    /// The text as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text as PVE stores it (trailing whitespace removed).
    pub fn stored(&self) -> &str {
        self.0.trim_end()
    }
}

impl From<String> for Description {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl From<&str> for Description {
    fn from(text: &str) -> Self {
        Self(text.to_owned())
    }
}

impl PartialEq for Description {
    fn eq(&self, other: &Self) -> bool {
        self.stored() == other.stored()
    }
}

impl Eq for Description {}

impl FromStr for Description {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.chars().count() > MAX_DESCRIPTION {
            return Err(InvalidValue::new(
                "description",
                &s.chars().take(40).collect::<String>(),
                format!("longer than {MAX_DESCRIPTION} characters"),
            ));
        }
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Display for Description {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_whitespace_does_not_count() {
        assert_eq!(
            Description::from("notes\n\nmarker\n"),
            Description::from("notes\n\nmarker")
        );
        assert_ne!(Description::from(" a"), Description::from("a"));
        assert!(
            "x".repeat(MAX_DESCRIPTION + 1)
                .parse::<Description>()
                .is_err()
        );
    }
}
