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
use super::multipart;
use super::respond::{self, Body};
use super::router::{Access, Endpoint};
use super::{ApiError, Call};
use crate::auth::Identity;
use crate::clock::Clock;
use crate::control::{self, traffic};
use crate::instance::Instance;
use crate::schema;

/// A request body: bytes, or a streamed multipart upload's text fields
/// and file part.
#[derive(Default)]
struct Upload {
    bytes: Bytes,
    fields: Option<RawParams>,
    file: Option<Arc<super::multipart::FilePart>>,
}

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
    let upload_boundary = (method == "POST" && path.ends_with("/upload"))
        .then(|| {
            headers
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(multipart::boundary)
        })
        .flatten();
    let mut upload = Upload::default();
    let body: Bytes = if let Some(boundary) = upload_boundary {
        // Uploads stream (pve-http-server writes them to /var/tmp).
        let mut fields = RawParams::new();
        match multipart::read(req.into_body(), &boundary, &mut fields).await {
            Ok(file) => {
                upload = Upload {
                    fields: Some(fields),
                    file: file.map(Arc::new),
                    ..Upload::default()
                }
            }
            Err(e) => return Ok(respond::text(400, &e, &e)),
        }
        Bytes::new()
    } else {
        match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return Ok(respond::text(
                    413,
                    "Request Entity Too Large",
                    "request too large",
                ));
            }
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
        route: None,
        params: BTreeMap::new(),
        status: 0,
        user: None,
        agent: headers
            .get(hyper::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    upload.bytes = body;
    let result = process(&inst, &method, rel, &query, &headers, upload, &mut entry).await;
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
    upload: Upload,
    entry: &mut traffic::Entry,
) -> Result<super::Reply, ApiError> {
    let found = inst.router.find(method, rel);
    entry.route = found.as_ref().map(|m| m.template.to_owned());
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
    if let Some(mut fields) = upload.fields {
        fields.append(&mut raw);
        raw = fields;
    } else if !upload.bytes.is_empty() {
        let body = &upload.bytes;
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

    let endpoint = found.as_ref().and_then(|m| m.endpoint);
    let world = matches!(endpoint, Some(Endpoint::Modelled(i)) if inst.router.route(i).access == Access::World);
    let identity = if world {
        Identity::anonymous()
    } else {
        match inst.auth.authenticate(headers, method) {
            Ok(id) => id,
            Err(e) => {
                inst.clock.sleep(inst.durations.auth_failure_delay).await;
                return Err(e);
            }
        }
    };
    if !identity.user.is_empty() {
        entry.user = Some(identity.full());
    }
    let (Some(found), Some(endpoint)) = (found, endpoint) else {
        return Err(ApiError::NotImplemented(format!(
            "Method '{method} {rel}' not implemented"
        )));
    };
    for (k, v) in &found.vars {
        raw.insert((*k).to_owned(), decode::RawValue::Text(v.clone()));
    }
    entry.params = traffic::redact(raw.iter().map(|(k, v)| (k.clone(), v.display())));
    let path_node = found
        .vars
        .iter()
        .find(|(k, _)| *k == "node")
        .map(|(_, v)| v.as_str());
    let route = match endpoint {
        Endpoint::Modelled(i) => inst.router.route(i),
        Endpoint::Generic(answer) => {
            if let Some(node) = path_node {
                check_node(inst, node)?;
            }
            return crate::api::generic::answer(
                inst,
                method,
                found.template,
                &found.vars,
                found.children,
                answer,
            );
        }
    };
    let params = schema::validate(route.params(), &raw).map_err(ApiError::Param)?;
    if let Some(node) = path_node {
        check_node(inst, node)?;
    }
    if method != "GET" && route.access != Access::World && !inst.cluster().quorate() {
        // pmxcfs is read-only without quorum: writes die in `check_cfs_quorum`.
        return Err(ApiError::internal("cluster not ready - no quorum?"));
    }
    let call = Call {
        params,
        identity,
        lock_timeout: faults.lock_timeout,
        route_key: format!("{method} {}", route.path),
        upload: upload.file,
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

/// The node of a `/nodes/{node}/...` path must exist (pveproxy resolves it)
/// and be online (pveproxy proxies the call there and cannot connect).
fn check_node(inst: &Instance, node: &str) -> Result<(), ApiError> {
    let cluster = inst.cluster();
    match cluster.node(node) {
        None => Err(ApiError::internal(format!(
            "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
        ))),
        Some(n) if !n.online => Err(ApiError::Status {
            code: 595,
            reason: "Errors during connection establishment, proxy handshake: No route to host"
                .into(),
        }),
        Some(_) => Ok(()),
    }
}
