//! The `sharded` variant's part of a run's Markdown section: each config's
//! wall time against the same run's `batched` variant (one config, one
//! replica, the same N: "alone"), the replicas' CPU, memory and configs,
//! what the Leases cost the API server, then every config's figures as the
//! other variants have them.

use std::fmt::Write as _;

use crate::cli::Variant;
use crate::markdown::{Column, PROCESS_ROWS, details, figures_table};
use crate::report::Report;
use crate::sharded::{Phased, Sharded, Traffic};
use crate::summary::Summary;

/// Issue 18's target: each config's wall time within this factor of the
/// same config's run alone.
pub const TARGET: f64 = 1.2;

/// One config against its run alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub config: String,
    pub holder: Option<String>,
    pub ready: usize,
    pub vms: usize,
    /// Apply → all Ready, when all became Ready; alone, and the ratio.
    pub wall: Option<f64>,
    pub alone: Option<f64>,
    pub ratio: Option<f64>,
    pub wall_over_ideal: Option<f64>,
    /// Delete → all gone; alone, and the ratio.
    pub delete: Option<f64>,
    pub delete_alone: Option<f64>,
    pub delete_ratio: Option<f64>,
}

impl Comparison {
    /// Whether the wall time is within [`TARGET`] of alone (`None`: not
    /// comparable).
    pub fn within_target(&self) -> Option<bool> {
        self.ratio.map(|r| r <= TARGET)
    }
}

/// Each config of `sharded` against `alone` (a run of the same N with one
/// config and one replica); ratios only where both got every VM Ready (or
/// gone).
pub fn compare(alone: Option<&Summary>, sharded: &Sharded) -> Vec<Comparison> {
    let ratio = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => Some(x / y),
        _ => None,
    };
    let alone_wall = alone.and_then(|a| a.headline.wall_seconds);
    let alone_delete = alone.and_then(|a| a.delete_seconds);
    sharded
        .configs
        .iter()
        .zip(&sharded.config_names)
        .map(|(s, name)| Comparison {
            config: name.clone(),
            holder: sharded.holders.get(name).cloned().flatten(),
            ready: s.ready,
            vms: s.vms,
            wall: s.headline.wall_seconds,
            alone: alone_wall,
            ratio: ratio(s.headline.wall_seconds, alone_wall),
            wall_over_ideal: s.headline.wall_over_ideal,
            delete: s.delete_seconds,
            delete_alone: alone_delete,
            delete_ratio: ratio(s.delete_seconds, alone_delete),
        })
        .collect()
}

fn f1(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1}"))
}

fn times(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}×"))
}

