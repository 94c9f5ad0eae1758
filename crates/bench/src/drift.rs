//! Drift made by hand on VMs at rest (`--drift N`): after the idle window,
//! N of the VMs, spread over the run, have their tags changed on Proxmox
//! behind the provider's back (a change the shared cluster view shows, so
//! the provider's coarse look finds it without a full look), and the probe
//! times how soon each is put back, as the referee sees it in
//! `/cluster/resources`.

use std::collections::BTreeMap;
use std::time::Duration;

use pve_client::vm::{ConfigUpdate, Tags, VmParams};
use pve_client::{Client, ResourceType};
use serde::{Deserialize, Serialize};

use crate::clock::now;
use crate::run::SimVm;
use crate::stats::Dist;

/// The tag the probe sets (the spec's tags are put back in its place).
const MARK: &str = "bench-drift";

/// What the probe found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DriftProbe {
    /// VMs changed by hand.
    pub vms: usize,
    /// Of them, put back before the timeout.
    pub corrected: usize,
    /// Seconds from the change to the referee seeing it put back.
    pub seconds: Option<Dist>,
}

/// Changes the tags of `count` of `vms` by hand and waits up to `timeout`
/// for the provider to put them back.
pub async fn probe(
    referee: &Client,
    vms: &[SimVm],
    count: usize,
    timeout: Duration,
) -> anyhow::Result<DriftProbe> {
    let step = (vms.len() / count.max(1)).max(1);
    let chosen: Vec<&SimVm> = vms.iter().step_by(step).take(count).collect();
    let mut changed: BTreeMap<u64, f64> = BTreeMap::new();
    for vm in &chosen {
        let update = ConfigUpdate {
            set: VmParams {
                tags: Some(Tags::parse(MARK)),
                ..VmParams::default()
            },
            ..ConfigUpdate::default()
        };
        let vmid = u32::try_from(vm.vmid)?;
        referee
            .update_vm_config_sync(&vm.node, vmid, &update)
            .await?;
        changed.insert(vm.vmid, now());
    }
    eprintln!("    tags changed by hand on {} VMs", changed.len());
    let start = now();
    let mut seconds = Vec::new();
    while !changed.is_empty() && now() - start < timeout.as_secs_f64() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let listed = referee.cluster_resources(Some(ResourceType::Vm)).await?;
        let t = now();
        for r in listed {
            let Some(vmid) = r.vmid else { continue };
            let marked = r.tags.as_deref().is_some_and(|tags| tags.contains(MARK));
            if let (false, Some(at)) = (marked, changed.get(&vmid)) {
                seconds.push(t - at);
                changed.remove(&vmid);
            }
        }
    }
    eprintln!(
        "    put back: {} of {} within {} s",
        seconds.len(),
        seconds.len() + changed.len(),
        timeout.as_secs()
    );
    Ok(DriftProbe {
        vms: seconds.len() + changed.len(),
        corrected: seconds.len(),
        seconds: Dist::of(seconds),
    })
}
