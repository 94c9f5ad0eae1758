//! The control API under `/_sim/` (outside `/api2`, no authentication):
//! request statistics and log, fault rules, the URL registry, the CA,
//! and what PVE's daemons do by themselves (a migration, a backup job's
//! scheduled run).

pub mod faults;
pub mod holds;
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
            Ok(rule) => match inst.add_fault(rule) {
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
        ("POST", ["release"]) => match serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["hold"].as_str().map(str::to_owned))
        {
            Some(hold) => {
                inst.holds.release(&hold);
                respond::control(200, &json!({"released": hold}))
            }
            None => bad_request("want {\"hold\": NAME}"),
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
        ("POST", ["nodes", node]) => set_node(inst, node, body),
        ("POST", ["migrate"]) => migrate(inst, body),
        // A backup job run now, as the scheduler runs it.
        ("POST", ["backup-jobs", id, "run"]) => match crate::api::backup::run::run(inst, id) {
            Ok(upids) => respond::control(200, &json!({"upids": upids})),
            Err(e) => respond::control(404, &json!({"error": e})),
        },
        ("GET", ["state"]) => export_state(inst, query),
        ("POST", ["quorum"]) => match serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["quorate"].as_bool())
        {
            Some(q) => {
                inst.cluster().quorum_lost = !q;
                respond::control(200, &json!({"quorate": inst.cluster().quorate()}))
            }
            None => bad_request("want {\"quorate\": true|false}"),
        },
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

/// `POST /_sim/nodes/NODE {"online": false}`: the node goes offline (its
/// API answers 595 through the proxy, its guests lose their stats) or
/// comes back.
fn set_node(inst: &Instance, node: &str, body: &[u8]) -> Response<Body> {
    let Some(online) = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["online"].as_bool())
    else {
        return bad_request("want {\"online\": true|false}");
    };
    let mut cluster = inst.cluster();
    let Some(n) = cluster.node_mut(node) else {
        return respond::control(404, &json!({"error": format!("no node '{node}'")}));
    };
    n.online = online;
    let quorate = cluster.quorate();
    respond::control(
        200,
        &json!({"node": node, "online": online, "quorate": quorate}),
    )
}

/// `POST /_sim/migrate {"vmid": 100, "node": "pve2"}`: the guest moves as
/// the HA stack or a load balancer moves it (a `root@pam` migration task
/// on its node, online if it runs). Returns the task's UPID.
fn migrate(inst: &Arc<Instance>, body: &[u8]) -> Response<Body> {
    let req: Value = serde_json::from_slice(body).unwrap_or_default();
    let (Some(vmid), Some(target)) = (
        req["vmid"].as_u64().and_then(|v| u32::try_from(v).ok()),
        req["node"].as_str(),
    ) else {
        return bad_request("want {\"vmid\": N, \"node\": \"NODE\"}");
    };
    let source = {
        let cluster = inst.cluster();
        if !cluster.has_node(target) {
            return bad_request(&format!("no node '{target}'"));
        }
        match cluster.vms.get(&vmid) {
            Some(g) if g.node == target => {
                return bad_request(&format!("guest {vmid} is on '{target}' already"));
            }
            Some(g) => g.node.clone(),
            None => return bad_request(&format!("no guest {vmid}")),
        }
    };
    let upid = crate::api::ha::crm_migrate(inst, &source, vmid, target);
    respond::control(200, &json!({"upid": upid}))
}

/// `GET /_sim/state[?format=yaml][&secrets=1]`: the current state in the
/// `--state` file format; passwords and token secrets only with `secrets=1`.
fn export_state(inst: &Instance, query: &str) -> Response<Body> {
    let secrets = query_param(query, "secrets").is_some_and(|v| v == "1");
    let state = crate::state::build::export(&inst.cluster(), &inst.config, secrets);
    if query_param(query, "format").as_deref() == Some("yaml") {
        return match state.to_yaml() {
            Ok(text) => {
                let mut resp = respond::control(200, &Value::Null);
                *resp.body_mut() = Body::from(text);
                resp.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("application/yaml"),
                );
                resp
            }
            Err(e) => respond::control(500, &json!({"error": e.to_string()})),
        };
    }
    respond::control(200, &json!(state))
}
