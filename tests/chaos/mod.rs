//! The chaos suite (issue 9): ProxmoxVMs of every kind are created and
//! deleted while the provider's processes are SIGKILLed (the leader too,
//! right after it dispatched a create), the kube-apiserver restarts and
//! pve-sim injects errors, resets, latency, lock timeouts, failed and
//! hidden tasks. The end state is judged from the simulator's own VMs,
//! tasks and request log; every log, event, status, metric and logged
//! request is searched for secrets. Figures: `report.rs`; sizes: `size.rs`.

pub mod blame;
pub mod capacity;
pub mod checks;
pub mod driver;
pub mod faults;
pub mod fleet;
pub mod in_flight;
pub mod k8s;
pub mod observer;
pub mod replicas;
pub mod report;
pub mod schedule;
pub mod secrets;
pub mod setup;
pub mod shards;
pub mod sim;
pub mod size;
pub mod state;
pub mod traffic;
pub mod verdict;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;

use crate::support;
use checks::Resource;
use driver::Driver;
use faults::Ledger;
use fleet::VmSpec;
use observer::Observer;
use replicas::Replicas;
use report::Figures;
use secrets::{Credentials, Haystack};
use sim::Sim;
use size::Size;
use traffic::RequestLog;
use verdict::{Kind, Violation};

/// Runs the suite at the size the environment asks for and fails with an
/// account of every failure.
pub async fn run() {
    let size = Size::from_env();
    eprintln!(
        "chaos: {} run with seed {} (repeat: {})",
        size.name,
        size.seed,
        size.command()
    );
    provider_proxmox::install_crypto_provider();
    assert!(
        support::cluster().is_testenv(),
        "the chaos suite restarts the kube-apiserver: it needs the testenv control plane \
         (unset {})",
        support::USE_EXISTING_CLUSTER
    );
    let mut run = Run::start(size).await;
    let figures = run.go().await;
    eprintln!("{}", figures.text());
    if let Some(path) = &figures.size.report {
        figures.write_into(path);
        eprintln!("chaos: figures written to {}", path.display());
    }
    assert!(
        figures.violations.is_empty(),
        "the chaos run found {} failures (seed {}):\n{}",
        figures.violations.len(),
        figures.size.seed,
        figures.failures()
    );
}

/// One run's world.
struct Run {
    size: Size,
    started: Instant,
    /// The same moment in seconds since the epoch (pve-sim's clock).
    started_epoch: f64,
    phases: Vec<(&'static str, Duration)>,
    ns: support::TestNamespace,
    creds: Credentials,
    sim: Arc<Sim>,
    log: RequestLog,
    fleet: Vec<VmSpec>,
    rng: StdRng,
    driver: Driver,
    ledger: Ledger,
    violations: Vec<Violation>,
    /// Status snapshots (ProxmoxVMs, ProviderConfigs) for the secret search.
    statuses: Vec<String>,
    observer: Option<Observer>,
    /// The create and clone tasks, as read for the end-state check.
    tasks: Vec<state::CreateTask>,
    dir: std::path::PathBuf,
}

impl Run {
    /// Namespace, simulator, Secrets, ProviderConfigs, two replicas.
    async fn start(size: Size) -> Self {
        let started = Instant::now();
        let dir = setup::run_dir();
        support::install_crds(support::repo_root().join("crds")).await;
        let ns = support::namespace("chaos").await;
        let creds = Credentials::generate();
        let sim = Arc::new(Sim::start(&dir, &creds, size.seed, size.time_scale));
        setup::configs(ns.name(), &sim, &creds).await;
        let log = RequestLog::start(Arc::clone(&sim));
        let replicas = Replicas::start(&support::cluster().kubeconfig, ns.name(), &dir);
        let mut rng = StdRng::seed_from_u64(size.seed);
        let fleet = fleet::fleet(size.vms, size.waves, &mut rng);
        let driver = Driver {
            sim: Arc::clone(&sim),
            pending: Vec::new(),
            replicas,
            log: log.clone(),
            ns: ns.name().to_owned(),
            started,
            rng: StdRng::seed_from_u64(size.seed.wrapping_add(1)),
            kills: Vec::new(),
            restarts: Vec::new(),
        };
        Self {
            size,
            started,
            started_epoch: driver::epoch_secs() - started.elapsed().as_secs_f64(),
            phases: Vec::new(),
            ns,
            creds,
            sim,
            log,
            fleet,
            rng,
            driver,
            ledger: Ledger::default(),
            violations: Vec::new(),
            statuses: Vec::new(),
            observer: None,
            tasks: Vec::new(),
            dir,
        }
    }

