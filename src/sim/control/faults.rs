//! Fault injection: rules that match requests (method + path template) or
//! tasks (type), fire with a probability and/or a limited count, and make
//! the simulator misbehave the ways real PVE clusters do.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::sim::config::FaultRates;
use crate::sim::http::ApiError;
use crate::sim::tasks::TaskFaults;

/// What a rule does when it fires.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "fault", rename_all = "kebab-case")]
pub enum FaultAction {
    /// Answer with this status (500, 595, 596, 599, ...) instead of handling the request.
    HttpError {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Close the connection without a response.
    Reset,
    /// Delay the request by `ms` real milliseconds, then handle it.
    Latency { ms: u64 },
    /// The request's config flock times out (`got timeout`) after the flock timeout.
    LockTimeout,
    /// The next matching task fails with `message`.
    TaskFail {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The next matching task ends with `WARNINGS: n`.
    TaskWarnings { warnings: u32 },
    /// The task is invisible (`400 no such task`) for `ms` real milliseconds.
    TaskHidden { ms: u64 },
}

impl FaultAction {
    fn is_task_fault(&self) -> bool {
        matches!(
            self,
            Self::TaskFail { .. } | Self::TaskWarnings { .. } | Self::TaskHidden { .. }
        )
    }
}

/// A rule as posted to `POST /_sim/faults`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct FaultRule {
    /// Request method to match (any if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Path template to match, e.g. `/nodes/{node}/qemu` (any if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Task type to match for task faults, e.g. `qmcreate` (any if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    #[serde(flatten)]
    pub action: FaultAction,
    /// Chance that a matching request fires the rule (default 1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// How many more times the rule may fire (unlimited if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StoredRule {
    pub id: u64,
    #[serde(flatten)]
    pub rule: FaultRule,
    pub fired: u64,
}

/// What the pipeline must do for one request.
#[derive(Debug, Default)]
pub struct RequestFaults {
    pub latency: Option<Duration>,
    pub error: Option<ApiError>,
    pub lock_timeout: bool,
}

pub struct Faults {
    rules: Vec<StoredRule>,
    next_id: u64,
    rng: StdRng,
}

impl Faults {
    pub fn new(seed: u64, rates: &FaultRates) -> Self {
        let mut faults = Self {
            rules: Vec::new(),
            next_id: 1,
            rng: StdRng::seed_from_u64(seed),
        };
        for rule in rules_from_rates(rates) {
            faults.add(rule);
        }
        faults
    }

    pub fn add(&mut self, rule: FaultRule) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.rules.push(StoredRule { id, rule, fired: 0 });
        id
    }

    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.rules.len();
        self.rules.retain(|r| r.id != id);
        self.rules.len() != before
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    pub fn list(&self) -> &[StoredRule] {
        &self.rules
    }

    /// Rolls every matching rule once; returns the actions that fire.
    fn fire(&mut self, matches: impl Fn(&FaultRule) -> bool) -> Vec<FaultAction> {
        let mut fired = Vec::new();
        for stored in &mut self.rules {
            if stored.rule.count == Some(0) || !matches(&stored.rule) {
                continue;
            }
            let p = stored.rule.probability.unwrap_or(1.0);
            if p < 1.0 && self.rng.random::<f64>() >= p {
                continue;
            }
            if let Some(c) = stored.rule.count.as_mut() {
                *c -= 1;
            }
            stored.fired += 1;
            fired.push(stored.rule.action.clone());
        }
        self.rules.retain(|r| r.rule.count != Some(0));
        fired
    }

    /// Request-level faults for `method` + route template.
    pub fn on_request(&mut self, method: &str, template: &str) -> RequestFaults {
        let actions =
            self.fire(|r| !r.action.is_task_fault() && matches_request(r, method, template));
        let mut out = RequestFaults::default();
        for action in actions {
            match action {
                FaultAction::Latency { ms } => {
                    out.latency = Some(out.latency.unwrap_or_default() + Duration::from_millis(ms))
                }
                FaultAction::Reset => out.error = Some(ApiError::Reset),
                FaultAction::HttpError { status, message } if out.error.is_none() => {
                    out.error = Some(http_error(status, message))
                }
                FaultAction::LockTimeout => out.lock_timeout = true,
                _ => {}
            }
        }
        out
    }

