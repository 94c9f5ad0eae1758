//! The phases of a Kubernetes-driven run: apply → all Ready → idle window →
//! delete → all gone, each create/delete phase bounded by the timeout (past
//! it, the run records where the VMs stuck and moves on).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use kube::Api;
use kube::api::DynamicObject;
use pve_client::Client;
use serde_json::Value;

use crate::child::Sampler;
use crate::cli::RunArgs;
use crate::clock::now;
use crate::run::{Phases, SimVm};
use crate::workload::{self, Tracker, VmState};

pub struct Outcome {
    pub phases: Phases,
    pub sim_vms: Vec<SimVm>,
    pub stalls: Vec<String>,
}

/// The ProxmoxVMs `manifests`, reconciled by a provider (sampled by
/// `sampler`), watched by `tracker`.
pub async fn drive(
    api: &Api<DynamicObject>,
    tracker: &Tracker,
    manifests: Vec<Value>,
    args: &RunArgs,
    sampler: &Sampler,
    referee: &Client,
) -> anyhow::Result<Outcome> {
    let nodes = &args.nodes;
    let n = manifests.len();
    let label = format!("{} VMs", n);
    let mut stalls = Vec::new();
    sampler.mark();
    let start = now();
    workload::apply(api, tracker, manifests).await?;
    let ready = wait_for(
        &format!("{label}: Ready"),
        tracker,
        n,
        args.timeout,
        sampler,
        |v| v.ready_at.is_some(),
    )
    .await?;
    let mut phases = Phases {
        start,
        ..Phases::default()
    };
    let sim_vms = sim_vms(referee, nodes).await?;
    match ready {
        Ok(at) => {
            phases.all_ready = Some(at);
            sampler.mark();
            eprintln!("    idle for {} s", args.idle);
            tokio::time::sleep(Duration::from_secs(args.idle)).await;
            phases.idle_end = Some(now());
            sampler.mark();
        }
        Err(stall) => stalls.push(format!("creating: {stall}")),
    }
    phases.delete_start = Some(now());
    workload::delete_all(api, tracker).await?;
    match wait_for(
        &format!("{label}: gone"),
        tracker,
        n,
        args.delete_timeout(),
        sampler,
        |v| v.gone_at.is_some(),
    )
    .await?
    {
        Ok(at) => phases.all_gone = Some(at),
        Err(stall) => stalls.push(format!("deleting: {stall}")),
    }
    sampler.mark();
    Ok(Outcome {
        phases,
        sim_vms,
        stalls,
    })
}

/// Waits until `done` holds for `n` VMs: `Ok(Ok(time))`, or `Ok(Err(account
/// of where they stuck))` after `timeout_secs`. Fails if the provider died.
async fn wait_for(
    what: &str,
    tracker: &Tracker,
    n: usize,
    timeout_secs: u64,
    sampler: &Sampler,
    done: impl Fn(&VmState) -> bool,
) -> anyhow::Result<Result<f64, String>> {
    let start = now();
    let mut last_report = start;
    loop {
        let finished = tracker.count(&done);
        let t = now();
        if finished >= n {
            eprintln!("    {what}: all {n} after {:.1} s", t - start);
            return Ok(Ok(t));
        }
        if sampler.mark().is_none() {
            bail!("the provider exited while waiting for {what}");
        }
        let account = || {
            format!(
                "after {:.0} s, {finished} of {n} done; the others: {}",
                t - start,
                workload::breakdown(&tracker.snapshot(), &done)
            )
        };
        if t - start > timeout_secs as f64 {
            let account = account();
            eprintln!("    {what}: timed out {account}");
            return Ok(Err(account));
        }
        if t - last_report >= 15.0 {
            eprintln!("    {what}: {}", account());
            last_report = t;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The simulator's VMs (templates left out), node by node, as the referee
/// sees them (`GET /nodes/{node}/qemu` names new VMs at once, where
/// `/cluster/resources` lags).
pub async fn sim_vms(referee: &Client, nodes: &[String]) -> anyhow::Result<Vec<SimVm>> {
    let mut vms = Vec::new();
    for node in nodes {
        for vm in referee.node_vms(node).await? {
            if vm.template {
                continue;
            }
            vms.push(SimVm {
                vmid: vm.vmid,
                name: vm.name.unwrap_or_default(),
                node: node.clone(),
            });
        }
    }
    Ok(vms)
}

/// VMs per node.
pub fn per_node(vms: &[SimVm], nodes: &[String]) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = nodes.iter().map(|n| (n.clone(), 0)).collect();
    for vm in vms {
        *counts.entry(vm.node.clone()).or_insert(0) += 1;
    }
    counts
}
