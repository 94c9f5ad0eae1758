//! The figures of a run: printed at the end, and with `CHAOS_REPORT`
//! written into the figures section of a Markdown file (docs/reliability.md).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use super::driver::{KillRecord, RestartRecord};
use super::size::Size;
use super::verdict::{Kind, Violation, count};

/// Where the generated section starts and ends in the report file.
const BEGIN: &str = "<!-- chaos figures: begin (written by `make chaos`) -->";
const END: &str = "<!-- chaos figures: end -->";

/// Everything a report shows.
pub struct Figures {
    pub size: Size,
    pub phases: Vec<(&'static str, Duration)>,
    pub mix: Vec<(String, usize)>,
    pub requests: usize,
    /// Requests answered 500, 595, 596 or reset (injected or not).
    pub failed_requests: usize,
    pub faults: BTreeMap<String, u64>,
    pub kills: Vec<KillRecord>,
    pub restarts: Vec<RestartRecord>,
    pub events: BTreeMap<String, i64>,
    /// Adoptions of creates and clones traced to their dispatcher.
    pub adoptions_traced: usize,
    /// Time each resource was seen in WaitingForCapacity, longest first.
    pub capacity_waits: Vec<(String, Duration)>,
    /// The longest stretch a resource waited while pve-sim had a slot free.
    pub free_slot_wait: Option<(super::capacity::Wait, Duration)>,
    pub violations: Vec<Violation>,
    pub logs: String,
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The commit under test (`+ changes` when the tree is dirty).
fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match (
        git(&["rev-parse", "--short", "HEAD"]),
        git(&["status", "--porcelain"]),
    ) {
        (Some(head), Some(changes)) if !changes.is_empty() => format!("`{head}` + changes"),
        (Some(head), _) => format!("`{head}`"),
        _ => "(unknown)".into(),
    }
}

fn percent(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

impl Figures {
    /// Requests the fault rules failed (500, 595, 596, reset).
    fn injected_failures(&self) -> usize {
        ["HTTP 500", "HTTP 595", "HTTP 596", "connection reset"]
            .iter()
            .filter_map(|k| self.faults.get(*k))
            .sum::<u64>() as usize
    }

    fn wall(&self) -> Duration {
        self.phases.iter().map(|(_, d)| *d).sum()
    }

    fn failovers(&self) -> String {
        let mut times: Vec<Duration> = self.kills.iter().filter_map(|k| k.failover).collect();
        if times.is_empty() {
            return "none measured".into();
        }
        times.sort();
        let listed: Vec<String> = times
            .iter()
            .map(|t| format!("{:.1}", t.as_secs_f64()))
            .collect();
        format!(
            "{} leader losses: min {}, median {}, max {} (each: {} s)",
            times.len(),
            secs(times[0]),
            secs(times[times.len() / 2]),
            secs(times[times.len() - 1]),
            listed.join(", ")
        )
    }

    fn capacity(&self) -> String {
        let Some((resource, longest)) = self.capacity_waits.first() else {
            return "never".into();
        };
        let free = match &self.free_slot_wait {
            Some((wait, free)) if !free.is_zero() => format!(
                "; longest while pve-sim ran fewer {}s on {} than the limit of {}: {} ({})",
                wait.kind,
                wait.node,
                wait.limit,
                secs(*free),
                wait.resource
            ),
            _ => "; never while a slot was free on pve-sim".into(),
        };
        format!(
            "{} resources, longest {} ({resource}){free}",
            self.capacity_waits.len(),
            secs(*longest)
        )
    }

    fn kill_summary(&self) -> String {
        let leader = self.kills.iter().filter(|k| k.was_leader).count();
        let held = self.kills.iter().filter(|k| k.dispatch.is_some()).count();
        let started = self.kills.iter().filter(|k| k.started_task).count();
        let in_window = self
            .kills
            .iter()
            .filter(|k| k.before_status_write == Some(true))
            .count();
        let deleting = self.kills.iter().filter(|k| k.phase == "delete").count();
        let lost = count(&self.violations, Kind::NoFailover);
        format!(
            "{} SIGKILLs, {} survived ({leader} of the leader, {} of the standby; {held} with a \
             create or clone held in flight, of which {started} started a task and {in_window} \
             were killed before the resource's status recorded it; {deleting} while deleting)",
            self.kills.len(),
            self.kills.len() - lost,
            self.kills.len() - leader,
        )
    }

    fn rows(&self) -> Vec<(String, String)> {
        let v = |kind| count(&self.violations, kind).to_string();
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|(name, d)| format!("{name} {}", secs(*d)))
            .collect();
        let mix: Vec<String> = self.mix.iter().map(|(k, n)| format!("{n}× {k}")).collect();
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        let events: Vec<String> = self
            .events
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let restarts: Vec<String> = self
            .restarts
            .iter()
            .map(|r| format!("at {}, ready again after {}", secs(r.at), secs(r.took)))
            .collect();
        vec![
            ("seed".into(), self.size.seed.to_string()),
            (
                "wall time".into(),
                format!("{} ({})", secs(self.wall()), phases.join(", ")),
            ),
            (
                "ProxmoxVMs".into(),
                format!("{}: {}", self.size.vms, mix.join("; ")),
            ),
            (
                "Proxmox requests".into(),
                format!(
                    "{}, of which {} failed by injection ({:.1}%); {} answered 500/595/596 or \
                     reset in all ({:.1}%)",
                    self.requests,
                    self.injected_failures(),
                    percent(self.injected_failures(), self.requests),
                    self.failed_requests,
                    percent(self.failed_requests, self.requests)
                ),
            ),
            ("faults injected".into(), faults.join("; ")),
            ("kills".into(), self.kill_summary()),
            ("failover".into(), self.failovers()),
            ("apiserver restarts".into(), restarts.join("; ")),
            ("provider crashes".into(), v(Kind::Crashed)),
            (
                "VMs lost / duplicated / orphaned / misplaced".into(),
                format!(
                    "{} / {} / {} / {}",
                    v(Kind::Lost),
                    v(Kind::Duplicated),
                    v(Kind::Orphaned),
                    v(Kind::Misplaced)
                ),
            ),
            ("ProxmoxVMs not Ready".into(), v(Kind::NotReady)),
            (
                "status disagreeing with Proxmox".into(),
                v(Kind::StatusDisagrees),
            ),
            (
                "VMs created by more than one dispatch".into(),
                v(Kind::DispatchCount),
            ),
            (
                "locks left / stray VMs".into(),
                format!("{} / {}", v(Kind::LockLeft), v(Kind::Stray)),
            ),
            (
                "finalizers left / configs not deletable".into(),
                format!(
                    "{} / {}",
                    v(Kind::FinalizerLeft),
                    v(Kind::ConfigNotDeletable)
                ),
            ),
            (
                "tasks of other resources adopted".into(),
                format!(
                    "{} (of {} adoptions of a create or clone traced to the request that started it)",
                    v(Kind::ForeignTaskAdopted),
                    self.adoptions_traced
                ),
            ),
            (
                "resources told their valid config is unusable".into(),
                v(Kind::ConfigBlamed),
            ),
            ("WaitingForCapacity (not judged)".into(), self.capacity()),
            ("secrets found".into(), v(Kind::SecretLeaked)),
            ("provider events by reason".into(), events.join(", ")),
        ]
    }

    /// One line per kill.
    fn kill_lines(&self) -> Vec<String> {
        self.kills
            .iter()
            .enumerate()
            .map(|(n, k)| {
                let window = match k.before_status_write {
                    Some(true) => ", before the status write",
                    Some(false) => ", after the status write",
                    None => "",
                };
                format!(
                    "#{} at {} ({}): {} — {}{}{}{}",
                    n + 1,
                    secs(k.at),
                    k.phase,
                    k.kind.label(),
                    k.victim,
                    if k.was_leader { " (leader)" } else { "" },
                    k.dispatch
                        .as_ref()
                        .map(|d| format!(", after {d}{window}"))
                        .unwrap_or_default(),
                    k.failover
                        .map(|f| format!(", new leader after {}", secs(f)))
                        .unwrap_or_default()
                )
            })
            .collect()
    }

    /// The failures, one block per kind, at most `each` accounts a kind.
    fn failures_upto(&self, each: usize) -> String {
        let mut text = String::new();
        for kind in Kind::ALL {
            let of_kind: Vec<&Violation> =
                self.violations.iter().filter(|v| v.kind == kind).collect();
            if of_kind.is_empty() {
                continue;
            }
            let _ = writeln!(text, "{} ({}):", kind.label(), of_kind.len());
            for violation in of_kind.iter().take(each) {
                let _ = writeln!(text, "  - {}", violation.account);
            }
            if of_kind.len() > each {
                let _ = writeln!(text, "  ... and {} more", of_kind.len() - each);
            }
        }
        text
    }

    /// Every failure, one block per kind.
    pub fn failures(&self) -> String {
        self.failures_upto(usize::MAX)
    }

    /// Plain text for the test's output.
    pub fn text(&self) -> String {
        let mut text = format!(
            "chaos run ({}), repeat with: {}\n",
            self.size.name,
            self.size.command()
        );
        for (name, value) in self.rows() {
            let _ = writeln!(text, "  {name:<42} {value}");
        }
        let _ = writeln!(text, "  {:<42} {}", "logs", self.logs);
        for line in self.kill_lines() {
            let _ = writeln!(text, "  kill {line}");
        }
        if !self.violations.is_empty() {
            let _ = write!(text, "\nFAILURES\n{}", self.failures());
        }
        text
    }

    /// The Markdown section for the report file.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "Run with `make chaos` (`{}`) on commit {}.\n\n| figure | value |\n|---|---|\n",
            self.size.command(),
            commit()
        );
        for (name, value) in self.rows() {
            let _ = writeln!(md, "| {name} | {} |", value.replace('|', "\\|"));
        }
        md.push_str("\nThe kills:\n\n");
        for line in self.kill_lines() {
            let _ = writeln!(md, "- {line}");
        }
        if self.violations.is_empty() {
            md.push_str("\nNo failure.\n");
        } else {
            let _ = write!(
                md,
                "\nFailures, as the suite printed them (at most five of a kind here):\n\n\
                 ```text\n{}```\n",
                self.failures_upto(5)
            );
        }
        md
    }

    /// Replaces the figures section of `path` (between the markers).
    pub fn write_into(&self, path: &Path) {
        let doc = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let (head, rest) = doc
            .split_once(BEGIN)
            .unwrap_or_else(|| panic!("{} has no line {BEGIN}", path.display()));
        let (_, tail) = rest
            .split_once(END)
            .unwrap_or_else(|| panic!("{} has no line {END}", path.display()));
        let updated = format!("{head}{BEGIN}\n{}{END}{tail}", self.markdown());
        std::fs::write(path, updated).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(violations: Vec<Violation>) -> Figures {
        Figures {
            size: Size::reduced(),
            phases: vec![("create", Duration::from_secs(3))],
            mix: vec![],
            requests: 10,
            failed_requests: 2,
            faults: BTreeMap::from([("HTTP 500".to_owned(), 1)]),
            kills: vec![],
            restarts: vec![],
            events: BTreeMap::new(),
            adoptions_traced: 0,
            capacity_waits: vec![],
            free_slot_wait: None,
            violations,
            logs: "target/tmp/chaos".into(),
        }
    }

    #[test]
    fn only_the_figures_section_of_the_report_file_is_rewritten() {
        let path = std::env::temp_dir().join(format!("chaos-report-{}.md", std::process::id()));
        std::fs::write(
            &path,
            format!("# Title\n\n{BEGIN}\nold figures\n{END}\n\nafter\n"),
        )
        .unwrap();
        let lost = (0..7)
            .map(|n| Violation::new(Kind::Lost, format!("resource {n}")))
            .collect();
        figures(lost).write_into(&path);
        let doc = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(
            doc.starts_with(&format!("# Title\n\n{BEGIN}\nRun with `make chaos`")),
            "{doc}"
        );
        assert!(doc.ends_with(&format!("{END}\n\nafter\n")), "{doc}");
        assert!(!doc.contains("old figures"));
        assert!(
            doc.contains("| VMs lost / duplicated / orphaned / misplaced | 7 / 0 / 0 / 0 |"),
            "{doc}"
        );
        assert!(doc.contains("  - resource 4\n  ... and 2 more"), "{doc}");
        assert!(doc.contains("1 failed by injection (10.0%)"), "{doc}");
    }
}
