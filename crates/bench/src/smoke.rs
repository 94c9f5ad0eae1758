//! The smoke check (`make test`): completion, one VM per resource and the
//! per-node import limit, never times.

use crate::cli::Variant;
use crate::summary::Summary;

/// What failed; empty when all held.
pub fn failures(summaries: &[Summary]) -> Vec<String> {
    let mut failed = Vec::new();
    for s in summaries {
        let who = match s.variant {
            Variant::Sharded => s.title.as_str(),
            other => other.name(),
        };
        if !s.created {
            failed.push(format!(
                "{who}: only {} of {} VMs became Ready",
                s.ready, s.vms
            ));
        }
        if !s.one_vm_per_resource() {
            failed.push(format!(
                "{who}: {} VMs ({} distinct names) on the simulator for {} resources",
                s.sim_vms, s.sim_vm_names_distinct, s.vms
            ));
        }
        if s.max_imports() > s.import_limit {
            failed.push(format!(
                "{who}: up to {} imports at once on a node (limit {}): {:?}",
                s.max_imports(),
                s.import_limit,
                s.max_imports_per_node
            ));
        }
        if !s.deleted {
            failed.push(format!("{who}: not every VM was deleted"));
        }
        for stall in &s.stalls {
            failed.push(format!("{who}: stuck {stall}"));
        }
    }
    failed
}

/// What failed of a fleet run's own checks: one download per node and
/// storage, one import (the template's) per node, and nothing deleted while
/// used.
pub fn fleet_failures(fleet: &crate::fleet::Fleet) -> Vec<String> {
    let mut failed = Vec::new();
    if fleet.downloads.values().any(|&n| n != 1) || fleet.downloads.is_empty() {
        failed.push(format!(
            "fleet: downloads per node and storage {:?}, not one each",
            fleet.downloads
        ));
    }
    if fleet.imports != fleet.downloads.len() {
        failed.push(format!(
            "fleet: {} imports for {} template nodes",
            fleet.imports,
            fleet.downloads.len()
        ));
    }
    failed.extend(fleet.early_deletes.iter().map(|e| format!("fleet: {e}")));
    if fleet.image.gone_at.is_none() {
        failed.push("fleet: the ProxmoxImage was not gone after its VMs".into());
    }
    failed
}
