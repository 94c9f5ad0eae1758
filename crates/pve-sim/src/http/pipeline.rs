//! The path of one request through the simulator, in pveproxy's order:
//! control API, URI format, injected faults, body checks, authentication,
//! routing (501), parameter validation (400), node lookup, handler.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response};

use super::decode::{self, RawParams};
use super::respond::{self, Body};
use super::router::{self, Access};
use super::{ApiError, Call};
use crate::auth::Identity;
use crate::clock::Clock;
use crate::control::{self, traffic};
use crate::instance::Instance;
use crate::schema;

/// The request body limit of pve-http-server.
const MAX_BODY: usize = 512 * 1024;

/// Returned instead of a response to make hyper drop the connection.
#[derive(Debug)]
pub struct ConnectionReset;

impl std::fmt::Display for ConnectionReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("pve-sim: injected connection reset")
    }
}

impl std::error::Error for ConnectionReset {}

pub async fn serve(
    inst: Arc<Instance>,
    req: Request<Incoming>,
) -> Result<Response<Body>, ConnectionReset> {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let headers = req.headers().clone();
    let body: Bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(respond::text(
                413,
                "Request Entity Too Large",
                "request too large",
            ));
        }
    };

    if path == "/_sim" || path.starts_with("/_sim/") {
        return Ok(control::handle(&inst, &method, &path, &query, &body));
    }
    let Some(rel) = path
        .strip_prefix("/api2/json")
        .filter(|r| r.is_empty() || r.starts_with('/'))
    else {
        return Ok(respond::text(501, "no such uri", "no such uri"));
    };
    let rel = if rel.is_empty() { "/" } else { rel };

    let mut entry = traffic::Entry {
        seq: 0,
        time: Clock::epoch_f64(),
        method: method.clone(),
        path: rel.to_owned(),
        route: router::template_of(&inst.routes, rel).map(str::to_owned),
        params: BTreeMap::new(),
        status: 0,
        user: None,
    };
    let result = process(&inst, &method, rel, &query, &headers, &body, &mut entry).await;
    entry.status = match &result {
        Ok(_) => 200,
        Err(e) => e.status_code(),
    };
    inst.traffic().record(entry);
    match result {
        Ok(reply) => Ok(respond::reply(&reply)),
        Err(ApiError::Reset) => Err(ConnectionReset),
        Err(e) => Ok(respond::error(&e)),
    }
}

async fn process(
    inst: &Arc<Instance>,
    method: &str,
    rel: &str,
    query: &str,
    headers: &hyper::HeaderMap,
    body: &[u8],
    entry: &mut traffic::Entry,
) -> Result<super::Reply, ApiError> {
    let template = entry.route.clone().unwrap_or_else(|| rel.to_owned());
    let faults = inst.faults().on_request(method, &template);
    if let Some(latency) = faults.latency {
        tokio::time::sleep(latency).await;
    }
    if let Some(err) = faults.error {
        return Err(err);
    }

    let mut raw = RawParams::new();
    decode::urlencoded(query, &mut raw);
    if !body.is_empty() {
        if method == "GET" || method == "DELETE" {
            return Err(ApiError::NotImplemented(format!(
                "Unexpected content for method '{method}'"
            )));
        }
        let ct = headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let mut body_params = RawParams::new();
        decode::body(ct, body, &mut body_params).map_err(|e| ApiError::Status {
            code: 400,
            reason: e.0,
        })?;
        // Query parameters win over body parameters, like pve-http-server.
        body_params.append(&mut raw);
        raw = body_params;
    }
    // The ExtJS cache buster is dropped before validation, as pveproxy does.
    raw.remove("_dc");
    entry.params = traffic::redact(raw.iter().map(|(k, v)| (k.clone(), v.display())));

    let found = router::find(&inst.routes, method, rel);
    let identity = match found.as_ref().map(|(r, _)| r.access) {
        Some(Access::World) => Identity::anonymous(),
        _ => match inst.auth.authenticate(headers, method) {
            Ok(id) => id,
            Err(e) => {
                inst.clock.sleep(inst.durations.auth_failure_delay).await;
                return Err(e);
            }
        },
    };
    if !identity.user.is_empty() {
        entry.user = Some(identity.full());
    }
    let Some((route, vars)) = found else {
        return Err(ApiError::NotImplemented(format!(
            "Method '{method} {rel}' not implemented"
        )));
    };
    for (k, v) in vars {
        raw.insert(k, decode::RawValue::Text(v));
    }
    entry.params = traffic::redact(raw.iter().map(|(k, v)| (k.clone(), v.display())));
    let params = schema::validate(route.params(), &raw).map_err(ApiError::Param)?;
    if let Some(node) = params.get("node")
        && !inst.cluster().has_node(node)
    {
        return Err(ApiError::internal(format!(
            "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
        )));
    }
    let call = Call {
        params,
        identity,
        lock_timeout: faults.lock_timeout,
        route_key: format!("{method} {}", route.path),
    };
    let result = (route.handler)(inst.clone(), call).await;
    if matches!(result, Err(ApiError::LoginFailed)) {
        inst.clock.sleep(inst.durations.auth_failure_delay).await;
    }
    if faults.null_data {
        // The work is done (a task may be running), but the answer lost its data.
        return result.map(|_| super::Reply::null());
    }
    result
}
