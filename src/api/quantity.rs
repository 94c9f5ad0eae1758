//! Kubernetes quantities (`512Mi`, `32Gi`, `1.5G`) for memory and disk sizes.
//!
//! The API server checks the syntax with CEL (`isQuantity`); this module turns
//! a quantity into bytes for comparisons with what Proxmox reports.

use std::{borrow::Cow, fmt};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A Kubernetes quantity written as a string, such as `512Mi` or `32Gi`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(transparent)]
pub struct Quantity(pub String);

/// Why a quantity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a byte quantity: {why}")]
pub struct QuantityError {
    value: String,
    why: &'static str,
}

impl Quantity {
    /// The quantity in bytes, rounded up to a whole byte.
    pub fn bytes(&self) -> Result<u64, QuantityError> {
        parse_bytes(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "maxLength": 32,
            "x-kubernetes-validations": [{
                "rule": "isQuantity(self) && quantity(self).compareTo(quantity('0')) > 0",
                "message": "must be a positive Kubernetes quantity such as 512Mi, 4Gi or 32G",
            }],
        })
    }
}

/// Parses a Kubernetes quantity (`<number><suffix>`) into bytes, rounding up.
///
/// Suffixes: binary `Ki Mi Gi Ti Pi Ei`, decimal `k M G T P E`, milli `m`,
/// or a decimal exponent `e<n>`/`E<n>`. Negative values are refused.
pub fn parse_bytes(input: &str) -> Result<u64, QuantityError> {
    let err = |why| QuantityError {
        value: input.to_owned(),
        why,
    };
    let s = input.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(err("negative"));
    }
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return Err(err("no number"));
    }
    // value = digits / 10^frac_len * multiplier * 10^exp10
    let digits: u128 = format!("{whole}{frac}")
        .parse()
        .map_err(|_| err("number too long"))?;
    let mut exp10 = -(i32::try_from(frac.len()).map_err(|_| err("number too long"))?);
    let multiplier: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "m" => {
            exp10 -= 3;
            1
        }
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        e if e.starts_with(['e', 'E']) => {
            exp10 += e[1..].parse::<i32>().map_err(|_| err("bad exponent"))?;
            1
        }
        _ => return Err(err("unknown suffix")),
    };
    let scaled = digits.checked_mul(multiplier).ok_or(err("too large"))?;
    let pow = |e: i32| 10u128.checked_pow(e.unsigned_abs());
    let bytes = if exp10 >= 0 {
        pow(exp10)
            .and_then(|p| scaled.checked_mul(p))
            .ok_or(err("too large"))?
    } else {
        // A divisor beyond u128 leaves less than one byte: rounded up, 1
        // (`1e-400` is tiny, not too large).
        pow(exp10).map_or(u128::from(scaled > 0), |p| scaled.div_ceil(p))
    };
    u64::try_from(bytes).map_err(|_| err("too large"))
}

/// Bytes for people: `2.2 GiB`, `512 MiB`, `100 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let text = format!("{value:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text} {}", UNITS[unit])
}

#[cfg(test)]
mod prop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_people_write() {
        let cases = [
            ("0", 0),
            ("1024", 1024),
            ("1Ki", 1024),
            ("512Mi", 512 << 20),
            ("32Gi", 32 << 30),
            ("1.5Gi", 3 << 29),
            ("2Ti", 2 << 40),
            ("1k", 1000),
            ("10G", 10_000_000_000),
            ("1e3", 1000),
            ("2E6", 2_000_000),
            ("1500m", 2),
            ("0.5", 1),
            ("+4Mi", 4 << 20),
            ("1e-400", 1),
            ("0e-400", 0),
        ];
        for (text, want) in cases {
            assert_eq!(parse_bytes(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_byte_count() {
        for text in [
            "",
            "Gi",
            "-1Gi",
            "12XB",
            "1.2.3Gi",
            "99999999999999Ei",
            "1e",
        ] {
            assert!(parse_bytes(text).is_err(), "{text} should fail");
        }
    }

    #[test]
    fn prints_bytes_for_people() {
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_bytes(512 << 20), "512 MiB");
        assert_eq!(human_bytes(2_361_393_152), "2.2 GiB");
        assert_eq!(human_bytes(10 << 30), "10 GiB");
    }
}
