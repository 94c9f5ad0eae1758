//! Request decoding as pve-http-server does it: query string for every
//! method, plus a form or JSON body for POST/PUT.

use std::collections::BTreeMap;

use serde_json::Value;

/// A parameter value before validation. JSON bodies keep their types,
/// because PVE accepts JSON `true`/`false` only for boolean parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum RawValue {
    Text(String),
    Bool(bool),
    /// A JSON array of scalars, or a key repeated in a form: the value of
    /// an `array` parameter (a scalar parameter takes the last item).
    List(Vec<String>),
    /// A JSON object or nested array: never valid for a scalar parameter.
    Structured(&'static str),
}

impl RawValue {
    /// The text form for logging.
    pub fn display(&self) -> String {
        match self {
            Self::Text(t) => t.clone(),
            Self::Bool(b) => b.to_string(),
            Self::List(items) => items.join(" "),
            Self::Structured(kind) => format!("<{kind}>"),
        }
    }
}

pub type RawParams = BTreeMap<String, RawValue>;

/// Why a body could not be decoded (an HTTP 400 in PVE).
#[derive(Debug, PartialEq, Eq)]
pub struct BodyError(pub String);

/// Percent-decodes a value once (invalid UTF-8 becomes U+FFFD), like
/// pve-http-server's `uri_unescape`.
pub fn uri_unescape(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Decodes `a=1&b=2` (also `;`-separated, `+` for space), last value wins.
pub fn urlencoded(data: &str, into: &mut RawParams) {
    for pair in data.split(['&', ';']) {
        for (k, v) in url::form_urlencoded::parse(pair.as_bytes()) {
            if !pair.contains('=') {
                continue;
            }
            let v = v.into_owned();
            match into.get_mut(k.as_ref()) {
                Some(RawValue::List(items)) => items.push(v),
                Some(RawValue::Text(first)) => {
                    let first = std::mem::take(first);
                    into.insert(k.into_owned(), RawValue::List(vec![first, v]));
                }
                _ => {
                    into.insert(k.into_owned(), RawValue::Text(v));
                }
            }
        }
    }
}

/// Decodes a POST/PUT body according to its content type.
pub fn body(
    content_type: Option<&str>,
    body: &[u8],
    into: &mut RawParams,
) -> Result<(), BodyError> {
    if body.is_empty() {
        return Ok(());
    }
    let ct = content_type.unwrap_or("application/x-www-form-urlencoded");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "application/json" => {
            let value: Value = serde_json::from_slice(body)
                .map_err(|e| BodyError(format!("unable to parse JSON body - {e}")))?;
            let Value::Object(map) = value else {
                return Err(BodyError("JSON body must be an object".into()));
            };
            for (k, v) in map {
                let raw = match v {
                    Value::Null => continue,
                    Value::Bool(b) => RawValue::Bool(b),
                    Value::Number(n) => RawValue::Text(n.to_string()),
                    Value::String(s) => RawValue::Text(s),
                    Value::Array(items) => match items
                        .iter()
                        .map(|i| match i {
                            Value::String(s) => Some(s.clone()),
                            Value::Number(n) => Some(n.to_string()),
                            _ => None,
                        })
                        .collect::<Option<Vec<_>>>()
                    {
                        Some(list) => RawValue::List(list),
                        None => RawValue::Structured("ARRAY"),
                    },
                    Value::Object(_) => RawValue::Structured("HASH"),
                };
                into.insert(k, raw);
            }
            Ok(())
        }
        "application/x-www-form-urlencoded" => {
            let text = std::str::from_utf8(body)
                .map_err(|_| BodyError("body is not valid UTF-8".into()))?;
            urlencoded(text, into);
            Ok(())
        }
        other => Err(BodyError(format!("unsupported content type '{other}'"))),
    }
}

#[cfg(test)]
mod prop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_decoding_matches_pve() {
        let mut p = RawParams::new();
        urlencoded("a=1;b=x+y&sshkeys=ssh-ed25519%2520AAAA&flag", &mut p);
        assert_eq!(p["a"], RawValue::Text("1".into()));
        assert_eq!(p["b"], RawValue::Text("x y".into()));
        // Decoded once: the value stays percent-encoded for the sshkeys check.
        assert_eq!(p["sshkeys"], RawValue::Text("ssh-ed25519%20AAAA".into()));
        assert!(!p.contains_key("flag"));
    }

    #[test]
    fn json_keeps_booleans() {
        let mut p = RawParams::new();
        body(
            Some("application/json"),
            br#"{"full":true,"vmid":100,"name":"x"}"#,
            &mut p,
        )
        .unwrap();
        assert_eq!(p["full"], RawValue::Bool(true));
        assert_eq!(p["vmid"], RawValue::Text("100".into()));
    }
}
