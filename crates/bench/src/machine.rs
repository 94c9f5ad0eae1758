//! Where and with what a run was made: machine, versions, command.

use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    pub memory_gib: f64,
    pub kernel: String,
    /// /proc/loadavg's 1-minute figure when the run began: the machine is
    /// shared, and other work changes every timing.
    pub load_average: f64,
    pub commit: String,
    pub rustc: String,
    pub provider: String,
    pub kube_apiserver: String,
    /// `release` or `debug` binaries.
    pub profile: String,
    /// The command line, with the `BENCH_*` variables set.
    pub command: String,
    pub started: f64,
}

impl Machine {
    pub fn describe(bin_dir: &Path, provider: &Path, kube_apiserver: String) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        let dirty = !output("git", &["status", "--porcelain", "--untracked-files=no"]).is_empty();
        let env: Vec<String> = std::env::vars()
            .filter(|(k, _)| k.starts_with("BENCH_"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let argv: Vec<String> = std::env::args().collect();
        Self {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
                .unwrap_or_default(),
            memory_gib: mem_kib / (1024.0 * 1024.0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            load_average: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|l| l.split_whitespace().next()?.parse().ok())
                .unwrap_or(0.0),
            commit: format!(
                "{}{}",
                output("git", &["rev-parse", "--short", "HEAD"]),
                if dirty { " (modified)" } else { "" }
            ),
            rustc: output("rustc", &["--version"]),
            provider: output(&provider.display().to_string(), &["--version"]),
            kube_apiserver,
            profile: bin_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            command: [env, argv].concat().join(" "),
            started: crate::clock::now(),
        }
    }
}

/// A command's trimmed stdout, or empty.
fn output(program: &str, args: &[&str]) -> String {
    std::process::Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}