    /// Task-level faults for a task of `task_type` started by `route_key` (`METHOD template`).
    pub fn on_task(&mut self, task_type: &str, route_key: &str) -> TaskFaults {
        let (method, template) = route_key.split_once(' ').unwrap_or(("", route_key));
        let actions = self.fire(|r| {
            r.action.is_task_fault()
                && r.task_type.as_deref().is_none_or(|t| t == task_type)
                && matches_request(r, method, template)
        });
        let mut out = TaskFaults::default();
        for action in actions {
            match action {
                FaultAction::TaskFail { message } => {
                    out.fail =
                        Some(message.unwrap_or_else(|| "pve-sim: injected task failure".into()))
                }
                FaultAction::TaskWarnings { warnings } => out.warnings += warnings,
                FaultAction::TaskHidden { ms } => out.hidden_for = Some(Duration::from_millis(ms)),
                _ => {}
            }
        }
        out
    }
}

fn matches_request(rule: &FaultRule, method: &str, template: &str) -> bool {
    rule.method
        .as_deref()
        .is_none_or(|m| m.eq_ignore_ascii_case(method))
        && rule.path.as_deref().is_none_or(|p| p == template)
}

/// The status line PVE (or the proxy hop) would send for an injected status.
fn http_error(status: u16, message: Option<String>) -> ApiError {
    match status {
        500 => {
            ApiError::Internal(message.unwrap_or_else(|| "pve-sim: injected internal error".into()))
        }
        _ => {
            let reason = message.unwrap_or_else(|| {
                match status {
                    595 => "Errors during connection establishment, proxy handshake: Connection refused",
                    596 => "Connection timed out",
                    597 => "Broken pipe",
                    599 => "Too many redirections",
                    502 => "Bad Gateway",
                    503 => "Service Unavailable",
                    _ => "pve-sim: injected error",
                }
                .to_owned()
            });
            ApiError::Status {
                code: status,
                reason,
            }
        }
    }
}

fn rules_from_rates(rates: &FaultRates) -> Vec<FaultRule> {
    let rule = |action: FaultAction, p: f64| FaultRule {
        method: None,
        path: None,
        task_type: None,
        action,
        probability: Some(p),
        count: None,
    };
    let mut rules = Vec::new();
    if let Some((latency, p)) = rates.latency {
        rules.push(rule(
            FaultAction::Latency {
                ms: latency.as_millis() as u64,
            },
            p,
        ));
    }
    for (status, p) in [
        (500, rates.http_500),
        (595, rates.http_595),
        (596, rates.http_596),
    ] {
        if p > 0.0 {
            rules.push(rule(
                FaultAction::HttpError {
                    status,
                    message: None,
                },
                p,
            ));
        }
    }
    if rates.reset > 0.0 {
        rules.push(rule(FaultAction::Reset, rates.reset));
    }
    if rates.lock_timeout > 0.0 {
        rules.push(rule(FaultAction::LockTimeout, rates.lock_timeout));
    }
    if rates.task_failure > 0.0 {
        rules.push(rule(
            FaultAction::TaskFail { message: None },
            rates.task_failure,
        ));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_limits_and_matching() {
        let mut f = Faults::new(1, &FaultRates::default());
        let rule: FaultRule = serde_json::from_str(
            r#"{"method":"GET","path":"/version","fault":"http-error","status":596,"count":1}"#,
        )
        .unwrap();
        f.add(rule);
        assert!(f.on_request("POST", "/version").error.is_none());
        assert_eq!(
            f.on_request("GET", "/version")
                .error
                .map(|e| e.status_code()),
            Some(596)
        );
        assert!(f.on_request("GET", "/version").error.is_none());
        assert!(f.list().is_empty());
    }

    #[test]
    fn task_faults_match_type() {
        let mut f = Faults::new(1, &FaultRates::default());
        f.add(
            serde_json::from_str(r#"{"fault":"task-fail","task_type":"qmstart","message":"boom"}"#)
                .unwrap(),
        );
        assert!(f.on_task("qmstop", "POST /x").fail.is_none());
        assert_eq!(
            f.on_task("qmstart", "POST /x").fail.as_deref(),
            Some("boom")
        );
    }

    #[test]
    fn probabilities_are_seeded() {
        let run = || {
            let mut f = Faults::new(
                42,
                &FaultRates {
                    http_596: 0.5,
                    ..FaultRates::default()
                },
            );
            (0..32)
                .map(|_| f.on_request("GET", "/version").error.is_some())
                .collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        assert!(a.contains(&true) && a.contains(&false));
    }
}
