//! The HTTP face of the simulator: decoding requests the way pveproxy does,
//! the route table, and PVE's response and error shapes.

pub mod decode;
pub mod error;
pub mod multipart;
pub mod pipeline;
pub mod respond;
pub mod router;

use std::collections::BTreeMap;

use serde_json::Value;

pub use error::ApiError;

use crate::auth::Identity;

/// Validated parameters of one API call (path, query and body merged),
/// as strings; booleans are normalized to `"1"`/`"0"`.
#[derive(Clone, Debug, Default)]
pub struct Params(pub BTreeMap<String, String>);

impl Params {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// A boolean parameter; validation already made it `1` or `0`.
    pub fn flag(&self, key: &str) -> Option<bool> {
        self.get(key).map(|v| v == "1")
    }

    /// An `array` parameter's items.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.get(key)
            .map(|v| v.split('\0').map(str::to_owned).collect())
            .unwrap_or_default()
    }

    pub fn int(&self, key: &str) -> Option<i64> {
        self.get(key)
            .and_then(|v| v.trim_start_matches('+').parse().ok())
    }

    /// The VM ID of a path or body parameter (validated as pve-vmid).
    pub fn vmid(&self, key: &str) -> u32 {
        self.int(key)
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or_default()
    }

    pub fn node(&self) -> &str {
        self.get("node").unwrap_or_default()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }
}

/// One authenticated, validated API call as a handler sees it.
#[derive(Clone, Debug)]
pub struct Call {
    pub params: Params,
    pub identity: Identity,
    /// A fault rule asked for this call's config flock to time out.
    pub lock_timeout: bool,
    /// `METHOD /path/{template}` of the matched route, for task fault rules.
    pub route_key: String,
    /// The file part of a multipart upload.
    pub upload: Option<std::sync::Arc<multipart::FilePart>>,
}

/// A successful result: `{"data": ...}` plus `total` for task logs.
#[derive(Clone, Debug)]
pub struct Reply {
    pub data: Value,
    pub total: Option<usize>,
}

impl Reply {
    pub fn data(data: impl Into<Value>) -> Self {
        Self {
            data: data.into(),
            total: None,
        }
    }

    pub fn null() -> Self {
        Self::data(Value::Null)
    }
}

/// Errors per parameter, as in a 400 body.
pub type ParamErrors = BTreeMap<String, String>;
