//! What one variant's run leaves behind: phase times, what the watch (or
//! the driver) saw of each VM, and the referees' raw records filtered to
//! the actor under test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::audit;
use crate::child::{Neighbour, Sample};
use crate::cli::Variant;
use crate::sim;
use crate::workload::VmState;

/// When each phase began and ended (seconds since the epoch). `None`: the
/// phase did not finish (or, after a timeout, did not start).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Phases {
    /// First create sent.
    pub start: f64,
    /// Every VM Ready.
    pub all_ready: Option<f64>,
    /// Start of the idle window, when it does not start at `all_ready`
    /// (`--settle`).
    #[serde(default)]
    pub idle_start: Option<f64>,
    /// Drift made by hand after the idle window, and how soon it was put
    /// back (`--drift`).
    #[serde(default)]
    pub drift: Option<crate::drift::DriftProbe>,
    /// End of the idle window.
    pub idle_end: Option<f64>,
    /// Delete sent.
    pub delete_start: Option<f64>,
    /// Every VM gone.
    pub all_gone: Option<f64>,
}

/// A VM on the simulator when every resource was Ready.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SimVm {
    pub vmid: u64,
    pub name: String,
    pub node: String,
}

#[derive(Serialize)]
pub struct Run {
    pub variant: Variant,
    pub vms: usize,
    pub phases: Phases,
    pub per_vm: BTreeMap<String, VmState>,
    /// The actor's Proxmox requests (by its token).
    #[serde(skip)]
    pub requests: Vec<sim::Request>,
    /// The actor's tasks.
    #[serde(skip)]
    pub tasks: Vec<sim::Task>,
    /// The actor's API server requests (the provider only).
    #[serde(skip)]
    pub audit: Vec<audit::Event>,
    /// The actor's CPU time and memory over time.
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// The other processes' CPU time and memory over time.
    #[serde(skip)]
    pub neighbours: Vec<Neighbour>,
    /// The simulator's VMs (templates left out) once all were Ready, or at
    /// the timeout.
    pub sim_vms: Vec<SimVm>,
    /// Where a phase stuck, when it timed out.
    pub stalls: Vec<String>,
    /// Logs and raw data.
    pub dir: PathBuf,
}

impl Run {
    /// Writes the raw records next to the logs, for a closer look.
    pub fn save_raw(&self) -> anyhow::Result<()> {
        write_json(&self.dir.join("requests.json"), &self.requests)?;
        write_json(&self.dir.join("tasks.json"), &self.tasks)?;
        write_json(&self.dir.join("samples.json"), &self.samples)?;
        write_json(&self.dir.join("neighbours.json"), &self.neighbours)?;
        write_json(&self.dir.join("vms.json"), &self.per_vm)?;
        Ok(())
    }
}

pub fn write_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