    fn phase_done(&mut self, name: &'static str, since: Instant) {
        self.phases.push((name, since.elapsed()));
        eprintln!(
            "chaos: {:>6.1}s {name} done in {:.1}s",
            self.started.elapsed().as_secs_f64(),
            since.elapsed().as_secs_f64()
        );
    }

    async fn go(&mut self) -> Figures {
        self.driver.leader().await;
        self.ledger.install(&self.sim).await;
        self.observer = Some(Observer::start(self.ns.name(), self.started));
        self.phase_done("setup", self.started);
        let since = Instant::now();
        self.create().await;
        self.phase_done("create until all Ready", since);
        let since = Instant::now();
        self.check_created().await;
        self.phase_done("check", since);
        self.delete().await;
        self.finish().await
    }

    /// Applies the fleet in waves while the creation schedule runs, until
    /// every VM is Ready (or the timeout).
    async fn create(&mut self) {
        let plan = schedule::creation(&self.size, &mut self.rng);
        let ns = self.ns.name().to_owned();
        let names: BTreeSet<String> = self.fleet.iter().map(|v| v.name.clone()).collect();
        let deadline = Instant::now() + self.size.timeout;
        let apply = apply_waves(&ns, &self.fleet, self.size.waves, self.size.wave_gap);
        let ready = wait_ready(&ns, &names, deadline);
        tokio::join!(apply, self.driver.run("create", plan), ready);
        self.wait_out_backoffs(&names).await;
    }

    /// A ProxmoxVM that, when the deadline comes, is waiting out the backoff
    /// it announced after a failure the faults caused ("retrying in 80s") is
    /// not judged yet: the faults stop and it gets what it announced plus
    /// [`AFTER_BACKOFF`] to keep its word. Four failures in a row are rare
    /// but happen at these fault rates; the deadline alone would make the
    /// verdict depend on the dice.
    async fn wait_out_backoffs(&mut self, names: &BTreeSet<String>) {
        let ns = self.ns.name().to_owned();
        let objects = k8s::list(&k8s::vms(&ns)).await;
        let waiting: Vec<(&str, Duration)> = objects
            .iter()
            .filter(|o| names.contains(k8s::name(o)) && !k8s::is_ready(o))
            .filter_map(|o| Some((k8s::name(o), k8s::announced_retry(o)?)))
            .collect();
        let Some(longest) = waiting.iter().map(|(_, wait)| *wait).max() else {
            return;
        };
        let since = Instant::now();
        self.ledger.clear(&self.sim).await;
        eprintln!("chaos: faults off; waiting out announced backoffs: {waiting:?}");
        wait_ready(&ns, names, Instant::now() + longest + AFTER_BACKOFF).await;
        self.phase_done("wait out announced backoffs", since);
    }

    /// Faults off, a moment to settle, then the end state.
    async fn check_created(&mut self) {
        self.ledger.clear(&self.sim).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let objects = k8s::list(&k8s::vms(self.ns.name())).await;
        self.statuses
            .push(serde_json::to_string_pretty(&objects).unwrap_or_default());
        let resources: Vec<Resource> = self
            .fleet
            .iter()
            .map(|spec| {
                let object = objects
                    .iter()
                    .find(|o| k8s::name(o) == spec.name)
                    .cloned()
                    .unwrap_or_else(|| {
                        serde_json::json!({"metadata": {"name": spec.name, "namespace": self.ns.name()}})
                    });
                Resource::new(&object, spec.placement.clone())
            })
            .collect();
        let vms = state::vms(&self.sim).await;
        let tasks = state::create_tasks(&self.sim, &fleet::NODES).await;
        let log = self.log.snapshot();
        self.violations
            .extend(checks::created(&resources, &vms, &log, &tasks));
        self.tasks = tasks;
    }

