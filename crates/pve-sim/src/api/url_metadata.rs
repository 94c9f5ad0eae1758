//! `GET /nodes/{node}/query-url-metadata`: pve-manager's
//! `query_url_metadata` sends a `HEAD` to the URL and answers what the
//! headers say (`Content-Length` as `size`, the file name from
//! `Content-Disposition` or the path, `Content-Type` without parameters).
//! Here the URL registry stands in for the server, so the size agrees with
//! what a `download-url` of the same URL then writes.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::control::urls::host_of;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::Param;
use crate::schema::qemu::NODE;

pub const PARAMS: &[Param] = &[
    NODE,
    Param::string("url").pattern("https?://.*"),
    Param::boolean("verify-certificates").opt(),
];

pub async fn query(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let p = &call.params;
    let node = p.node().to_owned();
    // The same permission check as download-url's network half.
    super::download::may_access_network(&inst, &call.identity, &node)?;
    let url = p.get("url").unwrap_or_default().to_owned();
    let resolved = inst.urls().resolve(&url);
    if resolved.error.is_some() {
        // LWP's status line for a host that does not resolve.
        return Err(ApiError::internal(format!(
            "invalid server response: '500 Can't connect to {}:443 (Name or service not known)'\n",
            host_of(&url)
        )));
    }
    let mut out = Map::new();
    if let Some(file) = url
        .split(['?', '#'])
        .next()
        .and_then(|path| path.rsplit_once('/'))
        .map(|(_, file)| file)
        .filter(|f| !f.is_empty())
    {
        out.insert("filename".to_owned(), json!(file));
    }
    if let Some(size) = resolved.content_length {
        out.insert("size".to_owned(), json!(size));
    }
    out.insert("mimetype".to_owned(), json!("application/octet-stream"));
    Ok(Reply::data(Value::Object(out)))
}
