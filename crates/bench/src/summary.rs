//! The figures of one run, computed from its records.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::audit;
use crate::child::Sample;
use crate::cli::Variant;
use crate::headline::Headline;
use crate::ideal::Ideal;
use crate::phases::per_node;
use crate::referee::{RequestStats, max_concurrent, next_step_latency};
use crate::run::Run;
use crate::stats::{Dist, at};
use crate::workload::VmState;

/// API server requests of one phase.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ApiStats {
    pub total: u64,
    /// `verb resource` → requests.
    pub by_key: BTreeMap<String, u64>,
    pub status_writes: u64,
}

impl ApiStats {
    fn of(events: &[audit::Event], from: f64, to: f64) -> Self {
        let by_key = audit::by_key(events, from, to);
        Self {
            total: by_key.values().sum(),
            status_writes: events
                .iter()
                .filter(|e| e.time >= from && e.time < to && e.is_status_write())
                .count() as u64,
            by_key,
        }
    }
}

/// The process under test.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProcessStats {
    pub peak_rss_mib: f64,
    pub cpu_seconds_creating: Option<f64>,
    pub cpu_seconds_idle: Option<f64>,
    pub cpu_seconds_deleting: Option<f64>,
    pub cpu_seconds_total: f64,
}

impl ProcessStats {
    /// From a process's samples: the peak, and the CPU seconds spent in
    /// each window (creating, idle, deleting) that is known.
    pub fn of(
        samples: &[Sample],
        creating: (f64, f64),
        idle: Option<(f64, f64)>,
        deleting: Option<(f64, f64)>,
    ) -> Self {
        let cpu: Vec<(f64, f64)> = samples.iter().map(|s| (s.time, s.cpu_seconds)).collect();
        let cpu_between = |(a, b): (f64, f64)| Some(at(&cpu, b)? - at(&cpu, a)?);
        Self {
            peak_rss_mib: samples.iter().map(|s| s.peak_rss_kib).max().unwrap_or(0) as f64 / 1024.0,
            cpu_seconds_creating: cpu_between(creating),
            cpu_seconds_idle: idle.and_then(cpu_between),
            cpu_seconds_deleting: deleting.and_then(cpu_between),
            cpu_seconds_total: samples.last().map_or(0.0, |s| s.cpu_seconds),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    pub variant: Variant,
    pub title: String,
    pub vms: usize,
    /// Every VM Ready, and later every VM gone.
    pub created: bool,
    pub deleted: bool,
    pub ready: usize,
    /// Apply → all Ready (or to the timeout).
    pub create_seconds: f64,
    pub ideal: Ideal,
    pub time_to_ready: Option<Dist>,
    pub next_step_latency: Option<Dist>,
    pub proxmox_creating: RequestStats,
    pub proxmox_idle: Option<RequestStats>,
    pub proxmox_deleting: Option<RequestStats>,
    pub api_creating: Option<ApiStats>,
    pub api_idle: Option<ApiStats>,
    pub api_deleting: Option<ApiStats>,
    pub process: ProcessStats,
    /// The processes beside it (kube-apiserver, etcd, pve-sim, the bench),
    /// by command name.
    #[serde(default)]
    pub neighbours: BTreeMap<String, ProcessStats>,
    /// `/cluster/nextid` calls, creates sent and VMIDs recorded
    /// (external-name values), all while creating.
    pub nextid_calls: u64,
    pub creates_sent: u64,
    pub vmids_recorded: usize,
    /// The simulator's VMs when all were Ready.
    pub vms_per_node: BTreeMap<String, usize>,
    pub sim_vms: usize,
    pub sim_vm_names_distinct: usize,
    /// The most `qmcreate` tasks at once per node, and the limit.
    pub max_imports_per_node: BTreeMap<String, usize>,
    pub import_limit: usize,
    pub delete_seconds: Option<f64>,
    pub idle_seconds: Option<f64>,
    /// Status writes while idle to VMs whose guest agent had answered
    /// before the idle window began: what a Ready VM that learns nothing
    /// new costs (the others are late addresses of the last VMs to start).
    #[serde(default)]
    pub idle_status_writes_settled: Option<u64>,
    pub stalls: Vec<String>,
    /// Drift made by hand after the idle window (`--drift`).
    #[serde(default)]
    pub drift: Option<crate::drift::DriftProbe>,
    /// The run's logs and raw records, relative to the repository root
    /// when they are inside it ([`repo_relative`]).
    pub dir: String,
    pub headline: Headline,
}

pub fn summarize(run: &Run, import_limit: usize, nodes: &[String], time_scale: f64) -> Summary {
    summarize_within(run, (import_limit, budget(run.variant)), nodes, time_scale)
}

/// [`summarize`] for a run whose config has a request budget of its own
/// (`rps`, the fleet's): the delete's ideal lets its writes through at
/// that rate, not the default's.
pub fn summarize_within(
    run: &Run,
    (import_limit, rps): (usize, Option<f64>),
    nodes: &[String],
    time_scale: f64,
) -> Summary {
    let mut summary = figures(run, (import_limit, rps), nodes, time_scale);
    summary.headline = Headline::of(&summary);
    summary
}

fn figures(
    run: &Run,
    (import_limit, rps): (usize, Option<f64>),
    nodes: &[String],
    time_scale: f64,
) -> Summary {
    let p = &run.phases;
    let last_request = run.requests.last().map_or(p.start, |r| r.time) + 1.0;
    let create_end = p.all_ready.or(p.delete_start).unwrap_or(last_request);
    let idle = p.idle_start.or(p.all_ready).zip(p.idle_end);
    let delete = p
        .delete_start
        .map(|d| (d, p.all_gone.unwrap_or(last_request)));
    let vms_per_node = per_node(&run.sim_vms, nodes);
    let n = run.vms;
    let proxmox_creating = RequestStats::of(&run.requests, p.start, create_end);
    let with_audit = |from: f64, to: f64| {
        (run.variant != Variant::Predecessor).then(|| ApiStats::of(&run.audit, from, to))
    };
    let mut names: Vec<&str> = run.sim_vms.iter().map(|v| v.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let windows: Vec<(f64, f64)> = [Some((p.start, create_end)), delete]
        .into_iter()
        .flatten()
        .collect();
    Summary {
        variant: run.variant,
        title: run.variant.title().to_owned(),
        vms: n,
        created: p.all_ready.is_some(),
        deleted: p.all_gone.is_some(),
        ready: run.per_vm.values().filter(|v| v.ready_at.is_some()).count(),
        create_seconds: create_end - p.start,
        ideal: Ideal::of(
            n,
            (import_limit, rps),
            time_scale,
            &vms_per_node,
            &run.tasks,
        ),
        time_to_ready: Dist::of(
            run.per_vm
                .values()
                .filter_map(|v| Some(v.ready_at? - v.created_at))
                .collect(),
        ),
        next_step_latency: next_step_latency(&run.tasks, &run.requests, &windows),
        proxmox_idle: idle.map(|(a, b)| RequestStats::of(&run.requests, a, b)),
        proxmox_deleting: delete.map(|(a, b)| RequestStats::of(&run.requests, a, b)),
        api_creating: with_audit(p.start, create_end),
        api_idle: idle.and_then(|(a, b)| with_audit(a, b)),
        api_deleting: delete.and_then(|(a, b)| with_audit(a, b)),
        process: ProcessStats::of(&run.samples, (p.start, create_end), idle, delete),
        neighbours: run
            .neighbours
            .iter()
            .map(|n| {
                let stats = ProcessStats::of(&n.samples, (p.start, create_end), idle, delete);
                (n.name.clone(), stats)
            })
            .collect(),
        nextid_calls: proxmox_creating.route("GET /cluster/nextid"),
        creates_sent: proxmox_creating.route("POST /nodes/{node}/qemu"),
        vmids_recorded: run.per_vm.values().map(|v| v.external_names.len()).sum(),
        proxmox_creating,
        sim_vms: run.sim_vms.len(),
        sim_vm_names_distinct: names.len(),
        vms_per_node,
        max_imports_per_node: max_concurrent(&run.tasks, "qmcreate"),
        import_limit,
        delete_seconds: delete.filter(|_| p.all_gone.is_some()).map(|(a, b)| b - a),
        idle_seconds: idle.map(|(a, b)| b - a),
        idle_status_writes_settled: idle
            .filter(|_| run.variant != Variant::Predecessor)
            .map(|(a, b)| settled_writes(&run.audit, &run.per_vm, a, b)),
        stalls: run.stalls.clone(),
        drift: p.drift.clone(),
        dir: repo_relative(&run.dir, &testenv::repo_root()),
        headline: Headline::default(),
    }
}

/// The provider's request budget (requests per second, default limits);
/// the naive loop has none.
pub fn budget(variant: Variant) -> Option<f64> {
    (variant != Variant::Predecessor).then(|| {
        f64::from(provider_proxmox::api::provider_config::Limits::default().requests_per_second)
    })
}

/// Status writes in `[from, to)` to VMs whose guest agent had answered
/// before `from`.
fn settled_writes(
    events: &[audit::Event],
    vms: &BTreeMap<String, VmState>,
    from: f64,
    to: f64,
) -> u64 {
    let settled = |name: &Option<String>| {
        name.as_ref()
            .and_then(|n| vms.get(n))
            .and_then(|v| v.agent_at)
            .is_some_and(|at| at < from)
    };
    events
        .iter()
        .filter(|e| e.time >= from && e.time < to && e.is_status_write() && settled(&e.name))
        .count() as u64
}

/// `path` relative to the repository `root` when it lies inside it, else
/// as given. The bench makes its work directory absolute for the processes
/// it starts; what it records and writes into BENCHMARKS.md must not name
/// the directories of the machine it ran on.
pub fn repo_relative(path: &Path, root: &Path) -> String {
    let inside = path
        .strip_prefix(root)
        .ok()
        .map(Path::to_path_buf)
        .or_else(|| {
            // The same directories reached through a symlink.
            let (path, root) = (path.canonicalize().ok()?, root.canonicalize().ok()?);
            path.strip_prefix(root).ok().map(Path::to_path_buf)
        });
    match inside {
        Some(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
        Some(relative) => relative.display().to_string(),
        None => path.display().to_string(),
    }
}

impl Summary {
    /// One VM per resource on the simulator, named after it.
    pub fn one_vm_per_resource(&self) -> bool {
        self.sim_vms == self.vms && self.sim_vm_names_distinct == self.vms
    }

    /// The most imports at once on any node.
    pub fn max_imports(&self) -> usize {
        self.max_imports_per_node
            .values()
            .copied()
            .max()
            .unwrap_or(0)
    }
}
