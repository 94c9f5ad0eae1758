//! A run of the predecessor pattern ([`crate::predecessor`]): its own
//! simulator, the driver as a child process of this binary.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;

use crate::arena::Arena;
use crate::child::{Neighbours, Sampler};
use crate::cli::{RunArgs, Variant};
use crate::predecessor::{PROGRESS, READY_LINE, Report};
use crate::run::Run;
use crate::sim;

pub async fn run(args: &RunArgs, bench: &Path, sim_binary: &Path) -> anyhow::Result<Run> {
    let variant = Variant::Predecessor;
    let dir = sim::variant_dir(&args.work_dir, variant.name())?;
    let arena = Arena::start(args, sim_binary, "predecessor", &dir).await?;
    let (sim, token, referee_client) = (&arena.sim, &arena.actor, &arena.referee);
    // No control plane: the loop talks to the simulator alone.
    let neighbours = Neighbours::start(&[]);
    let out = dir.join("predecessor.json");
    let slots =
        provider_proxmox::api::provider_config::Limits::default().max_concurrent_imports_per_node;
    let log = std::fs::File::create(dir.join("predecessor.log"))?;
    let mut child = Command::new(bench)
        .arg("predecessor")
        .args([
            "--endpoint",
            &sim.base_url,
            "--fingerprint",
            &sim.fingerprint,
        ])
        .args(["--nodes", &args.nodes.join(",")])
        .args(["--vms", &args.vm_count().to_string()])
        .args(["--slots", &slots.to_string()])
        .args(["--idle", &args.idle.to_string()])
        .args(["--timeout", &args.timeout.to_string()])
        .args(["--delete-timeout", &args.delete_timeout().to_string()])
        .arg("--out")
        .arg(&out)
        .env(
            "PREDECESSOR_TOKEN",
            format!("{}={}", token.id, token.secret),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting the predecessor driver")?;
    let sampler = Sampler::start(child.id().context("the driver exited at once")?);
    let mut lines =
        tokio::io::BufReader::new(child.stdout.take().context("driver stdout")?).lines();
    let mut sim_vms = Vec::new();
    let limit = Duration::from_secs(args.timeout + args.delete_timeout() + args.idle + 120);
    let driven = tokio::time::timeout(limit, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(progress) = line.strip_prefix(PROGRESS) {
                eprintln!("    {} VMs: Ready: {progress}", args.vm_count());
            }
            if line == READY_LINE {
                eprintln!(
                    "    {} VMs: Ready; idle for {} s",
                    args.vm_count(),
                    args.idle
                );
                sim_vms = crate::phases::sim_vms(referee_client, &args.nodes).await?;
            }
        }
        anyhow::Ok(child.wait().await?)
    })
    .await
    .context("the predecessor driver overran its own timeouts")??;
    sampler.mark();
    let samples = sampler.finish();
    if !driven.success() {
        anyhow::bail!(
            "the predecessor driver failed ({driven}); see {}",
            dir.join("predecessor.log").display()
        );
    }
    let report: Report = serde_json::from_str(
        &std::fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?,
    )?;
    if sim_vms.is_empty() {
        sim_vms = crate::phases::sim_vms(referee_client, &args.nodes).await?;
    }
    let (requests, tasks, sim) = arena.finish().await?;
    let neighbours = neighbours.finish(Some(sim));
    let run = Run {
        variant,
        vms: args.vm_count(),
        phases: report.phases,
        per_vm: report.per_vm,
        requests,
        tasks,
        audit: Vec::new(),
        samples,
        neighbours,
        sim_vms,
        stalls: report.stalls,
        dir,
    };
    run.save_raw()?;
    Ok(run)
}
