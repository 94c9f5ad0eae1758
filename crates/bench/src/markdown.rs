//! The Markdown section of a run in BENCHMARKS.md: one table with a column
//! per variant and ratio columns against the provider's default (batched),
//! then the API server and Proxmox requests by kind, and where a phase
//! stuck. A later run with the same label and size replaces its section.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::cli::Variant;
use crate::clock::utc_minute;
use crate::report::Report;
use crate::stats::Dist;
use crate::summary::{ProcessStats, Summary, repo_relative};

/// A table cell: a number (ratios are taken of these) or text.
enum Cell {
    Num(Option<f64>, usize),
    Text(String),
}

fn num(v: Option<f64>, decimals: usize) -> Cell {
    Cell::Num(v, decimals)
}

fn fmt_num(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

fn dist(d: Option<Dist>) -> Cell {
    text(d.map_or("–".into(), |d| {
        format!("{:.1} / {:.1} / {:.1}", d.p50, d.p90, d.max)
    }))
}

fn text(s: impl Into<String>) -> Cell {
    Cell::Text(s.into())
}

type Row = (&'static str, fn(&Summary) -> Cell);

/// The table's rows: a label and how to get the cell from a run.
const ROWS: &[Row] = &[
    ("VMs Ready", |s| text(format!("{} / {}", s.ready, s.vms))),
    ("wall time, apply → all Ready (s)", |s| {
        match s.headline.wall_seconds {
            Some(w) => num(Some(w), 1),
            None => text(format!("> {:.0} (timed out)", s.create_seconds)),
        }
    }),
    ("ideal, VMs spread evenly (s)", |s| {
        num(Some(s.ideal.even), 1)
    }),
    ("wall ÷ ideal", |s| num(s.headline.wall_over_ideal, 2)),
    (
        "ideal for the run's placement, nominal / measured task times (s)",
        |s| {
            let f = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
            text(format!(
                "{} / {}",
                f(s.ideal.as_placed),
                f(s.ideal.measured)
            ))
        },
    ),
    ("time to Ready per VM, p50 / p90 / max (s)", |s| {
        dist(s.time_to_ready)
    }),
    ("next step after a task ends, p50 / p90 / max (s)", |s| {
        dist(s.next_step_latency)
    }),
    ("Proxmox requests while creating", |s| {
        num(Some(s.proxmox_creating.total as f64), 0)
    }),
    ("… per VM", |s| {
        num(Some(s.headline.proxmox_creating_per_vm), 1)
    }),
    ("… task status polls per VM", |s| {
        num(Some(s.headline.task_status_polls_per_vm), 1)
    }),
    ("… task list reads per VM", |s| {
        num(Some(s.headline.task_list_reads_per_vm), 1)
    }),
    ("… peak per second, busiest node", |s| {
        num(Some(s.headline.proxmox_creating_peak_per_second as f64), 0)
    }),
    ("… peak per second by node", |s| {
        text(join(&s.proxmox_creating.peak_per_second))
    }),
    ("Proxmox requests while idle, per VM per minute", |s| {
        num(s.headline.proxmox_idle_per_vm_per_minute, 2)
    }),
    ("… peak per second, busiest node", |s| {
        num(s.headline.proxmox_idle_peak_per_second.map(|p| p as f64), 0)
    }),
    ("API server requests per VM while creating", |s| {
        num(s.headline.api_creating_per_vm, 1)
    }),
    ("API server requests per VM per minute while idle", |s| {
        num(s.headline.api_idle_per_vm_per_minute, 2)
    }),
    ("status writes per VM while creating", |s| {
        num(s.headline.status_writes_creating_per_vm, 1)
    }),
    ("status writes per minute while idle (all VMs)", |s| {
        num(s.headline.status_writes_idle_per_minute, 1)
    }),
    (
        "… to VMs whose guest agent had answered before the window",
        |s| num(s.headline.status_writes_idle_settled_per_minute, 1),
    ),
    (
        "tags changed by hand at rest: VMs put back / changed, then p50 / p90 / max (s)",
        |s| {
            text(s.drift.as_ref().map_or("–".into(), |d| {
                let f = |d: &Dist| format!("{:.1} / {:.1} / {:.1}", d.p50, d.p90, d.max);
                let times = d.seconds.as_ref().map_or("–".into(), f);
                format!("{} / {}, {times}", d.corrected, d.vms)
            }))
        },
    ),
    ("peak RSS (MiB)", |s| num(Some(s.process.peak_rss_mib), 1)),
    ("CPU while creating (s)", |s| {
        num(s.process.cpu_seconds_creating, 1)
    }),
    ("… the processes beside it, while creating (s)", |s| {
        neighbours(&s.neighbours, |p| p.cpu_seconds_creating)
    }),
    ("CPU while idle, ms per VM per minute", |s| {
        num(s.headline.cpu_idle_ms_per_vm_per_minute, 2)
    }),
    ("VMID allocations per VM: `nextid` calls", |s| {
        num(Some(s.headline.nextid_per_vm), 2)
    }),
    ("… creates sent per VM", |s| {
        num(Some(s.headline.creates_per_vm), 2)
    }),
    ("… VMIDs recorded per VM (external-name values)", |s| {
        num(Some(s.headline.vmids_recorded_per_vm), 2)
    }),
    ("VMs per node at the end", |s| text(join(&s.vms_per_node))),
    ("VMs on the simulator / distinct names", |s| {
        text(format!("{} / {}", s.sim_vms, s.sim_vm_names_distinct))
    }),
    ("most imports at once per node (limit)", |s| {
        text(format!(
            "{} (limit {})",
            join(&s.max_imports_per_node),
            s.import_limit
        ))
    }),
    ("wall time, delete → all gone (s)", |s| {
        num(s.delete_seconds, 1)
    }),
    (
        "ideal delete: the writes through the request budget, then the last task (s)",
        |s| num(s.ideal.delete, 1),
    ),
    ("Proxmox requests per VM while deleting", |s| {
        num(s.headline.proxmox_deleting_per_vm, 1)
    }),
    ("CPU while deleting (s)", |s| {
        num(s.process.cpu_seconds_deleting, 1)
    }),
    ("… the processes beside it, while deleting (s)", |s| {
        neighbours(&s.neighbours, |p| p.cpu_seconds_deleting)
    }),
];

/// The CPU seconds of the processes beside the one measured, in one
/// window: the API server's and etcd's (and the simulator's) are what
/// bounds a phase the provider's own CPU does not explain.
fn neighbours(
    processes: &BTreeMap<String, ProcessStats>,
    window: fn(&ProcessStats) -> Option<f64>,
) -> Cell {
    let seconds: Vec<String> = processes
        .iter()
        .filter_map(|(name, p)| Some(format!("{name} {:.1}", window(p)?)))
        .collect();
    if seconds.is_empty() {
        return text("–");
    }
    text(seconds.join(", "))
}

pub fn join<V: std::fmt::Display>(map: &BTreeMap<String, V>) -> String {
    if map.is_empty() {
        return "–".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The section for this run.
pub fn section(report: &Report) -> String {
    let mut md = String::new();
    let (machine, summaries) = (&report.machine, &report.variants);
    let import_limit = summaries
        .iter()
        .chain(report.sharded.iter().flat_map(|s| &s.configs))
        .next()
        .map_or(0, |s| s.import_limit);
    let _ = writeln!(
        md,
        "## {}: {} VMs on {} nodes ({})\n",
        report.label,
        report.vms,
        report.nodes.len(),
        utc_minute(machine.started)
    );
    let _ = writeln!(
        md,
        "Machine: {} cores ({}), {:.1} GiB, Linux {}, load average {:.1} at the start. Commit {}, {} binaries, {}, kube-apiserver {}, {}.  \n\
         pve-sim `--nodes {} --time-scale {}`; {} limits (import slots per node: {}{}); \
         idle window {} s; timeouts {} s to Ready, {} s to gone.  \n\
         Command: `{}`\n",
        machine.cores,
        machine.cpu,
        machine.memory_gib,
        machine.kernel,
        machine.load_average,
        machine.commit,
        machine.profile,
        machine.provider,
        machine.kube_apiserver,
        machine.rustc,
        report.nodes.join(","),
        report.time_scale,
        if report.requests_per_second.is_some() {
            "the"
        } else {
            "default"
        },
        import_limit,
        report
            .requests_per_second
            .map(|r| format!(", requests per second: {r}"))
            .unwrap_or_default(),
        report.idle_seconds,
        report.timeout_seconds,
        report
            .delete_timeout_seconds
            .unwrap_or(report.timeout_seconds),
        machine.command,
    );
    if !summaries.is_empty() {
        let columns: Vec<Column> = summaries
            .iter()
            .map(|s| Column {
                summary: s,
                name: s.variant.name().to_owned(),
            })
            .collect();
        let base = summaries.iter().position(|s| s.variant == Variant::Batched);
        if figures_table(&mut md, &columns, base, &[]) {
            let _ = writeln!(
                md,
                "\nRatios are left out where a variant did not get every VM Ready."
            );
        }
    }
    for s in summaries {
        details(&mut md, s, "###");
    }
    if let Some(sharded) = &report.sharded {
        crate::shardmd::section(&mut md, report, sharded);
    }
    if let Some(fleet) = &report.fleet {
        crate::fleetmd::section(&mut md, fleet);
    }
    md
}

/// A column of a figures table: a run, and what its ratio column calls it.
pub struct Column<'a> {
    pub summary: &'a Summary,
    pub name: String,
}

/// The rows about the process under test (left out where the column is
/// not one process).
pub const PROCESS_ROWS: &[&str] = &[
    "peak RSS (MiB)",
    "CPU while creating (s)",
    "CPU while idle, ms per VM per minute",
];

/// The table of [`ROWS`] (but `skip`), a column per run and a ratio column
/// per run against `base`; whether a ratio was left out because a run did
/// not get every VM Ready.
pub fn figures_table(
    md: &mut String,
    columns: &[Column],
    base: Option<usize>,
    skip: &[&str],
) -> bool {
    let others: Vec<usize> = (0..columns.len()).filter(|&i| Some(i) != base).collect();
    // A ratio against a run that did not finish creating compares rates
    // over different work: left out.
    let comparable = |i: usize, b: usize| columns[i].summary.created && columns[b].summary.created;
    let mut header = vec!["".to_owned()];
    header.extend(columns.iter().map(|c| c.summary.title.clone()));
    if let Some(b) = base {
        header.extend(
            others
                .iter()
                .map(|&i| format!("{} ÷ {}", columns[i].name, columns[b].name)),
        );
    }
    let _ = writeln!(md, "| {} |", header.join(" | "));
    let _ = writeln!(md, "|{}", "---|".repeat(header.len()));
    for (label, cell) in ROWS.iter().filter(|(label, _)| !skip.contains(label)) {
        let cells: Vec<Cell> = columns.iter().map(|c| cell(c.summary)).collect();
        let mut line = vec![(*label).to_owned()];
        line.extend(cells.iter().map(|c| match c {
            Cell::Num(Some(v), d) => fmt_num(*v, *d),
            Cell::Num(None, _) => "–".into(),
            Cell::Text(t) => t.clone(),
        }));
        if let Some(b) = base {
            line.extend(others.iter().map(|&i| match (&cells[i], &cells[b]) {
                (Cell::Num(Some(x), _), Cell::Num(Some(y), _)) if *y != 0.0 && comparable(i, b) => {
                    format!("{:.2}×", x / y)
                }
                _ => String::new(),
            }));
        }
        let _ = writeln!(md, "| {} |", line.join(" | "));
    }
    base.is_some_and(|b| others.iter().any(|&i| !comparable(i, b)))
}

/// Requests by kind, per VM, and where a phase stuck, under a heading of
/// level `heading` (`###`).
pub fn details(md: &mut String, s: &Summary, heading: &str) {
    let _ = writeln!(md, "\n{heading} {} ({} VMs)\n", s.title, s.vms);
    for stall in &s.stalls {
        let _ = writeln!(md, "**Stuck** {stall}\n");
    }
    let n = s.vms.max(1) as f64;
    let api = [
        ("creating", s.api_creating.as_ref()),
        ("idle", s.api_idle.as_ref()),
        ("deleting", s.api_deleting.as_ref()),
    ];
    if api.iter().any(|(_, a)| a.is_some()) {
        let _ = writeln!(
            md,
            "API server requests per VM (in all), by verb and resource:\n"
        );
        table(md, &api.map(|(p, a)| (p, a.map(|a| &a.by_key))), n);
    }
    let proxmox = [
        ("creating", Some(&s.proxmox_creating.by_route)),
        ("idle", s.proxmox_idle.as_ref().map(|r| &r.by_route)),
        ("deleting", s.proxmox_deleting.as_ref().map(|r| &r.by_route)),
    ];
    let _ = writeln!(md, "\nProxmox requests per VM (in all), by endpoint:\n");
    table(md, &proxmox, n);
    let _ = writeln!(md, "\n{}", records_line(&s.dir, &testenv::repo_root()));
}

/// Where a variant's logs and raw records are, relative to the repository
/// root (results recorded before the bench wrote relative paths carry
/// absolute ones).
fn records_line(dir: &str, root: &Path) -> String {
    format!(
        "Logs and raw records: `{}`",
        repo_relative(Path::new(dir), root)
    )
}

fn table(md: &mut String, phases: &[(&str, Option<&BTreeMap<String, u64>>)], n: f64) {
    let mut keys: Vec<&String> = phases
        .iter()
        .filter_map(|(_, m)| *m)
        .flat_map(|m| m.keys())
        .collect();
    keys.sort();
    keys.dedup();
    let _ = writeln!(
        md,
        "| | {} |\n|---|{}",
        phases
            .iter()
            .map(|(p, _)| *p)
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(phases.len())
    );
    for key in keys {
        let cells: Vec<String> = phases
            .iter()
            .map(|(_, m)| match m.and_then(|m| m.get(key)) {
                Some(c) => format!("{:.2} ({c})", *c as f64 / n),
                None => "–".into(),
            })
            .collect();
        let _ = writeln!(md, "| `{key}` | {} |", cells.join(" | "));
    }
}

/// Puts `body` between this run's markers in `path`, replacing an earlier
/// section with the same label and size, or appending it.
pub fn update_file(path: &Path, key: &str, body: &str) -> anyhow::Result<()> {
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let updated = splice(&existing, key, body);
    std::fs::write(path, updated).with_context(|| format!("writing {}", path.display()))
}

fn splice(existing: &str, key: &str, body: &str) -> String {
    let begin = format!("<!-- bench:{key} -->");
    let end = format!("<!-- /bench:{key} -->");
    let block = format!("{begin}\n{}\n{end}", body.trim_end());
    match (existing.find(&begin), existing.find(&end)) {
        (Some(a), Some(b)) if b > a => {
            format!("{}{block}{}", &existing[..a], &existing[b + end.len()..])
        }
        _ => format!("{}\n\n{block}\n", existing.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_processes_beside_are_listed_by_name_for_the_window_they_ran() {
        let stats = |creating, deleting| ProcessStats {
            cpu_seconds_creating: Some(creating),
            cpu_seconds_deleting: deleting,
            ..ProcessStats::default()
        };
        let processes = BTreeMap::from([
            ("etcd".to_owned(), stats(3.25, Some(0.5))),
            ("kube-apiserver".to_owned(), stats(61.04, None)),
        ]);
        let shown = |window| match neighbours(&processes, window) {
            Cell::Text(t) => t,
            Cell::Num(..) => panic!("a list, not a number"),
        };
        assert_eq!(
            shown(|p| p.cpu_seconds_creating),
            "etcd 3.2, kube-apiserver 61.0"
        );
        assert_eq!(shown(|p| p.cpu_seconds_deleting), "etcd 0.5");
        assert!(matches!(
            neighbours(&BTreeMap::new(), |p| p.cpu_seconds_creating),
            Cell::Text(t) if t == "–"
        ));
    }

    #[test]
    fn sections_are_replaced_by_key_and_others_kept() {
        let doc = splice("# Benchmarks\n\nIntro.", "before-100", "old");
        let doc = splice(&doc, "after-100", "other");
        let doc = splice(&doc, "before-100", "new");
        assert!(doc.starts_with("# Benchmarks\n\nIntro.\n\n<!-- bench:before-100 -->\nnew\n"));
        assert!(doc.contains("<!-- bench:after-100 -->\nother\n<!-- /bench:after-100 -->"));
        assert!(!doc.contains("old"));
    }

    #[test]
    fn record_directories_are_written_relative_to_the_repository() {
        let root = Path::new("/home/someone/checkout");
        for (dir, shown) in [
            (
                "/home/someone/checkout/.work/bench/batched",
                ".work/bench/batched",
            ),
            (".work/bench/per-task", ".work/bench/per-task"),
            ("/home/someone/checkout", "."),
        ] {
            let line = records_line(dir, root);
            assert_eq!(line, format!("Logs and raw records: `{shown}`"), "{dir}");
            assert!(!line.contains("/home/"), "{line}");
        }
        // Outside the repository there is no relative form to write.
        assert_eq!(
            records_line("/srv/bench/batched", root),
            "Logs and raw records: `/srv/bench/batched`"
        );
    }
}
