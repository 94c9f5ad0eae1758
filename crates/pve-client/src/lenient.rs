//! Lenient decoding of PVE's loosely typed JSON.
//!
//! The schema says integer, the server sends `"100"` (`/cluster/nextid`);
//! booleans arrive as `0`/`1`; config values are numbers or strings
//! depending on the key and version. These helpers accept every form seen.

use serde::{Deserialize, Deserializer};

/// A JSON scalar as PVE writes it in a config or status object, rendered as
/// the string PVE would print.
pub(crate) fn scalar_to_string(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_owned()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// `u64` from a number or a numeric string.
pub(crate) fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_u64))
}

/// `u64` from a number or a numeric string (required).
pub(crate) fn u64_any<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    value_u64(&v)
        .ok_or_else(|| serde::de::Error::custom(format!("expected an unsigned integer, got {v}")))
}

pub(crate) fn value_u64(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        }),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `bool` from `0`/`1`, `"0"`/`"1"` or `true`/`false`.
pub(crate) fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_bool))
}

/// `bool` defaulting to false.
pub(crate) fn bool_any<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(opt_bool(d)?.unwrap_or(false))
}

pub(crate) fn value_bool(v: &serde_json::Value) -> Option<bool> {
    match v {
        serde_json::Value::Bool(b) => Some(*b),
        serde_json::Value::Number(n) => n.as_i64().map(|i| i != 0),
        serde_json::Value::String(s) => match s.trim() {
            "1" | "true" | "yes" | "on" => Some(true),
            "0" | "false" | "no" | "off" | "" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// `f64` from a number or numeric string.
pub(crate) fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(match v {
        Some(serde_json::Value::Number(n)) => n.as_f64(),
        Some(serde_json::Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_and_strings() {
        assert_eq!(value_u64(&json!("100")), Some(100));
        assert_eq!(value_u64(&json!(100)), Some(100));
        assert_eq!(value_u64(&json!(100.0)), Some(100));
        assert_eq!(value_u64(&json!(-1)), None);
        assert_eq!(value_u64(&json!("x")), None);
        assert_eq!(value_bool(&json!(1)), Some(true));
        assert_eq!(value_bool(&json!("0")), Some(false));
        assert_eq!(value_bool(&json!(true)), Some(true));
        assert_eq!(value_bool(&json!("maybe")), None);
        assert_eq!(scalar_to_string(&json!(2048)), Some("2048".into()));
        assert_eq!(scalar_to_string(&json!(null)), None);
    }
}
