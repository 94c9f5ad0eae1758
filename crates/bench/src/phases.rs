//! The phases of a Kubernetes-driven run: apply → all Ready → idle window →
//! delete → all gone, each create/delete phase bounded by the timeout (past
//! it, the run records where the VMs stuck and moves on).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
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

/// One set of ProxmoxVMs driven through the phases: its resources, the
/// watch that sees them and the referee of its simulator.
pub struct Lane<'a> {
    /// What the progress lines call it (`100 VMs`).
    pub label: String,
    pub api: &'a Api<DynamicObject>,
    pub tracker: &'a Tracker,
    pub manifests: Vec<Value>,
    pub referee: &'a Client,
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
    let lane = Lane {
        label: format!("{} VMs", manifests.len()),
        api,
        tracker,
        manifests,
        referee,
    };
    let mut outcomes = drive_all(vec![lane], args, &[sampler]).await?;
    outcomes.pop().context("one lane, one outcome")
}

/// Several lanes at once, reconciled by the providers sampled by
/// `samplers`: every lane is applied at the same moment and waited for on
/// its own; the idle window begins once every lane is Ready (it is each
/// lane's from its own all-Ready on); then every lane is deleted at the
/// same moment and waited for on its own. One lane is [`drive`].
pub async fn drive_all(
    lanes: Vec<Lane<'_>>,
    args: &RunArgs,
    samplers: &[&Sampler],
) -> anyhow::Result<Vec<Outcome>> {
    let nodes = &args.nodes;
    mark(samplers);
    let created = futures::future::try_join_all(lanes.into_iter().map(|lane| async move {
        let n = lane.manifests.len();
        let start = now();
        workload::apply(lane.api, lane.tracker, lane.manifests).await?;
        let ready = wait_for(
            &format!("{}: Ready", lane.label),
            lane.tracker,
            n,
            args.timeout,
            samplers,
            |v| v.ready_at.is_some(),
        )
        .await?;
        let mut outcome = Outcome {
            phases: Phases {
                start,
                ..Phases::default()
            },
            sim_vms: sim_vms(lane.referee, nodes).await?,
            stalls: Vec::new(),
        };
        match ready {
            Ok(at) => outcome.phases.all_ready = Some(at),
            Err(stall) => outcome.stalls.push(format!("creating: {stall}")),
        }
        let lane = Created {
            label: lane.label,
            api: lane.api,
            tracker: lane.tracker,
            referee: lane.referee,
            n,
        };
        anyhow::Ok((lane, outcome))
    }))
    .await?;
    let (lanes, mut outcomes): (Vec<Created>, Vec<Outcome>) = created.into_iter().unzip();
    if outcomes.iter().all(|o| o.phases.all_ready.is_some()) {
        if args.settle > 0 {
            eprintln!("    settling for {} s (not measured)", args.settle);
            tokio::time::sleep(Duration::from_secs(args.settle)).await;
            let idle_start = now();
            for o in &mut outcomes {
                o.phases.idle_start = Some(idle_start);
            }
        }
        mark(samplers);
        eprintln!("    idle for {} s", args.idle);
        tokio::time::sleep(Duration::from_secs(args.idle)).await;
        let idle_end = now();
        for o in &mut outcomes {
            o.phases.idle_end = Some(idle_end);
        }
        mark(samplers);
        if args.drift > 0 {
            for (lane, o) in lanes.iter().zip(&mut outcomes) {
                let probe = crate::drift::probe(
                    lane.referee,
                    &o.sim_vms,
                    args.drift,
                    Duration::from_secs(300),
                );
                o.phases.drift = Some(probe.await?);
            }
        }
    }
    let delete_start = now();
    let gone = futures::future::try_join_all(lanes.iter().map(|lane| async move {
        workload::delete_all(lane.api, lane.tracker).await?;
        wait_for(
            &format!("{}: gone", lane.label),
            lane.tracker,
            lane.n,
            args.delete_timeout(),
            samplers,
            |v| v.gone_at.is_some(),
        )
        .await
    }))
    .await?;
    for (o, gone) in outcomes.iter_mut().zip(gone) {
        o.phases.delete_start = Some(delete_start);
        match gone {
            Ok(at) => o.phases.all_gone = Some(at),
            Err(stall) => o.stalls.push(format!("deleting: {stall}")),
        }
    }
    mark(samplers);
    Ok(outcomes)
}

/// A lane once applied.
struct Created<'a> {
    label: String,
    api: &'a Api<DynamicObject>,
    tracker: &'a Tracker,
    referee: &'a Client,
    n: usize,
}

/// A reading of every process now; whether all of them still run.
fn mark(samplers: &[&Sampler]) -> bool {
    // Every one marked, whichever has exited.
    let alive: Vec<bool> = samplers.iter().map(|s| s.mark().is_some()).collect();
    alive.into_iter().all(|a| a)
}

/// Waits until `done` holds for `n` VMs: `Ok(Ok(time))`, or `Ok(Err(account
/// of where they stuck))` after `timeout_secs`. Fails if a provider died.
async fn wait_for(
    what: &str,
    tracker: &Tracker,
    n: usize,
    timeout_secs: u64,
    samplers: &[&Sampler],
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
        if !mark(samplers) {
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
