//! Carries out a phase's schedule: SIGKILLs of replicas (after a dispatch
//! seen in the simulator's request log, or at random moments) and the
//! apiserver restart, timing how long each leader loss lasted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::StdRng;
use serde_json::Value;

use super::k8s;
use super::replicas::Replicas;
use super::schedule::{Event, Kill, Step};
use super::sim::Sim;
use super::traffic::{self, RequestLog};
use crate::support;

/// How long a new leader may take before the run counts it as lost.
const FAILOVER_LIMIT: Duration = Duration::from_secs(120);
/// How long a dispatch kill waits for a create or clone before settling
/// for any task-starting call, and then for anything at all.
const DISPATCH_WAIT: Duration = Duration::from_secs(30);
/// How long the simulator holds the request a dispatch kill waits for.
const HOLD: Duration = Duration::from_millis(1500);

/// Now, in seconds since the epoch (the request log's clock).
pub fn epoch_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One SIGKILL.
#[derive(Clone, Debug)]
pub struct KillRecord {
    pub phase: &'static str,
    /// Since the run started.
    pub at: Duration,
    pub kind: Kill,
    pub victim: String,
    pub was_leader: bool,
    /// The request it followed, for dispatch kills.
    pub dispatch: Option<String>,
    /// Whether that request started a task (200; faults may refuse it).
    pub started_task: bool,
    /// Whether the resource's status did not show the dispatched task yet
    /// when the process died (create and clone dispatches only).
    pub before_status_write: Option<bool>,
    /// From the kill to a live replica holding the Lease (leader kills);
    /// `None` when no replica took over within the limit.
    pub failover: Option<Duration>,
}

/// One apiserver restart.
#[derive(Clone, Debug)]
pub struct RestartRecord {
    pub at: Duration,
    /// From stopping it to `/readyz` answering again.
    pub took: Duration,
}

pub struct Driver {
    pub sim: Arc<Sim>,
    /// Failovers being timed: (index into `kills`, the measurement).
    pub pending: Vec<(usize, tokio::task::JoinHandle<Option<Duration>>)>,
    pub replicas: Replicas,
    pub log: RequestLog,
    pub ns: String,
    pub started: Instant,
    pub rng: StdRng,
    pub kills: Vec<KillRecord>,
    pub restarts: Vec<RestartRecord>,
}

impl Driver {
    /// Runs every step of `steps` in order (a failover is timed in the
    /// background, so the next event may fall into it), then waits for the
    /// failovers to be timed.
    pub async fn run(&mut self, phase: &'static str, steps: Vec<Step>) {
        self.run_steps(phase, steps).await;
        for (index, measuring) in std::mem::take(&mut self.pending) {
            self.kills[index].failover = measuring.await.unwrap_or(None);
        }
    }

    async fn run_steps(&mut self, phase: &'static str, steps: Vec<Step>) {
        for step in steps {
            tokio::time::sleep(step.pause).await;
            match step.event {
                Event::Kill(kind) => {
                    let (record, killed_at) = self.kill(phase, kind).await;
                    eprintln!(
                        "chaos: {:>6.1}s kill #{} ({}): {}{}{}",
                        record.at.as_secs_f64(),
                        self.kills.len() + 1,
                        kind.label(),
                        record.victim,
                        if record.was_leader { " (leader)" } else { "" },
                        record
                            .dispatch
                            .as_ref()
                            .map(|d| format!(" after {d}"))
                            .unwrap_or_default(),
                    );
                    if record.was_leader {
                        let measuring = failover(self.replicas.clone(), self.ns.clone(), killed_at);
                        self.pending
                            .push((self.kills.len(), tokio::spawn(measuring)));
                    }
                    self.kills.push(record);
                }
                Event::RestartApiserver => {
                    let record = self.restart_apiserver().await;
                    eprintln!(
                        "chaos: {:>6.1}s kube-apiserver restarted in {:.1}s",
                        record.at.as_secs_f64(),
                        record.took.as_secs_f64()
                    );
                    self.restarts.push(record);
                }
            }
        }
    }

    async fn restart_apiserver(&self) -> RestartRecord {
        let at = self.started.elapsed();
        let begun = Instant::now();
        support::cluster()
            .control_plane
            .as_ref()
            .expect("the chaos suite runs on the testenv control plane")
            .restart_apiserver()
            .await
            .unwrap_or_else(|e| panic!("restarting kube-apiserver: {e}"));
        RestartRecord {
            at,
            took: begun.elapsed(),
        }
    }

    async fn kill(&mut self, phase: &'static str, kind: Kill) -> (KillRecord, Instant) {
        let (slot, was_leader) = match kind {
            Kill::AfterDispatch | Kill::Leader => (self.leader().await, true),
            Kill::Random => {
                let slot = self.rng.random_range(0..2usize);
                let slot = self.running(slot).await;
                let holder = k8s::lease_holder(&self.ns).await;
                let leads = holder.is_some_and(|h| self.replicas.slot_of(&h) == Some(slot));
                (slot, leads)
            }
        };
        let (killed_at, victim, dispatch) = match kind {
            Kill::AfterDispatch => {
                let (entry, victim) = self.kill_after_dispatch(slot).await;
                (Instant::now(), victim, entry)
            }
            _ => (Instant::now(), self.replicas.kill(slot), None),
        };
        let at = self.started.elapsed();
        let victim = victim.unwrap_or_else(|| "(already gone)".into());
        let before_status_write = match &dispatch {
            Some(entry) => self.before_status_write(entry).await,
            None => None,
        };
        let record = KillRecord {
            phase,
            at,
            kind,
            victim,
            was_leader,
            dispatch: dispatch.as_ref().map(traffic::describe),
            started_task: dispatch.as_ref().is_some_and(|e| e["status"] == 200),
            before_status_write,
            failover: None,
        };
        (record, killed_at)
    }

