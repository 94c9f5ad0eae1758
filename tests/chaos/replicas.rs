//! Two replicas of the real `proxmox-provider` binary with leader election,
//! each a child process (so SIGKILL is real) logging at debug level to a
//! file of its own; a slot left empty by a kill or a crash is filled again
//! a second later, as a kubelet would restart the pod.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// How long a slot stays empty before its replica is started again.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// A replica process.
struct Process {
    /// `chaos-<slot>-<generation>`: `POD_NAME`, so the Lease holder
    /// (`<POD_NAME>-<random>`) tells which process leads.
    name: String,
    child: Child,
    metrics_port: u16,
}

struct Slot {
    letter: char,
    generation: u32,
    process: Option<Process>,
    down_since: Option<Instant>,
}

/// A replica that exited without being killed.
#[derive(Debug, Clone)]
pub struct Crash {
    pub name: String,
    pub status: String,
    pub log_tail: String,
}

/// What starting a replica needs.
struct Launch {
    binary: PathBuf,
    kubeconfig: PathBuf,
    namespace: String,
    dir: PathBuf,
}

struct State {
    launch: Launch,
    slots: Vec<Slot>,
    crashes: Vec<Crash>,
    /// The last `/metrics` of every process, by name.
    metrics: BTreeMap<String, String>,
    stopping: bool,
}

/// The replicas; cheap to clone (shared).
#[derive(Clone)]
pub struct Replicas {
    state: Arc<Mutex<State>>,
    stop: watch::Sender<bool>,
}

impl Replicas {
    /// Starts two replicas in `namespace` (their Leases live there), logging
    /// into `dir`, and the supervisor that restarts and scrapes them.
    pub fn start(kubeconfig: &Path, namespace: &str, dir: &Path) -> Self {
        Self::start_slots(kubeconfig, namespace, dir, &['a', 'b'])
    }