/// Writes the sharded part of `report`'s section.
pub fn section(md: &mut String, report: &Report, sharded: &Sharded) {
    let alone = report
        .variants
        .iter()
        .find(|s| s.variant == Variant::Batched);
    let _ = writeln!(
        md,
        "\n### provider, sharded: {} configs × {} replicas, a Lease per config ({} VMs per config)\n",
        sharded.configs.len(),
        sharded.replicas.len(),
        report.vms
    );
    let _ = writeln!(
        md,
        "Each config on a simulator of its own (the nodes and time scale above), its {} VMs \
         applied at the same moment as the others'; the replicas share the machine with the \
         simulators and the control plane. *Alone*: this run's batched variant (the same N, \
         one config, one replica). Issue 18's target: each config's wall time within {TARGET}× \
         of alone.\n",
        report.vms
    );
    let rows = compare(alone, sharded);
    let _ = writeln!(
        md,
        "| config | held by | VMs Ready | wall time, apply → all Ready (s) | alone (s) | ÷ alone | wall ÷ ideal | delete → all gone (s) | alone (s) | ÷ alone |\n\
         |---|---|---|---|---|---|---|---|---|---|"
    );
    for c in &rows {
        let verdict = match c.within_target() {
            Some(true) => format!("{} (≤ {TARGET})", times(c.ratio)),
            Some(false) => format!("**{}** (over {TARGET})", times(c.ratio)),
            None => "–".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} / {} | {} | {} | {verdict} | {} | {} | {} | {} |",
            c.config,
            c.holder.as_deref().unwrap_or("–"),
            c.ready,
            c.vms,
            f1(c.wall),
            f1(c.alone),
            c.wall_over_ideal.map_or("–".into(), |v| format!("{v:.2}")),
            f1(c.delete),
            f1(c.delete_alone),
            times(c.delete_ratio),
        );
    }
    if alone.is_none() {
        let _ = writeln!(
            md,
            "\nNo batched variant in this run: nothing to compare with (run `BENCH_VARIANTS=batched,sharded`)."
        );
    }
    replicas(md, sharded);
    leases(md, sharded);
    let _ = writeln!(
        md,
        "\nEvery config's figures, as the other variants have them (the process rows are the \
         replicas', above):\n"
    );
    let alone = alone.map(|a| Summary {
        title: format!("alone: {}", a.title),
        ..a.clone()
    });
    let mut columns: Vec<Column> = alone
        .iter()
        .map(|a| Column {
            summary: a,
            name: "alone".to_owned(),
        })
        .collect();
    columns.extend(
        sharded
            .configs
            .iter()
            .zip(&sharded.config_names)
            .map(|(s, name)| Column {
                summary: s,
                name: name.clone(),
            }),
    );
    let base = alone.as_ref().map(|_| 0);
    if figures_table(md, &columns, base, PROCESS_ROWS) {
        let _ = writeln!(
            md,
            "\nRatios are left out where a config did not get every VM Ready."
        );
    }
    for s in &sharded.configs {
        details(md, s, "####");
    }
}

/// A window's length, for column headings.
fn seconds(p: &Phased<Traffic>) -> [String; 3] {
    p.each().map(|(name, t)| match t {
        Some(t) => format!("{name} ({:.0} s)", t.seconds),
        None => format!("{name} (–)"),
    })
}