    /// Faults on again; every ProxmoxVM deleted while the deletion
    /// schedule runs; then every ProviderConfig.
    async fn delete(&mut self) {
        let since = Instant::now();
        self.ledger.install(&self.sim).await;
        let ns = self.ns.name().to_owned();
        let vms_api = k8s::vms(&ns);
        k8s::delete_all(&vms_api).await;
        let plan = schedule::deletion(&self.size, &mut self.rng);
        let deadline = Instant::now() + self.size.timeout;
        tokio::join!(
            self.driver.run("delete", plan),
            wait_empty(&vms_api, deadline)
        );
        self.ledger.clear(&self.sim).await;
        self.phase_done("delete ProxmoxVMs", since);
        let since = Instant::now();
        let configs_api = k8s::configs(&ns);
        let configs = k8s::list(&configs_api).await;
        self.statuses
            .push(serde_json::to_string_pretty(&configs).unwrap_or_default());
        k8s::delete_all(&configs_api).await;
        wait_empty(&configs_api, Instant::now() + Duration::from_secs(60)).await;
        self.phase_done("delete ProviderConfigs", since);
        let vms = state::vms(&self.sim).await;
        let vms_left = k8s::list(&vms_api).await;
        let configs_left = k8s::list(&configs_api).await;
        self.violations
            .extend(checks::deleted(&vms, &vms_left, &configs_left));
    }

    /// Stops the replicas, searches for secrets, checks the run did what it
    /// claims, and gathers the figures.
    async fn finish(&mut self) -> Figures {
        self.driver.replicas.stop().await;
        let requests = self.log.finish(&self.sim).await;
        let events = events(self.ns.name()).await;
        let seen = match self.observer.take() {
            Some(observer) => observer.stop().await,
            None => Vec::new(),
        };
        self.search_secrets(&requests, &events);
        self.check_the_run(&requests);
        let (adoptions, traced) = blame::foreign_adoptions(&events, &requests, &self.tasks);
        self.violations.extend(adoptions);
        self.violations.extend(blame::blamed_configs(&seen));
        let capacity_waits = observer::time_in(&seen, "WaitingForCapacity", self.started.elapsed());
        let waits = capacity::waits(&seen, self.started_epoch, self.started.elapsed());
        let free_slot_wait = capacity::longest_with_a_free_slot(&waits, &self.tasks);
        let mut by_reason = BTreeMap::new();
        for event in &events {
            *by_reason
                .entry(event["reason"].as_str().unwrap_or_default().to_owned())
                .or_default() += event["count"].as_i64().unwrap_or(1);
        }
        let failed = |e: &&Value| matches!(e["status"].as_u64(), Some(0 | 500 | 595 | 596));
        Figures {
            size: self.size.clone(),
            phases: self.phases.clone(),
            mix: fleet::mix(&self.fleet),
            requests: requests.len(),
            failed_requests: requests.iter().filter(failed).count(),
            faults: self.ledger.by_kind().clone(),
            kills: self.driver.kills.clone(),
            restarts: self.driver.restarts.clone(),
            events: by_reason,
            adoptions_traced: traced,
            capacity_waits,
            free_slot_wait,
            violations: std::mem::take(&mut self.violations),
            logs: self.dir.display().to_string(),
        }
    }

    fn search_secrets(&mut self, requests: &[Value], events: &[Value]) {
        let mut haystacks = Vec::new();
        for (name, path) in self.driver.replicas.logs() {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if !text.contains(" DEBUG ") {
                self.violations.push(Violation::new(
                    Kind::Harness,
                    format!(
                        "{} has no debug lines: the search would miss them",
                        path.display()
                    ),
                ));
            }
            haystacks.push(Haystack {
                source: format!("log of {name}"),
                text,
            });
        }
        haystacks.push(Haystack {
            source: "pve-sim's output".into(),
            text: std::fs::read_to_string(&self.sim.log).unwrap_or_default(),
        });
        for (name, text) in self.driver.replicas.metrics() {
            haystacks.push(Haystack {
                source: format!("/metrics of {name}"),
                text,
            });
        }
        let lines = |values: &[Value]| {
            values
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        };
        haystacks.push(Haystack {
            source: "events".into(),
            text: lines(events),
        });
        haystacks.push(Haystack {
            source: "/_sim/requests".into(),
            text: lines(requests),
        });
        for (n, text) in self.statuses.iter().enumerate() {
            haystacks.push(Haystack {
                source: format!("status snapshot {}", n + 1),
                text: text.clone(),
            });
        }
        for leak in secrets::scan(&self.creds, &haystacks) {
            self.violations.push(Violation::new(
                Kind::SecretLeaked,
                format!(
                    "{} in {} line {}: {}",
                    leak.what, leak.source, leak.line, leak.excerpt
                ),
            ));
        }
    }

