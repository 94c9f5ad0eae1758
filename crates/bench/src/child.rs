//! Child processes: spawning with logs to a file, stopping with SIGTERM,
//! and sampling their CPU time and memory from /proc.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;
use tokio::process::{Child, Command};

use crate::clock::now;

/// Spawns `command` with stdout and stderr appended to `log`; it is killed
/// if its handle is dropped (a failed run leaves nothing behind).
pub fn spawn_logged(mut command: Command, log: &Path) -> anyhow::Result<Child> {
    let file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let stderr = file.try_clone().context("duplicating a log file handle")?;
    command
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(stderr)
        .kill_on_drop(true);
    command
        .spawn()
        .with_context(|| format!("starting {:?}", command.as_std().get_program()))
}

/// SIGTERM, then SIGKILL after `grace`. (`kill(1)`: this workspace has no
/// unsafe code, so no direct `kill(2)`.)
pub async fn terminate(child: &mut Child, grace: Duration) {
    if let Some(pid) = child.id() {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// One reading of a process's /proc files.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the epoch.
    pub time: f64,
    /// User + system CPU seconds so far.
    pub cpu_seconds: f64,
    /// Resident set now, KiB.
    pub rss_kib: u64,
    /// Peak resident set so far (VmHWM), KiB.
    pub peak_rss_kib: u64,
}

/// Clock ticks per second of /proc/<pid>/stat times.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Reads `pid`'s CPU time and memory; `None` once it is gone.
pub fn sample(pid: u32, ticks: f64) -> Option<Sample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let cpu_ticks = parse_cpu_ticks(&stat)?;
    Some(Sample {
        time: now(),
        cpu_seconds: cpu_ticks as f64 / ticks,
        rss_kib: status_kib(&status, "VmRSS").unwrap_or(0),
        peak_rss_kib: status_kib(&status, "VmHWM").unwrap_or(0),
    })
}

/// utime + stime from /proc/<pid>/stat. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after the last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A `Key:   123 kB` line of /proc/<pid>/status.
fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// Samples a process every second until stopped.
pub struct Sampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    task: tokio::task::JoinHandle<()>,
    pid: u32,
    ticks: f64,
}

impl Sampler {
    pub fn start(pid: u32) -> Self {
        let ticks = clock_ticks();
        let samples = Arc::new(Mutex::new(Vec::new()));
        let shared = samples.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                match sample(pid, ticks) {
                    Some(s) => shared.lock().unwrap_or_else(|e| e.into_inner()).push(s),
                    None => return,
                }
            }
        });
        Self {
            samples,
            task,
            pid,
            ticks,
        }
    }

    /// A reading now (also recorded), for exact phase boundaries.
    pub fn mark(&self) -> Option<Sample> {
        let s = sample(self.pid, self.ticks)?;
        self.samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(s);
        Some(s)
    }

    /// Stops sampling (take a last `mark` first) and returns the series.
    pub fn finish(self) -> Vec<Sample> {
        self.task.abort();
        let mut samples =
            std::mem::take(&mut *self.samples.lock().unwrap_or_else(|e| e.into_inner()));
        samples.sort_by(|a, b| a.time.total_cmp(&b.time));
        samples
    }
}

/// The processes the provider shares the machine with, sampled beside it:
/// the API server and etcd, the simulator, the bench itself. Their CPU per
/// phase says what bounds a phase that the provider's own does not explain
/// (docs/scaling.md: the 10,000-VM delete is the machine's CPU, most of it
/// the API server's).
pub struct Neighbours(Vec<(String, Sampler)>);

/// One neighbour's readings, named after its command.
#[derive(Clone, Debug, Serialize)]
pub struct Neighbour {
    pub name: String,
    pub samples: Vec<Sample>,
}

impl Neighbours {
    /// Samples each of `pids` (named by `/proc/<pid>/comm`) and this
    /// process (as `provider-bench`).
    pub fn start(pids: &[u32]) -> Self {
        let mut named: Vec<(String, Sampler)> = pids
            .iter()
            .map(|&pid| (command_name(pid), Sampler::start(pid)))
            .collect();
        named.push((
            "provider-bench".to_owned(),
            Sampler::start(std::process::id()),
        ));
        Self(named)
    }

    /// Stops sampling; `also` (e.g. the simulator's own series) joins them.
    pub fn finish(self, also: Option<Neighbour>) -> Vec<Neighbour> {
        let mut all: Vec<Neighbour> = self
            .0
            .into_iter()
            .map(|(name, sampler)| {
                sampler.mark();
                Neighbour {
                    name,
                    samples: sampler.finish(),
                }
            })
            .collect();
        all.extend(also);
        all
    }
}

/// A process's command name (`/proc/<pid>/comm`), or its PID.
fn command_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_owned())
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| format!("pid {pid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_counted_after_the_command_name() {
        let stat = "4242 (tokio (rt) x) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0 100 200 300";
        assert_eq!(parse_cpu_ticks(stat), Some(300));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn status_lines_give_kib() {
        let status = "Name:\tx\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(51200));
        assert_eq!(status_kib(status, "VmRSS"), Some(40960));
        assert_eq!(status_kib(status, "VmSwap"), None);
    }

    #[test]
    fn a_process_is_named_after_its_command() {
        let name = command_name(std::process::id());
        assert!(!name.is_empty() && !name.starts_with("pid "), "{name}");
        assert_eq!(command_name(u32::MAX), format!("pid {}", u32::MAX));
    }

    #[test]
    fn this_process_can_be_sampled() {
        let s = sample(std::process::id(), clock_ticks()).unwrap();
        assert!(s.peak_rss_kib >= s.rss_kib && s.rss_kib > 0, "{s:?}");
    }
}
