//! The control API under `/_sim/` (outside `/api2`, no authentication):
//! request statistics and log, fault rules, the URL registry, the CA.

pub mod faults;
pub mod traffic;
pub mod urls;

use std::sync::Arc;

use hyper::Response;
use serde_json::{Value, json};

use crate::http::respond::{self, Body};
use crate::instance::Instance;
use faults::FaultRule;
use urls::UrlEntry;

/// Handles one control request.
pub fn handle(
    inst: &Arc<Instance>,
    method: &str,
    path: &str,
    query: &str,
    body: &[u8],
) -> Response<Body> {
    let rest = path.trim_start_matches("/_sim").trim_matches('/');
    let segs: Vec<&str> = rest.split('/').collect();
    match (method, segs.as_slice()) {
        ("GET", ["stats"]) => respond::control(200, &inst.traffic().stats()),
        ("DELETE", ["stats"] | ["requests"]) => {
            inst.traffic().clear();
            respond::control(200, &json!({"cleared": true}))
        }
        ("GET", ["requests"]) => {
            let since = query_param(query, "since")
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0);
            let traffic = inst.traffic();
            let entries: Vec<_> = traffic.entries().filter(|e| e.seq >= since).collect();
            respond::control(200, &json!({"requests": entries}))
        }
        ("GET", ["tasks"]) => respond::control(200, &json!({"tasks": tasks(inst)})),
        ("GET", ["faults"]) => respond::control(200, &json!({"faults": inst.faults().list()})),
        ("POST", ["faults"]) => match serde_json::from_slice::<FaultRule>(body) {
            Ok(rule) => match inst.faults().add(rule) {
                Ok(id) => respond::control(200, &json!({"id": id})),
                Err(e) => bad_request(&e),
            },
            Err(e) => bad_request(&e.to_string()),
        },
        ("DELETE", ["faults"]) => {
            inst.faults().clear();
            respond::control(200, &json!({"cleared": true}))
        }
        ("DELETE", ["faults", id]) => match id.parse::<u64>() {
            Ok(id) if inst.faults().remove(id) => respond::control(200, &json!({"removed": id})),
            _ => respond::control(404, &json!({"error": format!("no fault rule '{id}'")})),
        },
        ("GET", ["urls"]) => respond::control(200, &json!({"urls": inst.urls().list()})),
        ("POST", ["urls"]) => match serde_json::from_slice::<UrlEntry>(body) {
            Ok(entry) => {
                inst.urls().register(entry);
                respond::control(200, &json!({"registered": true}))
            }
            Err(e) => bad_request(&e.to_string()),
        },
        ("DELETE", ["urls"]) => {
            inst.urls().clear();
            respond::control(200, &json!({"cleared": true}))
        }
        ("GET", ["ca.pem"]) => {
            let mut resp = respond::control(200, &Value::Null);
            *resp.body_mut() = Body::from(inst.ca_pem.clone());
            resp.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/x-pem-file"),
            );
            resp
        }
        ("GET", ["fingerprint"]) => {
            respond::control(200, &json!({"fingerprint": inst.fingerprint}))
        }
        _ => respond::control(
            404,
            &json!({"error": format!("no control endpoint {method} {path}")}),
        ),
    }
}

/// Every task with its exact start and end (seconds since the epoch),
/// for referees that measure concurrency and latency: PVE's own task lists
/// have whole seconds and the archival time as `endtime`.
fn tasks(inst: &Instance) -> Vec<Value> {
    inst.tasks
        .records()
        .iter()
        .map(|r| {
            json!({
                "upid": r.text, "node": r.upid.node, "type": r.upid.task_type,
                "id": r.upid.id, "user": r.upid.user, "started": r.started,
                "ended": r.ended, "exitstatus": r.exit,
            })
        })
        .collect()
}

fn bad_request(msg: &str) -> Response<Body> {
    respond::control(400, &json!({"error": msg}))
}

fn query_param(query: &str, key: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}