fn replicas(md: &mut String, sharded: &Sharded) {
    let _ = writeln!(
        md,
        "\n**Per replica** (configs held: the config Leases it wrote over the run, renewals \
         included; CPU in the phases of the whole run, from the first apply to the last config \
         Ready, the common idle window, the common delete to the last config gone):\n"
    );
    let _ = writeln!(
        md,
        "| replica | configs held (Lease writes) | VMs of those configs | CPU creating / idle / deleting (s) | CPU in all (s) | peak RSS (MiB) | API server requests per minute, creating / idle / deleting |\n\
         |---|---|---|---|---|---|---|"
    );
    let vms_of = |config: &str| {
        sharded
            .config_names
            .iter()
            .position(|n| n == config)
            .map_or(0, |i| sharded.configs[i].vms)
    };
    for r in &sharded.replicas {
        let held = if r.lease_writes.is_empty() {
            "none".to_owned()
        } else {
            r.lease_writes
                .iter()
                .map(|(c, n)| format!("{c} ({n})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let vms: usize = r.lease_writes.keys().map(|c| vms_of(c)).sum();
        let p = &r.process;
        let per_minute = r
            .traffic
            .each()
            .map(|(_, t)| f1(t.and_then(|t| t.per_minute(t.total))));
        let _ = writeln!(
            md,
            "| {} | {held} | {vms} | {} / {} / {} | {:.1} | {:.1} | {} |",
            r.name,
            f1(p.cpu_seconds_creating),
            f1(p.cpu_seconds_idle),
            f1(p.cpu_seconds_deleting),
            p.cpu_seconds_total,
            p.peak_rss_mib,
            per_minute.join(" / "),
        );
    }
}

fn leases(md: &mut String, sharded: &Sharded) {
    let [c, i, d] = seconds(&sharded.all);
    let _ = writeln!(
        md,
        "\n**What the Leases cost the API server**: requests per minute, all of them / Lease \
         requests (`list`, `update`, `create`, `delete` of `leases`), by the credential of each \
         replica's token; a config's row counts the requests naming its Lease.\n"
    );
    let _ = writeln!(md, "| | {c} | {i} | {d} |\n|---|---|---|---|");
    let cell = |t: Option<&Traffic>, all: bool| match t {
        Some(t) => {
            let lease = f1(t.per_minute(t.lease_total()));
            if all {
                format!("{} / {lease}", f1(t.per_minute(t.total)))
            } else {
                lease
            }
        }
        None => "–".into(),
    };
    let row = |md: &mut String, label: &str, p: &Phased<Traffic>, all: bool| {
        let cells = p.each().map(|(_, t)| cell(t, all));
        let _ = writeln!(md, "| {label} | {} |", cells.join(" | "));
    };
    row(
        md,
        "the provider's ServiceAccount, every replica",
        &sharded.all,
        true,
    );
    for r in &sharded.replicas {
        row(md, &format!("… {}", r.name), &r.traffic, true);
    }
    for (config, p) in &sharded.config_leases {
        row(md, &format!("Lease of {config}"), p, false);
    }
    let by_verb = |t: Option<&Traffic>| match t {
        Some(t) if !t.leases.is_empty() => t
            .leases
            .iter()
            .map(|(verb, n)| format!("{verb} {}", f1(t.per_minute(*n))))
            .collect::<Vec<_>>()
            .join(", "),
        _ => "–".into(),
    };
    let verbs = sharded.all.each().map(|(_, t)| by_verb(t));
    let _ = writeln!(
        md,
        "| Lease requests by verb, every replica | {} |",
        verbs.join(" | ")
    );
    if sharded.unattributed > 0 {
        let _ = writeln!(
            md,
            "\n{} requests named no replica's credential (the audit log had no credential id for them).",
            sharded.unattributed
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headline::Headline;
    use crate::sharded::ReplicaSummary;
    use crate::summary::ProcessStats;

    /// A run's figures with only what the comparison reads.
    fn summary(vms: usize, ready: usize, wall: f64, delete: Option<f64>) -> Summary {
        let json = serde_json::json!({
            "variant": "sharded", "title": "t", "vms": vms,
            "created": ready == vms, "deleted": delete.is_some(), "ready": ready,
            "create_seconds": wall,
            "ideal": {"nominal": {"create": 3.0, "resize": 0.1, "start": 0.2}, "even": 40.0, "as_placed": null, "measured": null},
            "time_to_ready": null, "next_step_latency": null,
            "proxmox_creating": {"total": 0, "seconds": 1.0, "peak_per_second": {}, "by_route": {}, "errors": 0},
            "proxmox_idle": null, "proxmox_deleting": null,
            "api_creating": null, "api_idle": null, "api_deleting": null,
            "process": {"peak_rss_mib": 0.0, "cpu_seconds_creating": null, "cpu_seconds_idle": null,
                        "cpu_seconds_deleting": null, "cpu_seconds_total": 0.0},
            "nextid_calls": 0, "creates_sent": 0, "vmids_recorded": 0,
            "vms_per_node": {}, "sim_vms": 0, "sim_vm_names_distinct": 0,
            "max_imports_per_node": {}, "import_limit": 2,
            "delete_seconds": delete, "idle_seconds": null, "stalls": [], "dir": ".",
            "headline": serde_json::to_value(Headline::default()).unwrap(),
        });
        let mut s: Summary = serde_json::from_value(json).unwrap();
        s.headline = Headline::of(&s);
        s
    }

    fn sharded(configs: Vec<Summary>) -> Sharded {
        let names: Vec<String> = (0..configs.len())
            .map(crate::sharded::config_name)
            .collect();
        Sharded {
            holders: names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), (i > 0).then(|| "bench-replica-b".to_owned())))
                .collect(),
            config_names: names,
            configs,
            replicas: vec![ReplicaSummary {
                name: "bench-replica-b".into(),
                process: ProcessStats::default(),
                lease_writes: [("bench-sharded-b".to_owned(), 90)].into(),
                traffic: Phased::default(),
            }],
            all: Phased::default(),
            unattributed: 0,
            config_leases: Default::default(),
        }
    }

    #[test]
    fn each_config_is_divided_by_its_run_alone() {
        let alone = summary(100, 100, 50.0, Some(20.0));
        let s = sharded(vec![
            summary(100, 100, 55.0, Some(25.0)),
            summary(100, 100, 61.0, None),
            summary(100, 80, 300.0, Some(30.0)),
        ]);
        let rows = compare(Some(&alone), &s);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].config, "bench-sharded-a");
        assert_eq!(rows[0].holder, None);
        assert_eq!(rows[1].holder.as_deref(), Some("bench-replica-b"));
        assert!((rows[0].ratio.unwrap() - 1.1).abs() < 1e-9);
        assert_eq!(rows[0].within_target(), Some(true));
        assert!((rows[0].delete_ratio.unwrap() - 1.25).abs() < 1e-9);
        assert!((rows[1].ratio.unwrap() - 1.22).abs() < 1e-9);
        assert_eq!(rows[1].within_target(), Some(false));
        assert_eq!(rows[1].delete_ratio, None, "not all gone");
        // Not every VM Ready: no wall time, no ratio.
        assert_eq!(
            (rows[2].wall, rows[2].ratio, rows[2].within_target()),
            (None, None, None)
        );
        assert_eq!(rows[2].wall_over_ideal, None);
        // Alone timed out, or did not run: nothing to divide by.
        let timed_out = summary(100, 90, 300.0, Some(20.0));
        assert!(
            compare(Some(&timed_out), &s)
                .iter()
                .all(|c| c.ratio.is_none())
        );
        assert!(
            compare(None, &s)
                .iter()
                .all(|c| c.ratio.is_none() && c.alone.is_none())
        );
    }

    #[test]
    fn the_section_marks_a_missed_target() {
        let report_json = serde_json::json!({
            "label": "l", "vms": 100, "nodes": ["pve1"], "time_scale": 0.1,
            "idle_seconds": 0, "timeout_seconds": 1, "machine": {
                "cores": 2, "cpu": "c", "memory_gib": 1.0, "kernel": "k", "load_average": 0.5,
                "commit": "abc", "rustc": "r", "provider": "p", "kube_apiserver": "v",
                "profile": "release", "command": "make bench", "started": 0.0},
            "variants": [],
        });
        let mut report: Report = serde_json::from_value(report_json).unwrap();
        let mut alone = summary(100, 100, 50.0, Some(20.0));
        alone.variant = Variant::Batched;
        alone.title = "provider, batched task observation".into();
        report.variants.push(alone);
        report.sharded = Some(sharded(vec![
            summary(100, 100, 55.0, Some(25.0)),
            summary(100, 100, 65.0, Some(25.0)),
        ]));
        let md = crate::markdown::section(&report);
        assert!(
            md.contains("| bench-sharded-a | – | 100 / 100 | 55.0 | 50.0 | 1.10× (≤ 1.2) |"),
            "{md}"
        );
        assert!(md.contains("| bench-sharded-b | bench-replica-b | 100 / 100 | 65.0 | 50.0 | **1.30×** (over 1.2) |"), "{md}");
        assert!(
            md.contains("| bench-replica-b | bench-sharded-b (90) | 100 |"),
            "{md}"
        );
        assert!(md.contains("bench-sharded-a ÷ alone"), "{md}");
        let own = &md[md.find("### provider, sharded").unwrap()..];
        assert!(
            !own.contains("\n| peak RSS (MiB) |"),
            "process rows are the replicas': {own}"
        );
        assert!(
            md.contains("\n| peak RSS (MiB) |"),
            "the variants' table has them"
        );
        // The variants' own section, then the sharded one.
        assert_eq!(md.matches("\n### ").count(), 2, "{md}");
        assert_eq!(md.matches("\n#### ").count(), 2, "{md}");
    }
}
