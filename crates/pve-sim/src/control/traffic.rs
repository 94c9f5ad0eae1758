//! The request log and per-endpoint statistics behind `/_sim/requests` and
//! `/_sim/stats`. Secrets never enter the log.

use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;
use serde_json::{Value, json};

/// Parameters whose values are replaced in the log.
const SECRET_PARAMS: &[&str] = &[
    "password",
    "cipassword",
    "new-password",
    "otp",
    "tfa-challenge",
];
const REDACTED: &str = "**redacted**";
const MAX_ENTRIES: usize = 20_000;

#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub seq: u64,
    /// Seconds since the epoch when the request arrived.
    pub time: f64,
    pub method: String,
    pub path: String,
    /// The route template, e.g. `/nodes/{node}/qemu/{vmid}/config` (null if none matched).
    pub route: Option<String>,
    pub params: BTreeMap<String, String>,
    /// HTTP status, or 0 for an injected connection reset.
    pub status: u16,
    /// The authenticated user (`user@realm` or `user@realm!token`).
    pub user: Option<String>,
    /// The request's `User-Agent`, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

#[derive(Default)]
pub struct Traffic {
    next_seq: u64,
    log: VecDeque<Entry>,
    by_route: BTreeMap<String, BTreeMap<u16, u64>>,
    by_status: BTreeMap<u16, u64>,
}

pub fn redact(params: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    params
        .into_iter()
        .map(|(k, v)| {
            if SECRET_PARAMS.contains(&k.as_str()) {
                (k, REDACTED.to_owned())
            } else {
                (k, v)
            }
        })
        .collect()
}

impl Traffic {
    pub fn record(&mut self, mut entry: Entry) {
        entry.seq = self.next_seq;
        self.next_seq += 1;
        let key = format!(
            "{} {}",
            entry.method,
            entry.route.as_deref().unwrap_or(&entry.path)
        );
        *self
            .by_route
            .entry(key)
            .or_default()
            .entry(entry.status)
            .or_default() += 1;
        *self.by_status.entry(entry.status).or_default() += 1;
        if self.log.len() == MAX_ENTRIES {
            self.log.pop_front();
        }
        self.log.push_back(entry);
    }

    pub fn clear(&mut self) {
        self.log.clear();
        self.by_route.clear();
        self.by_status.clear();
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.log.iter()
    }

    /// `{"total": N, "status": {"200": n}, "requests": {"GET /version": {"count": n, "status": {...}}}}`
    pub fn stats(&self) -> Value {
        let requests: serde_json::Map<String, Value> = self
            .by_route
            .iter()
            .map(|(k, statuses)| {
                let count: u64 = statuses.values().sum();
                (
                    k.clone(),
                    json!({"count": count, "status": by_code(statuses)}),
                )
            })
            .collect();
        let total: u64 = self.by_status.values().sum();
        json!({"total": total, "status": by_code(&self.by_status), "requests": requests})
    }
}

/// Counts per status code, keyed by the code as text (`{"200": n}`).
fn by_code(counts: &BTreeMap<u16, u64>) -> serde_json::Map<String, Value> {
    counts
        .iter()
        .map(|(code, n)| (code.to_string(), json!(n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_secrets() {
        let p = redact([
            ("password".to_owned(), "hunter2".to_owned()),
            ("name".to_owned(), "vm".to_owned()),
        ]);
        assert_eq!(p["password"], REDACTED);
        assert_eq!(p["name"], "vm");
    }
}