    /// The slot of the live leader, waiting for one.
    pub async fn leader(&self) -> usize {
        support::poll("a live leader", FAILOVER_LIMIT, || async {
            let holder = k8s::lease_holder(&self.ns).await;
            holder
                .as_deref()
                .and_then(|h| self.replicas.slot_of(h))
                .ok_or_else(|| format!("the Lease is held by {holder:?}"))
        })
        .await
    }

    /// `slot`, once a process runs in it.
    async fn running(&self, slot: usize) -> usize {
        support::poll("the replica to run", Duration::from_secs(60), || async {
            self.replicas
                .name(slot)
                .map(|_| slot)
                .ok_or_else(|| "restarting".to_owned())
        })
        .await
    }

    /// Kills `slot` between a dispatch and its status write, exactly:
    /// the simulator holds the next create or clone for [`HOLD`] (a
    /// latency rule), the replica is frozen (SIGSTOP) the moment the
    /// request arrives, and SIGKILLed once the simulator has answered it;
    /// so the task starts, and the process never sees its UPID. Settles
    /// for any task-starting call if no create comes for a while, then
    /// for a plain kill.
    async fn kill_after_dispatch(&self, slot: usize) -> (Option<Value>, Option<String>) {
        for routes in [&traffic::CREATING[..], &traffic::TASK_STARTING[..]] {
            if let Some(entry) = self.hold_next(routes, slot).await {
                return (Some(entry), self.replicas.kill(slot));
            }
        }
        (None, self.replicas.kill(slot))
    }

    /// Holds the next call to one of `routes`, freezes `slot` when it
    /// arrives and returns the call once answered; `None` if no such call
    /// came within [`DISPATCH_WAIT`].
    async fn hold_next(&self, routes: &[(&str, &str)], slot: usize) -> Option<Value> {
        let armed_at = epoch_secs();
        let since = self.log.next();
        let mut rules = Vec::new();
        for (method, path) in routes {
            let rule = serde_json::json!({"fault": "latency", "method": method, "path": path,
                                          "ms": HOLD.as_millis() as u64, "count": 1});
            rules.push((self.sim.add_fault(&rule).await, *method, *path));
        }
        let begun = Instant::now();
        let held = loop {
            // A used-up rule disappears: that request is being held now.
            let listed: Vec<u64> = self
                .sim
                .faults()
                .await
                .iter()
                .filter_map(|r| r["id"].as_u64())
                .collect();
            if let Some(held) = rules.iter().find(|(id, _, _)| !listed.contains(id)) {
                self.replicas.freeze(slot);
                break Some(*held);
            }
            if begun.elapsed() > DISPATCH_WAIT {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        for (id, _, _) in &rules {
            self.sim.remove_fault(*id).await;
        }
        let (_, method, path) = held?;
        let answered = support::poll("the held request to be answered", HOLD * 20, || async {
            self.sim
                .requests_since(since)
                .await
                .into_iter()
                .find(|e| {
                    traffic::is(e, method, path)
                        && e["time"].as_f64().is_some_and(|t| t >= armed_at)
                })
                .ok_or_else(|| format!("no {method} {path} answered yet"))
        })
        .await;
        Some(answered)
    }

    /// Whether the dispatched create's resource had not recorded the task
    /// yet: its status (frozen, its writer is dead) shows no task of that
    /// type. `None` for other calls or when no resource claims the VMID.
    async fn before_status_write(&self, entry: &Value) -> Option<bool> {
        let vmid = traffic::create_dispatch(entry)?;
        let task_type = if entry["route"] == "/nodes/{node}/qemu" {
            "qmcreate"
        } else {
            "qmclone"
        };
        let vms = k8s::list(&k8s::vms(&self.ns)).await;
        let vm = vms.iter().find(|vm| {
            vm["metadata"]["annotations"]["crossplane.io/external-name"]
                .as_str()
                .and_then(|v| v.parse::<u32>().ok())
                == Some(vmid)
        })?;
        Some(vm["status"]["atProvider"]["task"]["type"] != task_type)
    }
}

/// Time from `killed_at` until a live replica holds the Lease.
async fn failover(replicas: Replicas, ns: String, killed_at: Instant) -> Option<Duration> {
    while killed_at.elapsed() < FAILOVER_LIMIT {
        if let Some(holder) = k8s::lease_holder(&ns).await
            && replicas.slot_of(&holder).is_some()
        {
            eprintln!(
                "chaos: new leader {holder} {:.1}s after the kill",
                killed_at.elapsed().as_secs_f64()
            );
            return Some(killed_at.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
