//! Disk sizes as PVE writes them: `[+]N[.N][KMGT]` (binary units; no unit
//! means bytes).

use std::fmt;

const UNITS: [(char, u64); 4] = [
    ('T', 1 << 40),
    ('G', 1 << 30),
    ('M', 1 << 20),
    ('K', 1 << 10),
];

/// Parses `3584M`, `32G`, `1.5G`, `4096` (bytes) into bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (number, factor) = match s.chars().last()? {
        c if c.is_ascii_digit() => (s, 1),
        c => {
            let factor = UNITS
                .iter()
                .find(|(u, _)| u.eq_ignore_ascii_case(&c))
                .map(|(_, f)| *f)?;
            (&s[..s.len() - 1], factor)
        }
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(factor);
    }
    let value: f64 = number.parse().ok()?;
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    Some((value * factor as f64).round() as u64)
}

/// Renders bytes with the largest unit that divides them exactly, as PVE
/// does in `size=` options: 32 GiB → `32G`, 3.5 GiB → `3584M`.
pub fn format_size(bytes: u64) -> String {
    for (unit, factor) in UNITS {
        if bytes >= factor && bytes.is_multiple_of(factor) {
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
            ("32g", Some(32 << 30)),
            ("4M", Some(4 << 20)),
            ("1T", Some(1 << 40)),
            ("512K", Some(512 << 10)),
            ("4096", Some(4096)),
            ("1.5G", Some(3 << 29)),
            (" 2252M ", Some(2252 << 20)),
            ("", None),
            ("G", None),
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
            (0, "0"),
        ];
        for (bytes, want) in cases {
            assert_eq!(format_size(bytes), want);
            assert_eq!(parse_size(want), Some(bytes));
        }
        assert_eq!(DiskSize::Grow(gib(8)).to_string(), "+8G");
        assert_eq!(DiskSize::To(gib(40)).to_string(), "40G");
    }
}
