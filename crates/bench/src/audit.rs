//! The provider's API server requests, from the kube-apiserver's audit log
//! (one `RequestReceived` line per request of the provider's user; see
//! `testenv::AuditPolicy::requests_of`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

use crate::clock::parse_rfc3339;

/// One request.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    /// When the apiserver received it.
    pub time: f64,
    pub verb: String,
    /// `proxmoxvms`, `proxmoxvms/status`, `events`, ...; a non-resource
    /// request is its path (`/api`).
    pub resource: String,
    /// The object's namespace and name, where the request names them.
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The credential that made it: a ServiceAccount token's `jti`
    /// (`user.extra["authentication.kubernetes.io/credential-id"]` is
    /// `JTI=<jti>`), so replicas sharing one ServiceAccount, each with a
    /// token of its own, are told apart.
    pub credential: Option<String>,
}

impl Event {
    /// `patch proxmoxvms/status`
    pub fn key(&self) -> String {
        format!("{} {}", self.verb, self.resource)
    }

    /// A write of a ProxmoxVM's status.
    pub fn is_status_write(&self) -> bool {
        self.resource == "proxmoxvms/status" && matches!(self.verb.as_str(), "patch" | "update")
    }
}

/// The events of `user` in the audit log at `path`.
pub fn read(path: &Path, user: &str) -> anyhow::Result<Vec<Event>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().filter_map(|line| parse(line, user)).collect())
}

fn parse(line: &str, user: &str) -> Option<Event> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v.pointer("/user/username")?.as_str()? != user {
        return None;
    }
    let text = |p: &str| v.pointer(p).and_then(Value::as_str);
    let resource = match (text("/objectRef/resource"), text("/objectRef/subresource")) {
        (Some(r), Some(s)) => format!("{r}/{s}"),
        (Some(r), None) => r.to_owned(),
        _ => text("/requestURI")?.split('?').next()?.to_owned(),
    };
    let credential = v
        .pointer("/user/extra/authentication.kubernetes.io~1credential-id")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find_map(|id| id.strip_prefix("JTI="))
        .map(str::to_owned);
    Some(Event {
        time: parse_rfc3339(text("/requestReceivedTimestamp")?)?,
        verb: text("/verb")?.to_owned(),
        resource,
        namespace: text("/objectRef/namespace").map(str::to_owned),
        name: text("/objectRef/name").map(str::to_owned),
        credential,
    })
}

/// Requests in `[from, to)` by `verb resource`.
pub fn by_key(events: &[Event], from: f64, to: f64) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for e in events.iter().filter(|e| e.time >= from && e.time < to) {
        *counts.entry(e.key()).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_other_users_are_left_out_and_subresources_kept() {
        let me = "system:serviceaccount:crossplane-system:crossplane-provider-proxmox";
        let status = format!(
            r#"{{"kind":"Event","stage":"RequestReceived","verb":"patch","user":{{"username":"{me}","extra":{{"authentication.kubernetes.io/credential-id":["JTI=4f1c"]}}}},"objectRef":{{"resource":"proxmoxvms","subresource":"status","namespace":"ns","name":"a"}},"requestURI":"/apis/x","requestReceivedTimestamp":"2026-01-02T03:04:05.500000Z"}}"#
        );
        let discovery = format!(
            r#"{{"verb":"get","user":{{"username":"{me}"}},"requestURI":"/api?timeout=32s","requestReceivedTimestamp":"2026-01-02T03:04:06Z"}}"#
        );
        let other = r#"{"verb":"get","user":{"username":"default"},"objectRef":{"resource":"secrets"},"requestReceivedTimestamp":"2026-01-02T03:04:06Z"}"#;
        let events: Vec<Event> = [status.as_str(), discovery.as_str(), other, "not json"]
            .iter()
            .filter_map(|l| parse(l, me))
            .collect();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].key(), "patch proxmoxvms/status");
        assert!(events[0].is_status_write());
        assert_eq!(events[0].namespace.as_deref(), Some("ns"));
        assert_eq!(events[0].name.as_deref(), Some("a"));
        assert_eq!(events[0].credential.as_deref(), Some("4f1c"));
        assert_eq!(
            (events[1].name.as_deref(), events[1].credential.as_deref()),
            (None, None)
        );
        assert_eq!(events[1].key(), "get /api");
        let t = events[0].time;
        assert_eq!(by_key(&events, t, t + 0.1).len(), 1);
        assert_eq!(by_key(&events, t, t + 10.0)["get /api"], 1);
    }
}
