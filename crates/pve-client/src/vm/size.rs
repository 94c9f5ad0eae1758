//! Disk sizes as PVE writes and reads them (pve-common's `format_size` and
//! `parse_size`): `N[.N]` with an optional binary unit `K`/`M`/`G`/`T` (or
//! `KiB`/`MiB`/`GiB`/`TiB`, PVE 9), no unit meaning bytes.

use std::fmt;
use std::str::FromStr;

use crate::vm::value::InvalidValue;

const UNITS: [(&str, u64); 8] = [
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("K", 1 << 10),
    ("M", 1 << 20),
    ("G", 1 << 30),
    ("T", 1 << 40),
];

/// Fraction digits that are read; more cannot change a whole byte count of
/// any size PVE handles, and keep the arithmetic in `u128`.
const FRACTION_DIGITS: usize = 24;

/// Reads `3584M`, `32G`, `1.5G`, `4GiB`, `4096` (bytes) into bytes. Like PVE,
/// units are upper case, nothing around the number is allowed, and a
/// fraction of a byte is dropped (`0.5K` is 512, `1.0001K` is 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let (number, factor) = UNITS
        .iter()
        .find_map(|(unit, f)| s.strip_suffix(unit).map(|n| (n, *f)))
        .unwrap_or((s, 1));
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (number, None),
    };
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !fraction.is_none_or(digits) {
        return None;
    }
    let factor = u128::from(factor);
    let mut bytes = whole.parse::<u128>().ok()?.checked_mul(factor)?;
    if let Some(fraction) = fraction {
        let fraction = &fraction[..fraction.len().min(FRACTION_DIGITS)];
        let numerator: u128 = fraction.parse().ok()?;
        let denominator = 10u128.pow(u32::try_from(fraction.len()).ok()?);
        bytes = bytes.checked_add(numerator * factor / denominator)?;
    }
    u64::try_from(bytes).ok()
}

/// Writes bytes with the largest unit that divides them exactly, as PVE
/// writes `size=`: 32 GiB → `32G`, 3.5 GiB → `3584M`, 1000 → `1000`. Zero
/// is `0T`, which is what PVE's loop makes of it.
pub fn format_size(bytes: u64) -> String {
    for (unit, factor) in UNITS.iter().rev().take(4) {
        if bytes.is_multiple_of(*factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    bytes.to_string()
}

/// The `size` argument of `PUT .../resize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskSize {
    /// Grow by this many bytes (`+N`).
    Grow(u64),
    /// Set to this many bytes (must not shrink; PVE refuses).
    To(u64),
}

impl fmt::Display for DiskSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskSize::Grow(b) => write!(f, "+{}", format_size(*b)),
            DiskSize::To(b) => f.write_str(&format_size(*b)),
        }
    }
}

impl FromStr for DiskSize {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidValue::new("disk size", s, "not [+]N[.N][KMGT]");
        match s.strip_prefix('+') {
            Some(grow) => parse_size(grow).map(DiskSize::Grow).ok_or_else(invalid),
            None => parse_size(s).map(DiskSize::To).ok_or_else(invalid),
        }
    }
}

/// Bytes in `n` GiB.
pub const fn gib(n: u64) -> u64 {
    n << 30
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let cases = [
            ("3584M", Some(3584 << 20)),
            ("32G", Some(32 << 30)),
            ("32GiB", Some(32 << 30)),
            ("4M", Some(4 << 20)),
            ("1T", Some(1 << 40)),
            ("512K", Some(512 << 10)),
            ("4096", Some(4096)),
            ("1.5G", Some(3 << 29)),
            ("0.5K", Some(512)),
            ("1.0001K", Some(1024)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("16777216T", None),
            ("32g", None),
            (" 32G", None),
            ("", None),
            ("G", None),
            ("1.G", None),
            (".5G", None),
            ("12X", None),
            ("-1G", None),
            ("1,5G", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_size(input), want, "{input:?}");
        }
    }

    #[test]
    fn format_table_and_round_trip() {
        let cases = [
            (32 << 30, "32G"),
            (3584 << 20, "3584M"),
            (1 << 40, "1T"),
            (512 << 10, "512K"),
            (1000, "1000"),
            (0, "0T"),
        ];
        for (bytes, want) in cases {
            assert_eq!(format_size(bytes), want);
            assert_eq!(parse_size(want), Some(bytes));
        }
        assert_eq!(DiskSize::Grow(gib(8)).to_string(), "+8G");
        assert_eq!(DiskSize::To(gib(40)).to_string(), "40G");
        assert_eq!("+8G".parse(), Ok(DiskSize::Grow(gib(8))));
        assert!("+".parse::<DiskSize>().is_err());
    }
}
