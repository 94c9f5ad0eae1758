//! Go's `time.ParseDuration`, for the durations of provider configs, the
//! `crossplane.io/poll-interval` annotation and `--poll-interval`.
//!
//! Written here rather than taken from `kube::core::Duration`, whose parser
//! panics on input a user can type (`1s-1s`, `99999999999999999999h`): an
//! annotation is not checked by any schema, so the parser must refuse
//! anything, never panic.

use std::time::Duration;

/// Go's largest duration, in nanoseconds (`1<<63 - 1`, about 292 years).
const MAX_NANOS: u64 = i64::MAX as u64;

/// A non-negative Go duration (`3s`, `1m30s`, `1.5h`, `0`): what Go's
/// `time.ParseDuration` accepts, except negative values. `None` for
/// anything else, including values beyond Go's ~292 years.
pub fn go_duration(text: &str) -> Option<Duration> {
    let s = text.strip_prefix('+').unwrap_or(text);
    if s.starts_with('-') {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let (nanos, after) = term(rest)?;
        total = total.checked_add(nanos).filter(|t| *t <= MAX_NANOS)?;
        rest = after;
    }
    Some(Duration::from_nanos(total))
}

/// One `<number><unit>` term: its nanoseconds and the text after it.
fn term(s: &str) -> Option<(u64, &str)> {
    let (whole, after_whole) = leading_int(s)?;
    let has_whole = after_whole.len() != s.len();
    let (frac, scale, after_number, has_frac) = match after_whole.strip_prefix('.') {
        Some(f) => {
            let (frac, scale, rest) = leading_fraction(f);
            (frac, scale, rest, rest.len() != f.len())
        }
        None => (0, 1.0, after_whole, false),
    };
    if !has_whole && !has_frac {
        return None;
    }
    let unit_end = after_number
        .find(|c: char| c == '.' || c.is_ascii_digit())
        .unwrap_or(after_number.len());
    let (unit, rest) = after_number.split_at(unit_end);
    let unit = unit_nanos(unit)?;
    let mut nanos = whole.checked_mul(unit)?;
    if frac > 0 {
        // Go computes the fraction in floating point, then truncates.
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let part = (frac as f64 * (unit as f64 / scale)) as u64;
        nanos = nanos.checked_add(part)?;
    }
    (nanos <= MAX_NANOS).then_some((nanos, rest))
}

/// The value of one more decimal digit, within Go's bound `1<<63`.
fn push_digit(x: u64, digit: u8) -> Option<u64> {
    const LIMIT: u64 = 1 << 63;
    if x > LIMIT / 10 {
        return None;
    }
    Some(x * 10 + u64::from(digit - b'0')).filter(|y| *y <= LIMIT)
}

/// Leading ASCII digits as an integer; `None` on overflow (Go's `leadingInt`).
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let x = s[..end].bytes().try_fold(0, push_digit)?;
    Some((x, &s[end..]))
}

/// Leading digits of a fraction: value and scale, precision dropped past
/// what fits (Go's `leadingFraction`).
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut x: u64 = 0;
    let mut scale = 1.0;
    for b in s[..end].bytes() {
        let Some(y) = push_digit(x, b) else { break };
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        // U+00B5 micro sign and U+03BC Greek mu, as Go accepts both.
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

#[cfg(test)]
mod prop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        let ns = Duration::from_nanos;
        let cases = [
            ("0", Some(Duration::ZERO)),
            ("0s", Some(Duration::ZERO)),
            ("+5s", Some(Duration::from_secs(5))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("1.5h", Some(Duration::from_secs(5400))),
            (".5s", Some(Duration::from_millis(500))),
            ("1.s", Some(Duration::from_secs(1))),
            ("1h1h", Some(Duration::from_secs(7200))),
            ("3\u{b5}s4ns", Some(ns(3004))),
            ("2562047h47m16.854775807s", Some(ns(i64::MAX as u64))),
            ("2562047h47m16.854775808s", None),
            ("9999999999999999999h", None),
            ("1s-1s", None),
            ("-1s", None),
            ("", None),
            ("s", None),
            (".s", None),
            ("1", None),
            ("1d", None),
            ("1e3s", None),
            ("inf", None),
        ];
        for (text, want) in cases {
            assert_eq!(go_duration(text), want, "{text:?}");
        }
    }
}
