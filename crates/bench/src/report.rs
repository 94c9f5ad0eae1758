//! The result of a run as JSON (`benchmarks/<label>-<N>.json`): the
//! settings, the machine and every variant's figures. The Markdown section
//! is rendered from it, so `provider-bench render` can write it again.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::cli::RunArgs;
use crate::fleet::Fleet;
use crate::machine::Machine;
use crate::sharded::Sharded;
use crate::summary::Summary;

#[derive(Serialize, Deserialize)]
pub struct Report {
    pub label: String,
    pub vms: usize,
    pub nodes: Vec<String>,
    pub time_scale: f64,
    pub idle_seconds: u64,
    pub timeout_seconds: u64,
    /// Absent in results written before it existed: then the same as
    /// `timeout_seconds`.
    #[serde(default)]
    pub delete_timeout_seconds: Option<u64>,
    /// The `batched`/`per-task` config's request budget when `--rps` set
    /// one (absent: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<u32>,
    pub machine: Machine,
    pub variants: Vec<Summary>,
    /// The `sharded` variant's figures, when it ran (absent in results
    /// written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharded: Option<Sharded>,
    /// The `fleet` variant's own figures, when it ran (its summary is with
    /// the others in `variants`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<Fleet>,
}

impl Report {
    pub fn new(
        args: &RunArgs,
        machine: Machine,
        variants: Vec<Summary>,
        sharded: Option<Sharded>,
        fleet: Option<Fleet>,
    ) -> Self {
        Self {
            label: args.label.clone(),
            vms: args.vm_count(),
            nodes: args.nodes.clone(),
            time_scale: args.time_scale,
            idle_seconds: args.idle,
            timeout_seconds: args.timeout,
            delete_timeout_seconds: Some(args.delete_timeout()),
            requests_per_second: args.rps,
            machine,
            variants,
            sharded,
            fleet,
        }
    }

    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// The key of its section in the Markdown file.
    pub fn key(&self) -> String {
        format!("{}-{}", self.label, self.vms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The results committed under `benchmarks/` must stay readable, so
    /// `provider-bench render` can write their sections again.
    #[test]
    fn committed_results_still_render() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benchmarks");
        let mut rendered = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let report = Report::read(&path).unwrap();
                let section = crate::markdown::section(&report);
                let heading = format!("## {}: {} VMs", report.label, report.vms);
                assert!(section.starts_with(&heading), "{}", path.display());
                assert_eq!(
                    section.matches("\n### ").count(),
                    report.variants.len()
                        + usize::from(report.sharded.is_some())
                        + usize::from(report.fleet.is_some()),
                    "one detail section per variant"
                );
                // Results name no directory of the machine they ran on.
                for line in section
                    .lines()
                    .filter(|l| l.starts_with("Logs and raw records:"))
                {
                    assert!(!line.contains("`/"), "{}: {line}", path.display());
                }
                rendered += 1;
            }
        }
        assert!(rendered > 0, "no results in {}", dir.display());
    }
}
