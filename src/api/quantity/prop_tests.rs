//! Properties of the quantity parser: no panic on any text, every quantity
//! written `<digits>[.<digits>]<suffix>` or `<digits>e<exp>` reads as its
//! exact byte count rounded up, and the bounds of u64 hold.

use proptest::prelude::*;

use super::parse_bytes;

const SUFFIXES: [(&str, u128); 13] = [
    ("", 1),
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
];

/// The exact value, rounded up to a byte: whole part times the multiplier
/// plus the fraction's share of it.
fn reference(whole: u64, frac: &str, multiplier: u128) -> Option<u64> {
    let mut bytes = u128::from(whole) * multiplier;
    if !frac.is_empty() {
        let numerator: u128 = frac.parse().ok()?;
        let denominator = 10u128.pow(u32::try_from(frac.len()).ok()?);
        bytes += (numerator * multiplier).div_ceil(denominator);
    }
    u64::try_from(bytes).ok()
}

proptest! {
    #[test]
    fn prop_any_text_parses_or_is_refused_without_panic(
        text in prop_oneof![any::<String>(), r"[+-]?[0-9.]{0,40}([eE][+-]?[0-9]{0,5}|[kKMGTPEim]i?)?"],
    ) {
        if let Err(e) = parse_bytes(&text) {
            prop_assert!(e.to_string().contains("is not a byte quantity"), "{}", e);
        }
    }

    #[test]
    fn prop_suffixed_quantities_read_exactly(
        whole in prop_oneof![0..1024u64, any::<u64>()],
        frac in r"([0-9]{1,9})?",
        (suffix, multiplier) in prop::sample::select(SUFFIXES.to_vec()),
    ) {
        let text = if frac.is_empty() { format!("{whole}{suffix}") } else { format!("{whole}.{frac}{suffix}") };
        let got = parse_bytes(&text).ok();
        prop_assert_eq!(got, reference(whole, &frac, multiplier), "{}", text);
    }

    #[test]
    fn prop_exponents_read_exactly(digits in 0..100_000u64, exp in -30..30i32) {
        let text = format!("{digits}e{exp}");
        let want = if exp >= 0 {
            u64::try_from(u128::from(digits) * 10u128.pow(exp.unsigned_abs())).ok()
        } else {
            u64::try_from(u128::from(digits).div_ceil(10u128.pow(exp.unsigned_abs()))).ok()
        };
        prop_assert_eq!(parse_bytes(&text).ok(), want, "{}", text);
    }

    /// Less than a byte rounds up to one, however small.
    #[test]
    fn prop_tiny_quantities_round_up(digits in 0..100_000u64, exp in 39..100_000u32) {
        let text = format!("{digits}e-{exp}");
        prop_assert_eq!(parse_bytes(&text), Ok(u64::from(digits > 0)), "{}", text);
    }

    /// Every value of u64 is a quantity; one more is too large.
    #[test]
    fn prop_u64_bounds(n in any::<u64>()) {
        prop_assert_eq!(parse_bytes(&n.to_string()), Ok(n));
        let over = u128::from(n) + u128::from(u64::MAX) + 1;
        prop_assert!(parse_bytes(&over.to_string()).is_err());
        let negative = format!("-{n}");
        prop_assert!(parse_bytes(&negative).is_err(), "{}", negative);
    }
}
