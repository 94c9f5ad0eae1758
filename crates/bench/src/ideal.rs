//! The ideal wall time of a run: the critical path of the simulated task
//! durations under the per-node limits, with no client overhead at all.
//!
//! Every VM of the workload runs three tasks in order: the create that
//! imports the image (it holds one of the node's import slots; the
//! cloud-init drive is allocated in the same task), the disk resize and the
//! start. Nothing else limits them. So on a node with `n` VMs and `L`
//! import slots the imports run in `ceil(n / L)` back-to-back rounds, and
//! the last VM needs its resize and start after the last round:
//!
//! `ideal = max over nodes of ceil(n_node / L) × create + resize + start`
//!
//! with `n_node` spread evenly (`ceil(N / nodes)` on the fullest node).
//! The same formula with the nodes the run actually chose shows what its
//! placement cost, and with the task durations measured in the simulator
//! (mean per type; a timer-driven task runs slightly over its nominal time)
//! what a perfect client would have achieved on this machine.

use std::collections::BTreeMap;
use std::time::Duration;

use pve_sim::Durations;
use pve_sim::state::seed;
use serde::{Deserialize, Serialize};

use crate::sim::Task;

/// The durations (seconds) of one VM's tasks.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chain {
    /// `qmcreate` with the import: holds an import slot.
    pub create: f64,
    pub resize: f64,
    pub start: f64,
}

impl Chain {
    /// pve-sim's nominal durations at `time_scale`: the import at its
    /// bytes-per-second rate over the seeded image's virtual size, plus the
    /// cloud-init drive's allocation.
    pub fn nominal(time_scale: f64) -> Self {
        let d = Durations::default();
        let image = image_virtual_size();
        let import = Duration::from_secs_f64(image as f64 / d.import_bytes_per_sec as f64);
        let scaled = |x: Duration| x.as_secs_f64() * time_scale;
        Self {
            create: scaled(import + d.disk_alloc),
            resize: scaled(d.resize),
            start: scaled(d.start),
        }
    }

    /// The mean measured duration per task type; `None` without all three.
    pub fn measured(tasks: &[Task]) -> Option<Self> {
        let mean = |kind: &str| {
            let d: Vec<f64> = tasks
                .iter()
                .filter(|t| t.task_type == kind && t.exitstatus.as_deref() == Some("OK"))
                .filter_map(|t| Some(t.ended? - t.started))
                .collect();
            (!d.is_empty()).then(|| d.iter().sum::<f64>() / d.len() as f64)
        };
        Some(Self {
            create: mean("qmcreate")?,
            resize: mean("resize")?,
            start: mean("qmstart")?,
        })
    }
}

/// The virtual size of the image the workload imports, as pve-sim seeds it.
fn image_virtual_size() -> u64 {
    let cluster = seed::cluster(&pve_sim::SimConfig::default());
    cluster
        .storages
        .values()
        .flatten()
        .flat_map(|s| s.volumes.values())
        .find(|v| v.volname == seed::UBUNTU_IMAGE)
        .map_or(0, |v| v.virtual_size)
}

/// VMs per node, `n` spread as evenly as possible over `nodes`.
pub fn even(n: usize, nodes: usize) -> Vec<usize> {
    let nodes = nodes.max(1);
    (0..nodes)
        .map(|i| n / nodes + usize::from(i < n % nodes))
        .collect()
}

/// The critical path with `per_node` VMs per node and `slots` imports at
/// once per node.
pub fn critical_path(per_node: &[usize], slots: usize, chain: Chain) -> f64 {
    per_node
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| n.div_ceil(slots.max(1)) as f64 * chain.create + chain.resize + chain.start)
        .fold(0.0, f64::max)
}

/// The ideal of a delete: each VM's shutdown and destroy are two writes,
/// which the provider's request budget lets through at `rps` per second
/// after a burst of twice that (`None`: no budget, as in the naive loop);
/// the last destroy then runs. Nothing else bounds a delete: Proxmox runs
/// the tasks all at once, and a shutdown's guest powers off in a fixed
/// time.
pub fn delete(n: usize, time_scale: f64, rps: Option<f64>) -> f64 {
    let d = Durations::default();
    let scaled = |x: Duration| x.as_secs_f64() * time_scale;
    let writes = rps.map_or(0.0, |rps| ((2 * n) as f64 - 2.0 * rps).max(0.0) / rps);
    (writes + scaled(d.destroy)).max(scaled(d.shutdown) + scaled(d.destroy))
}

/// The ideal figures of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ideal {
    pub nominal: Chain,
    /// Nominal durations, VMs spread evenly: the target.
    pub even: f64,
    /// Nominal durations, the run's own placement.
    pub as_placed: Option<f64>,
    /// Measured durations, the run's own placement.
    pub measured: Option<f64>,
    /// Delete → all gone ([`delete`]); absent from results older than it.
    #[serde(default)]
    pub delete: Option<f64>,
}

impl Ideal {
    /// `rps`: the actor's request budget, as for [`delete`].
    pub fn of(
        n: usize,
        (slots, rps): (usize, Option<f64>),
        time_scale: f64,
        placement: &BTreeMap<String, usize>,
        tasks: &[Task],
    ) -> Self {
        let nominal = Chain::nominal(time_scale);
        let placed: Vec<usize> = placement.values().copied().collect();
        let complete = placed.iter().sum::<usize>() == n;
        Self {
            nominal,
            even: critical_path(&even(n, placement.len()), slots, nominal),
            as_placed: complete.then(|| critical_path(&placed, slots, nominal)),
            measured: Chain::measured(tasks)
                .filter(|_| complete)
                .map(|c| critical_path(&placed, slots, c)),
            delete: Some(delete(n, time_scale, rps)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_import_takes_about_three_seconds_at_a_tenth() {
        let c = Chain::nominal(0.1);
        // 3584 MiB at 120 MiB/s = 29.87 s, plus 1 s for the cloud-init drive.
        assert!((c.create - 3.087).abs() < 0.001, "{c:?}");
        assert!((c.resize - 0.1).abs() < 1e-9 && (c.start - 0.2).abs() < 1e-9);
    }

    #[test]
    fn rounds_of_imports_per_node_then_the_tail() {
        let c = Chain {
            create: 3.0,
            resize: 0.1,
            start: 0.2,
        };
        assert_eq!(even(10, 4), [3, 3, 2, 2]);
        // 3 VMs, 2 slots: two rounds.
        assert!((critical_path(&even(10, 4), 2, c) - 6.3).abs() < 1e-9);
        // Everything on one node: five rounds.
        assert!((critical_path(&[10, 0, 0, 0], 2, c) - 15.3).abs() < 1e-9);
        assert!((critical_path(&even(1000, 4), 2, c) - (125.0 * 3.0 + 0.3)).abs() < 1e-9);
    }

    #[test]
    fn a_delete_is_bound_by_the_write_budget_or_else_by_its_tasks() {
        // 2,000 writes at 50 per second after a burst of 100: 38 s, then
        // the last destroy (2 s at a tenth: 0.2 s).
        assert!((delete(1000, 0.1, Some(50.0)) - 38.2).abs() < 1e-9);
        // A few VMs fit in the burst: the shutdown (0.5 s) and the destroy.
        assert!((delete(10, 0.1, Some(50.0)) - 0.7).abs() < 1e-9);
        // Without a budget only the tasks count.
        assert!((delete(1000, 0.1, None) - 0.7).abs() < 1e-9);
        // The fleet's config lets 200 through per second after 400.
        assert!((delete(1000, 0.1, Some(200.0)) - 8.2).abs() < 1e-9);
    }
}