    /// The run must have injected everything it claims.
    fn check_the_run(&mut self, requests: &[Value]) {
        let mut harness = Vec::new();
        let creating: Vec<_> = self
            .driver
            .kills
            .iter()
            .filter(|k| k.phase == "create")
            .collect();
        let leader = creating.iter().filter(|k| k.was_leader).count();
        let dispatch = creating.iter().filter(|k| k.dispatch.is_some()).count();
        if creating.len() < self.size.kills
            || leader < self.size.leader_kills
            || dispatch < self.size.dispatch_kills
        {
            harness.push(format!(
                "{} kills while creating ({leader} of the leader, {dispatch} after a dispatch), \
                 asked for {} ({} of the leader, {} after a dispatch)",
                creating.len(),
                self.size.kills,
                self.size.leader_kills,
                self.size.dispatch_kills
            ));
        }
        if self.driver.restarts.is_empty() {
            harness.push("the kube-apiserver was never restarted".into());
        }
        for kind in Ledger::expected_kinds() {
            if self.ledger.by_kind().get(&kind).copied().unwrap_or(0) == 0 {
                harness.push(format!("no `{kind}` fault fired"));
            }
        }
        if self.log.missed() > 0 {
            harness.push(format!(
                "{} request log entries were dropped by pve-sim before they were read",
                self.log.missed()
            ));
        }
        if requests.is_empty() {
            harness.push("the request log is empty".into());
        }
        self.violations.extend(
            harness
                .into_iter()
                .map(|h| Violation::new(Kind::Harness, h)),
        );
        for crash in self.driver.replicas.crashes() {
            self.violations.push(Violation::new(
                Kind::Crashed,
                format!(
                    "{} exited with {}; last lines:\n{}",
                    crash.name, crash.status, crash.log_tail
                ),
            ));
        }
        for kill in self
            .driver
            .kills
            .iter()
            .filter(|k| k.was_leader && k.failover.is_none())
        {
            self.violations.push(Violation::new(
                Kind::NoFailover,
                format!(
                    "nobody led within 120 s after {} was killed at {:.1}s",
                    kill.victim,
                    kill.at.as_secs_f64()
                ),
            ));
        }
    }
}

/// How long a ProxmoxVM may take to be Ready once the backoff it announced
/// is over and the faults are off: a create or clone, a configure and a
/// start at the reduced time scale, with room for a busy machine.
const AFTER_BACKOFF: Duration = Duration::from_secs(120);

/// Applies the fleet, wave by wave.
async fn apply_waves(ns: &str, fleet: &[VmSpec], waves: usize, gap: Duration) {
    let api = k8s::vms(ns);
    for wave in 0..waves {
        if wave > 0 {
            tokio::time::sleep(gap).await;
        }
        for (index, vm) in fleet.iter().enumerate().filter(|(_, v)| v.wave == wave) {
            k8s::apply(&api, &fleet::manifest(vm, index)).await;
        }
        eprintln!("chaos: wave {} of {waves} applied", wave + 1);
    }
}

/// Waits until every ProxmoxVM named is Ready, or the deadline.
async fn wait_ready(ns: &str, names: &BTreeSet<String>, deadline: Instant) {
    let api = k8s::vms(ns);
    let mut last_report = Instant::now();
    loop {
        let objects = k8s::list(&api).await;
        let ready = objects
            .iter()
            .filter(|o| names.contains(k8s::name(o)) && k8s::is_ready(o))
            .count();
        if ready == names.len() || Instant::now() >= deadline {
            eprintln!("chaos: {ready} of {} ProxmoxVMs Ready", names.len());
            return;
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!("chaos: {ready} of {} ProxmoxVMs Ready", names.len());
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until `api` lists nothing, or the deadline.
async fn wait_empty(api: &kube::Api<kube::api::DynamicObject>, deadline: Instant) {
    while Instant::now() < deadline && !k8s::list(api).await.is_empty() {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The core v1 Events of `ns`, as JSON.
async fn events(ns: &str) -> Vec<Value> {
    k8s::list(&kube::Api::<Event>::namespaced(support::client(), ns)).await
}
