//! Properties of the Go duration parser: no panic on any text; every
//! duration written as Go writes them reads as its exact nanoseconds (Go's
//! own truncation of fractions aside); the CRDs' pattern admits nothing the
//! parser cannot read short of Go's ~292-year bound.

use std::sync::LazyLock;

use proptest::prelude::*;
use regex::Regex;

use super::{MAX_NANOS, go_duration};
use crate::api::provider_config::GO_DURATION;

const UNITS: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// One term: whole part, fraction digits, unit.
fn term() -> impl Strategy<Value = (u64, String, (&'static str, u64))> {
    (
        0..100_000u64,
        r"([0-9]{1,6})?",
        prop::sample::select(UNITS.to_vec()),
    )
}

/// The exact nanoseconds of a term, fraction truncated, with u128 room.
fn exact((whole, frac, (_, unit)): &(u64, String, (&str, u64))) -> u128 {
    let mut nanos = u128::from(*whole) * u128::from(*unit);
    if let Ok(numerator) = frac.parse::<u128>() {
        nanos += numerator * u128::from(*unit) / 10u128.pow(u32::try_from(frac.len()).unwrap_or(0));
    }
    nanos
}

fn written((whole, frac, (unit, _)): &(u64, String, (&str, u64))) -> String {
    if frac.is_empty() {
        format!("{whole}{unit}")
    } else {
        format!("{whole}.{frac}{unit}")
    }
}

proptest! {
    #[test]
    fn prop_any_text_parses_or_is_refused_without_panic(
        text in prop_oneof![any::<String>(), r"[+-]?([0-9.]{0,22}(ns|us|ms|s|m|h|d|µs|-)?){0,4}"],
    ) {
        let _ = go_duration(&text);
    }

    #[test]
    fn prop_written_durations_read_exactly(terms in prop::collection::vec(term(), 1..5), plus in any::<bool>()) {
        let text = format!("{}{}", if plus { "+" } else { "" }, terms.iter().map(written).collect::<String>());
        let want: u128 = terms.iter().map(exact).sum();
        let got = go_duration(&text).map(|d| d.as_nanos());
        prop_assert!(got.is_some(), "{:?} refused", text);
        // Go computes each fraction in floating point: at most 1 ns per term off.
        let got = got.unwrap_or_default();
        let off = got.abs_diff(want);
        prop_assert!(off <= terms.len() as u128, "{:?}: {} ns, want {}", text, got, want);
    }

    /// What the API server's pattern admits reads as its exact value, or
    /// is refused for being beyond Go's largest duration (which `duration()`
    /// in the CEL bound refuses as well).
    #[test]
    fn prop_the_crd_pattern_admits_only_readable_durations(
        text in r"([0-9]{1,11}(\.[0-9]{1,4})?(ms|s|m|h)){1,3}",
    ) {
        static PATTERN: LazyLock<Regex> = LazyLock::new(|| Regex::new(GO_DURATION).unwrap());
        static TERM: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"([0-9]+)(?:\.([0-9]+))?(ms|s|m|h)").unwrap());
        prop_assert!(PATTERN.is_match(&text));
        let mut want: u128 = 0;
        let mut terms: u128 = 0;
        for c in TERM.captures_iter(&text) {
            let unit = UNITS.iter().find(|(u, _)| *u == &c[3]).copied().unwrap_or(("", 0));
            let whole = c[1].parse().map_err(|_| TestCaseError::fail("whole"))?;
            let frac = c.get(2).map_or("", |m| m.as_str()).to_owned();
            want += exact(&(whole, frac, unit));
            terms += 1;
        }
        match go_duration(&text) {
            Some(d) => prop_assert!(d.as_nanos().abs_diff(want) <= terms, "{:?}: {:?}", text, d),
            None => prop_assert!(want + terms > u128::from(MAX_NANOS), "{:?} admitted by the CRD but not read", text),
        }
    }

    #[test]
    fn prop_go_bounds(extra in 1..1_000_000_000u64) {
        prop_assert_eq!(go_duration(&format!("{MAX_NANOS}ns")).map(|d| d.as_nanos()), Some(u128::from(MAX_NANOS)));
        prop_assert_eq!(go_duration(&format!("{}ns", u128::from(MAX_NANOS) + u128::from(extra))), None);
        prop_assert_eq!(go_duration(&format!("-{extra}ns")), None);
    }
}
