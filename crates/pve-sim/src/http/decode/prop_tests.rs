//! Properties of the request decoder: no panic on any query string, body
//! or content type, and every form or JSON body a client can encode decodes
//! to the parameters it was encoded from.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{RawParams, RawValue, body, uri_unescape, urlencoded};

fn content_type() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![
        Just("application/json".to_owned()),
        Just("application/x-www-form-urlencoded; charset=UTF-8".to_owned()),
        Just("Application/JSON;charset=utf-8".to_owned()),
        any::<String>(),
    ])
}

/// A JSON parameter value and what the decoder must make of it (`None`:
/// dropped, as PVE drops JSON nulls).
fn json_value() -> impl Strategy<Value = (Value, Option<RawValue>)> {
    prop_oneof![
        any::<String>().prop_map(|s| (json!(s), Some(RawValue::Text(s)))),
        any::<bool>().prop_map(|b| (json!(b), Some(RawValue::Bool(b)))),
        any::<i64>().prop_map(|n| (json!(n), Some(RawValue::Text(n.to_string())))),
        Just((Value::Null, None)),
        // An array of scalars is a list parameter (repeated form keys);
        // anything nested stays a structure the schema check refuses.
        Just((
            json!([1, "a"]),
            Some(RawValue::List(vec!["1".into(), "a".into()]))
        )),
        Just((json!([[1]]), Some(RawValue::Structured("ARRAY")))),
        Just((json!({"a": 1}), Some(RawValue::Structured("HASH")))),
    ]
}

proptest! {
    #[test]
    fn prop_any_body_decodes_or_is_refused_without_panic(
        ct in content_type(),
        data in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut params = RawParams::new();
        let _ = body(ct.as_deref(), &data, &mut params);
    }

    #[test]
    fn prop_any_query_decodes_without_panic(query in any::<String>()) {
        let mut params = RawParams::new();
        urlencoded(&query, &mut params);
        let _ = uri_unescape(&query);
    }

    /// Bytes that are mostly form syntax: `=`, `&`, `;`, `+`, `%` and hex.
    #[test]
    fn prop_form_like_bytes_decode_without_panic(query in r"([a-z=&;+%0-9A-F]|%[0-9a-fA-F]{0,2}){0,40}") {
        let mut params = RawParams::new();
        prop_assert!(body(None, query.as_bytes(), &mut params).is_ok());
    }

    #[test]
    fn prop_form_bodies_round_trip(pairs in prop::collection::btree_map(any::<String>(), any::<String>(), 0..8)) {
        let mut ser = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &pairs {
            ser.append_pair(k, v);
        }
        let mut params = RawParams::new();
        body(Some("application/x-www-form-urlencoded"), ser.finish().as_bytes(), &mut params)
            .map_err(|e| TestCaseError::fail(e.0))?;
        let want: RawParams = pairs.into_iter().map(|(k, v)| (k, RawValue::Text(v))).collect();
        prop_assert_eq!(params, want);
    }

    /// A repeated query key keeps every value in order: an `array`
    /// parameter takes them all, a scalar one the last (the schema check),
    /// as in pve-http-server.
    #[test]
    fn prop_repeated_query_keys_keep_every_value(key in "[a-z]{1,6}", first in any::<String>(), last in any::<String>()) {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .append_pair(&key, &first)
            .append_pair(&key, &last)
            .finish();
        let mut params = RawParams::new();
        urlencoded(&query, &mut params);
        prop_assert_eq!(params.get(&key), Some(&RawValue::List(vec![first, last])));
    }

    #[test]
    fn prop_json_bodies_round_trip(values in prop::collection::btree_map(any::<String>(), json_value(), 0..8)) {
        let object: serde_json::Map<String, Value> =
            values.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect();
        let bytes = serde_json::to_vec(&object).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut params = RawParams::new();
        body(Some("application/json"), &bytes, &mut params).map_err(|e| TestCaseError::fail(e.0))?;
        let want: RawParams = values.into_iter().filter_map(|(k, (_, raw))| Some((k, raw?))).collect();
        prop_assert_eq!(params, want);
    }

    /// A JSON body that is valid JSON but not an object is a 400, not a panic.
    #[test]
    fn prop_json_non_objects_are_refused(v in prop_oneof![
        any::<String>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        Just(json!([1, 2])),
        Just(Value::Null),
    ]) {
        let bytes = serde_json::to_vec(&v).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut params = RawParams::new();
        prop_assert!(body(Some("application/json"), &bytes, &mut params).is_err());
    }
}
