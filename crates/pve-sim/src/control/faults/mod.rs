//! Fault injection: rules that match requests (method + path template),
//! tasks (type) or archival passes, fire with a probability and/or a
//! limited count, and make the simulator misbehave the ways real PVE
//! clusters do.
//!
//! Rules are tried in the order they were added. Per event at most one
//! rule decides the outcome (an error, a reset, `null-data`, `pass`, a task
//! failure, an archive error); a later rule that would decide it too is
//! skipped and keeps its count, so rules with counts are used up in order.
//! A `sequence` rule fires its steps one per matching event.

mod action;

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::config::FaultRates;
use crate::http::ApiError;
use crate::tasks::TaskFaults;
pub use action::{FaultAction, HoldAt, Scope};

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
    /// How many more times the rule may fire (unlimited if absent); for a
    /// `sequence`, how many more times it runs through its steps (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

impl FaultRule {
    /// Rejects rules the simulator could not apply as asked.
    pub fn validate(&self) -> Result<(), String> {
        self.action.validate()?;
        if self.probability.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
            return Err("probability must be between 0 and 1".into());
        }
        let filtered = self.method.is_some() || self.path.is_some() || self.task_type.is_some();
        match self.action.scope() {
            Scope::Archive if filtered => Err(
                "archive faults apply to a node's archival pass: no method, path or task_type"
                    .into(),
            ),
            Scope::Request if self.task_type.is_some() => {
                Err("task_type only applies to task faults".into())
            }
            _ => Ok(()),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct StoredRule {
    pub id: u64,
    #[serde(flatten)]
    pub rule: FaultRule,
    pub fired: u64,
    /// The index of the next step of a `sequence`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<usize>,
}

impl StoredRule {
    fn used_up(&self) -> bool {
        self.rule.count == Some(0)
    }

    /// The action the rule would apply to the next matching event.
    fn next_action(&self) -> &FaultAction {
        match (&self.rule.action, self.next_step) {
            (FaultAction::Sequence { steps }, Some(i)) => &steps[i.min(steps.len() - 1)],
            (action, _) => action,
        }
    }

    /// Counts one firing: the next step, or one use of the count.
    fn consume(&mut self) {
        self.fired += 1;
        if let (FaultAction::Sequence { steps }, Some(i)) = (&self.rule.action, self.next_step) {
            if i + 1 < steps.len() {
                self.next_step = Some(i + 1);
                return;
            }
            self.next_step = Some(0);
        }
        if let Some(c) = self.rule.count.as_mut() {
            *c = c.saturating_sub(1);
        }
    }
}

/// What the pipeline must do for one request.
#[derive(Debug, Default)]
pub struct RequestFaults {
    pub latency: Option<Duration>,
    pub error: Option<ApiError>,
    pub lock_timeout: bool,
    /// Answer `{"data":null}` after handling the request.
    pub null_data: bool,
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
            faults.push(rule);
        }
        faults
    }

    /// Adds a rule after the existing ones; returns its id.
    pub fn add(&mut self, rule: FaultRule) -> Result<u64, String> {
        rule.validate()?;
        Ok(self.push(rule))
    }

    fn push(&mut self, mut rule: FaultRule) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let sequence = matches!(rule.action, FaultAction::Sequence { .. });
        if sequence && rule.count.is_none() {
            rule.count = Some(1);
        }
        self.rules.push(StoredRule {
            id,
            rule,
            fired: 0,
            next_step: sequence.then_some(0),
        });
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

    /// Rolls the matching rules of `scope` in order and returns the actions
    /// that fire. Once one that decides the outcome has fired, later ones
    /// that would decide it too are skipped without being rolled or counted.
    fn fire(&mut self, scope: Scope, matches: impl Fn(&FaultRule) -> bool) -> Vec<FaultAction> {
        let mut fired = Vec::new();
        let mut decided = false;
        for stored in &mut self.rules {
            if stored.used_up() || stored.rule.action.scope() != scope || !matches(&stored.rule) {
                continue;
            }
            let action = stored.next_action().clone();
            if decided && action.decides_outcome() {
                continue;
            }
            let p = stored.rule.probability.unwrap_or(1.0);
            if p < 1.0 && self.rng.random::<f64>() >= p {
                continue;
            }
            stored.consume();
            decided |= action.decides_outcome();
            fired.push(action);
        }
        self.rules.retain(|r| !r.used_up());
        fired
    }

    /// Request-level faults for `method` + route template.
    pub fn on_request(&mut self, method: &str, template: &str) -> RequestFaults {
        let actions = self.fire(Scope::Request, |r| matches_request(r, method, template));
        let mut out = RequestFaults::default();
        for action in actions {
            match action {
                FaultAction::Latency { ms } => {
                    out.latency = Some(out.latency.unwrap_or_default() + Duration::from_millis(ms))
                }
                FaultAction::Reset => out.error = Some(ApiError::Reset),
                FaultAction::HttpError { status, message } => {
                    out.error = Some(action::http_error(status, message))
                }
                FaultAction::LockTimeout => out.lock_timeout = true,
                FaultAction::NullData => out.null_data = true,
                _ => {}
            }
        }
        out
    }

    /// Task-level faults for a task of `task_type` started by `route_key` (`METHOD template`).
    pub fn on_task(&mut self, task_type: &str, route_key: &str) -> TaskFaults {
        let (method, template) = route_key.split_once(' ').unwrap_or(("", route_key));
        let actions = self.fire(Scope::Task, |r| {
            r.task_type.as_deref().is_none_or(|t| t == task_type)
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
                FaultAction::TaskHidden { ms, hold } => {
                    out.hidden_for = Some(Duration::from_millis(ms));
                    out.hidden_until = hold;
                }
                FaultAction::TaskHeld { hold, at } => out.held = Some((hold, at)),
                _ => {}
            }
        }
        out
    }

    /// Whether this archival pass fails to write the task index.
    pub fn on_archive(&mut self) -> bool {
        self.fire(Scope::Archive, |_| true)
            .contains(&FaultAction::ArchiveError)
    }
}

fn matches_request(rule: &FaultRule, method: &str, template: &str) -> bool {
    rule.method
        .as_deref()
        .is_none_or(|m| m.eq_ignore_ascii_case(method))
        && rule.path.as_deref().is_none_or(|p| p == template)
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
mod tests;
