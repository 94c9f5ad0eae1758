//! The Proxmox faults of a run, installed through pve-sim's `/_sim/faults`
//! and counted from what the simulator says fired.
//!
//! Rules are tried in the order added and at most one decides a request's
//! (or task's) outcome, so the rules that make every kind fire at least
//! once come first; then the rates: about 10% of requests fail (500, 595,
//! 596, connection reset), 0-2 s of latency, `got timeout` on config
//! locks, 5% of tasks fail, 10% of tasks are hidden for a while.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::sim::Sim;

/// Routes whose handler or task takes the VM's config flock.
const LOCKING_ROUTES: [(&str, &str); 10] = [
    ("POST", "/nodes/{node}/qemu"),
    ("POST", "/nodes/{node}/qemu/{vmid}/clone"),
    ("POST", "/nodes/{node}/qemu/{vmid}/config"),
    ("PUT", "/nodes/{node}/qemu/{vmid}/config"),
    ("PUT", "/nodes/{node}/qemu/{vmid}/resize"),
    ("DELETE", "/nodes/{node}/qemu/{vmid}"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/start"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/stop"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/reboot"),
];

/// How long a hidden task stays invisible (real milliseconds).
const HIDDEN_MS: u64 = 4000;

/// The rules, in order.
pub fn rules() -> Vec<Value> {
    let mut rules = vec![
        // Each kind at least once, early.
        json!({"fault": "sequence", "steps": [
            {"fault": "http-error", "status": 500},
            {"fault": "http-error", "status": 595},
            {"fault": "http-error", "status": 596},
            {"fault": "reset"},
        ]}),
        json!({"fault": "task-fail", "task_type": "qmcreate", "count": 1}),
        json!({"fault": "task-hidden", "task_type": "qmstart", "ms": HIDDEN_MS, "count": 1}),
        json!({"fault": "lock-timeout", "method": "POST",
               "path": "/nodes/{node}/qemu/{vmid}/status/start", "count": 1}),
        // About 10% of requests fail.
        json!({"fault": "http-error", "status": 500, "probability": 0.03}),
        json!({"fault": "http-error", "status": 595, "probability": 0.025}),
        json!({"fault": "http-error", "status": 596, "probability": 0.025}),
        json!({"fault": "reset", "probability": 0.025}),
        // 0-2 s of latency: the delays add up when several fire.
        json!({"fault": "latency", "ms": 200, "probability": 0.10}),
        json!({"fault": "latency", "ms": 400, "probability": 0.05}),
        json!({"fault": "latency", "ms": 600, "probability": 0.03}),
        json!({"fault": "latency", "ms": 800, "probability": 0.02}),
        // 5% of tasks fail; 10% are invisible for a while.
        json!({"fault": "task-fail", "probability": 0.05}),
        json!({"fault": "task-hidden", "ms": HIDDEN_MS, "probability": 0.10}),
    ];
    rules.extend(LOCKING_ROUTES.iter().map(|(method, path)| {
        json!({"fault": "lock-timeout", "method": method, "path": path, "probability": 0.04})
    }));
    rules
}

/// What kind of fault a rule (or a step of a sequence) injects.
fn kind(action: &Value) -> String {
    match action["fault"].as_str().unwrap_or_default() {
        "http-error" => format!("HTTP {}", action["status"]),
        "reset" => "connection reset".into(),
        "latency" => "latency (200-2000 ms)".into(),
        "lock-timeout" => "config lock `got timeout`".into(),
        "task-fail" => "failed task".into(),
        "task-hidden" => format!("task hidden for {HIDDEN_MS} ms"),
        other => other.to_owned(),
    }
}

/// Rules installed, and how often each kind fired over the run.
#[derive(Default)]
pub struct Ledger {
    /// Rule id → (rule, fired as last seen).
    installed: BTreeMap<u64, (Value, u64)>,
    /// Faults of rules that are gone (cleared or used up), by kind.
    settled: BTreeMap<String, u64>,
}

impl Ledger {
    /// Adds every rule of [`rules`] to the simulator.
    pub async fn install(&mut self, sim: &Sim) {
        for rule in rules() {
            let id = sim.add_fault(&rule).await;
            self.installed.insert(id, (rule, 0));
        }
    }

    /// Reads the fired counts. A rule with a count that is no longer
    /// listed was used up (the simulator drops those): it fired fully.
    pub async fn refresh(&mut self, sim: &Sim) {
        let listed: BTreeMap<u64, u64> = sim
            .faults()
            .await
            .iter()
            .filter_map(|r| Some((r["id"].as_u64()?, r["fired"].as_u64()?)))
            .collect();
        let mut gone = Vec::new();
        for (id, (_, fired)) in &mut self.installed {
            match listed.get(id) {
                Some(now) => *fired = *now,
                None => gone.push(*id),
            }
        }
        for id in gone {
            if let Some((rule, _)) = self.installed.remove(&id) {
                self.settle_used_up(&rule);
            }
        }
    }

    fn settle_used_up(&mut self, rule: &Value) {
        let times = rule["count"].as_u64().unwrap_or(1);
        match rule["steps"].as_array() {
            Some(steps) => {
                for step in steps {
                    *self.settled.entry(kind(step)).or_default() += times;
                }
            }
            None => *self.settled.entry(kind(rule)).or_default() += times,
        }
    }

    /// Counts what fired, then removes every rule.
    pub async fn clear(&mut self, sim: &Sim) {
        self.refresh(sim).await;
        for (_, (rule, fired)) in std::mem::take(&mut self.installed) {
            match rule["steps"].as_array() {
                // A sequence still listed fired its first `fired` steps.
                Some(steps) => {
                    for step in steps.iter().take(fired as usize) {
                        *self.settled.entry(kind(step)).or_default() += 1;
                    }
                }
                None => *self.settled.entry(kind(&rule)).or_default() += fired,
            }
        }
        sim.clear_faults().await;
    }

    /// Faults fired by kind (after [`Ledger::clear`]).
    pub fn by_kind(&self) -> &BTreeMap<String, u64> {
        &self.settled
    }

    /// The kinds a run must have injected at least once.
    pub fn expected_kinds() -> Vec<String> {
        let mut kinds: Vec<String> = rules()
            .iter()
            .flat_map(|r| match r["steps"].as_array() {
                Some(steps) => steps.iter().map(kind).collect(),
                None => vec![kind(r)],
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }
}
