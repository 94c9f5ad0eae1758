//! Memory (`memory`): MiB, written as a plain number; PVE 8.1+ also shows
//! the property form `current=2048`.

use crate::vm::propstring::Format;
use crate::vm::value::InvalidValue;

const FORMAT: Format = Format {
    what: "memory",
    default_key: Some("current"),
    aliases: &[],
};

/// Reads `2048` or `current=2048` (MiB).
pub fn parse_memory(s: &str) -> Result<u64, InvalidValue> {
    let mut p = FORMAT.parse(s)?;
    let err = |reason: &str| InvalidValue::new("memory", s, reason);
    if !p.pairs.is_empty() {
        return Err(err("unknown key"));
    }
    let current = p.default.take().ok_or_else(|| err("no size"))?;
    if !current.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err("not a whole number of MiB"));
    }
    current.parse().map_err(|_| err("out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms() {
        assert_eq!(parse_memory("4096"), Ok(4096));
        assert_eq!(parse_memory("current=1024"), Ok(1024));
        for bad in ["x", "", "+4", "current=1,x=2", "1024,current=2"] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }
}