    /// The same with one replica per letter of `letters`.
    pub fn start_slots(kubeconfig: &Path, namespace: &str, dir: &Path, letters: &[char]) -> Self {
        let launch = Launch {
            binary: PathBuf::from(env!("CARGO_BIN_EXE_proxmox-provider")),
            kubeconfig: kubeconfig.to_owned(),
            namespace: namespace.to_owned(),
            dir: dir.to_owned(),
        };
        let slots = letters
            .iter()
            .map(|&letter| Slot {
                letter,
                generation: 0,
                process: None,
                down_since: Some(Instant::now() - RESTART_DELAY),
            })
            .collect();
        let (stop, stopped) = watch::channel(false);
        let replicas = Self {
            state: Arc::new(Mutex::new(State {
                launch,
                slots,
                crashes: Vec::new(),
                metrics: BTreeMap::new(),
                stopping: false,
            })),
            stop,
        };
        replicas.supervise_once();
        tokio::spawn(replicas.clone().supervise(stopped));
        replicas
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every 500 ms: notice crashes, refill empty slots; every 2 s: scrape.
    async fn supervise(self, mut stopped: watch::Receiver<bool>) {
        let mut tick = 0u32;
        loop {
            tokio::select! {
                _ = stopped.changed() => return,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
            self.supervise_once();
            tick += 1;
            if tick.is_multiple_of(4) {
                self.scrape().await;
            }
        }
    }

    fn supervise_once(&self) {
        let mut state = self.state();
        if state.stopping {
            return;
        }
        let State {
            launch,
            slots,
            crashes,
            ..
        } = &mut *state;
        for slot in slots.iter_mut() {
            if let Some(process) = &mut slot.process
                && let Ok(Some(status)) = process.child.try_wait()
            {
                let log = launch.dir.join(format!("{}.log", process.name));
                crashes.push(Crash {
                    name: process.name.clone(),
                    status: status.to_string(),
                    log_tail: tail(&log),
                });
                eprintln!(
                    "chaos: replica {} exited by itself ({status})",
                    process.name
                );
                slot.process = None;
                slot.down_since = Some(Instant::now());
            }
            if slot.process.is_none()
                && slot
                    .down_since
                    .is_some_and(|t| t.elapsed() >= RESTART_DELAY)
            {
                slot.generation += 1;
                slot.process = Some(launch.spawn(slot.letter, slot.generation));
                slot.down_since = None;
            }
        }
    }

    /// Fetches `/metrics` of every running replica.
    pub async fn scrape(&self) {
        let targets: Vec<(String, u16)> = self
            .state()
            .slots
            .iter()
            .filter_map(|s| s.process.as_ref())
            .map(|p| (p.name.clone(), p.metrics_port))
            .collect();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("a plain HTTP client");
        for (name, port) in targets {
            let url = format!("http://127.0.0.1:{port}/metrics");
            if let Ok(response) = http.get(&url).send().await
                && let Ok(text) = response.text().await
            {
                self.state().metrics.insert(name, text);
            }
        }
    }

    /// SIGKILLs the replica in `slot`; returns its name.
    pub fn kill(&self, slot: usize) -> Option<String> {
        let mut state = self.state();
        let slot = &mut state.slots[slot];
        let mut process = slot.process.take()?;
        // SIGKILL, then collect it: nothing of it runs after this.
        let _ = process.child.kill();
        let _ = process.child.wait();
        slot.down_since = Some(Instant::now());
        Some(process.name)
    }

    /// Freezes (SIGSTOP) the replica in `slot`; whether one ran there.
    pub fn freeze(&self, slot: usize) -> bool {
        self.signal(slot, testenv::Signal::Stop)
    }

    /// Resumes (SIGCONT) the replica in `slot`; whether one ran there.
    pub fn thaw(&self, slot: usize) -> bool {
        self.signal(slot, testenv::Signal::Cont)
    }

    fn signal(&self, slot: usize, signal: testenv::Signal) -> bool {
        let state = self.state();
        let Some(process) = &state.slots[slot].process else {
            return false;
        };
        testenv::ProcessId::of(process.child.id()).is_some_and(|id| id.signal(signal).is_ok())
    }

    /// The slot whose running process holds the Lease as `holder`.
    pub fn slot_of(&self, holder: &str) -> Option<usize> {
        self.state().slots.iter().position(|s| {
            s.process
                .as_ref()
                .is_some_and(|p| holder.starts_with(&format!("{}-", p.name)))
        })
    }

    /// The name of the process running in `slot`.
    pub fn name(&self, slot: usize) -> Option<String> {
        self.state().slots[slot]
            .process
            .as_ref()
            .map(|p| p.name.clone())
    }

    pub fn crashes(&self) -> Vec<Crash> {
        self.state().crashes.clone()
    }

    /// The last `/metrics` of every process that ever ran.
    pub fn metrics(&self) -> BTreeMap<String, String> {
        self.state().metrics.clone()
    }

    /// The log files of every process that ever ran, by name.
    pub fn logs(&self) -> Vec<(String, PathBuf)> {
        let state = self.state();
        let mut logs = Vec::new();
        for slot in &state.slots {
            for generation in 1..=slot.generation {
                let name = format!("chaos-{}-{generation}", slot.letter);
                let path = state.launch.dir.join(format!("{name}.log"));
                logs.push((name, path));
            }
        }
        logs
    }

    /// Scrapes once more, then kills every replica for good.
    pub async fn stop(&self) {
        self.scrape().await;
        let _ = self.stop.send(true);
        let mut state = self.state();
        state.stopping = true;
        for slot in &mut state.slots {
            if let Some(mut process) = slot.process.take() {
                let _ = process.child.kill();
                let _ = process.child.wait();
            }
        }
    }
}

impl Launch {
    /// `proxmox-provider run` with leader election, debug logs and metrics
    /// on a free loopback port.
    fn spawn(&self, letter: char, generation: u32) -> Process {
        let name = format!("chaos-{letter}-{generation}");
        let port = free_port();
        let log_path = self.dir.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path)
            .unwrap_or_else(|e| panic!("creating {}: {e}", log_path.display()));
        let mut command = Command::new(&self.binary);
        command
            .args(["run", "--leader-election=true", "--log-format=text"])
            .arg(format!("--metrics-addr=127.0.0.1:{port}"))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "debug")
            .env("POD_NAMESPACE", &self.namespace)
            .env("POD_NAME", &name)
            .env_remove("LEADER_ELECTION")
            .env_remove("METRICS_ADDR")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("log file handle")))
            .stderr(Stdio::from(log));
        let child = testenv::spawn_attached(command)
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.binary.display()));
        eprintln!("chaos: started replica {name} (pid {})", child.id());
        Process {
            name,
            child,
            metrics_port: port,
        }
    }
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The last lines of a log, for crash reports.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
