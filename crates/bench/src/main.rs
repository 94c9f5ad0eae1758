//! `provider-bench` (`make bench`): N ProxmoxVMs on the real local control
//! plane against pve-sim, from apply to all Ready, an idle window, then
//! delete to all gone — for the provider with batched task observation,
//! with per-task polling, and for the predecessor's per-VM blocking pattern.
//! The simulator's request log and task table and the API server's audit
//! log are the referees; the provider and the predecessor driver run as
//! child processes so their CPU time and memory are their own. See
//! BENCHMARKS.md for what each figure means.

mod arena;
mod audit;
mod baseline;
mod child;
mod cli;
mod clock;
mod cluster;
mod drift;
mod fleet;
mod fleetmd;
mod headline;
mod ideal;
mod machine;
mod markdown;
mod phases;
mod predecessor;
mod provider;
mod referee;
mod report;
mod run;
mod sharded;
mod shardmd;
mod sim;
mod smoke;
mod stats;
mod summary;
mod wait;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use cli::{Cli, Command, RunArgs, Variant};

fn main() -> ExitCode {
    provider_proxmox::install_crypto_provider();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("provider-bench: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => bench(args).await,
            Command::Predecessor(args) => predecessor::main(args).await.map(|()| true),
            Command::Render(args) => render(args).map(|()| true),
        }
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("provider-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Renders a result's section again.
fn render(args: cli::RenderArgs) -> anyhow::Result<()> {
    let report = report::Report::read(&args.json)?;
    markdown::update_file(&args.markdown, &report.key(), &markdown::section(&report))?;
    eprintln!("==> updated {}", args.markdown.display());
    Ok(())
}

/// Runs every variant; `Ok(false)` when the smoke check failed.
async fn bench(args: RunArgs) -> anyhow::Result<bool> {
    let this = std::env::current_exe().context("locating this binary")?;
    let bin_dir = match &args.bin_dir {
        Some(dir) => dir.clone(),
        None => this
            .parent()
            .map(PathBuf::from)
            .context("this binary's directory")?,
    };
    let provider_bin = bin_dir.join("proxmox-provider");
    let sim_bin = bin_dir.join("pve-sim");
    for bin in [&provider_bin, &sim_bin] {
        anyhow::ensure!(
            bin.is_file(),
            "{} is missing: build the workspace's binaries first (make bench does)",
            bin.display()
        );
    }
    std::fs::create_dir_all(&args.work_dir)
        .with_context(|| format!("creating {}", args.work_dir.display()))?;
    let work_dir = std::path::absolute(&args.work_dir)?;
    let args = RunArgs { work_dir, ..args };
    let n = args.vm_count();
    eprintln!(
        "==> provider-bench: {n} VMs on {} nodes, time scale {}, variants {:?}",
        args.nodes.join(","),
        args.time_scale,
        args.variants
    );
    eprintln!("==> starting the control plane");
    let cluster = cluster::Cluster::start(&args.work_dir).await?;
    let machine =
        machine::Machine::describe(&bin_dir, &provider_bin, cluster.apiserver_version().await);
    let import_limit = provider_proxmox::api::provider_config::Limits::default()
        .max_concurrent_imports_per_node as usize;
    let binaries = provider::Binaries {
        provider: &provider_bin,
        sim: &sim_bin,
    };
    let mut summaries = Vec::new();
    let mut sharded = None;
    let mut fleet = None;
    for &variant in &args.variants {
        eprintln!("==> {}", variant.title());
        let run = match variant {
            Variant::Batched | Variant::PerTask => {
                provider::run(&cluster, &args, variant, &binaries).await?
            }
            Variant::Predecessor => baseline::run(&args, &this, &sim_bin).await?,
            Variant::Fleet => {
                let limits = fleet::FleetLimits {
                    requests_per_second: args.fleet_rps,
                    max_concurrent_clones_per_node: args.fleet_clone_slots,
                };
                let (run, image) =
                    provider::run_fleet(&cluster, &args, variant, &binaries, Some(limits)).await?;
                // Its delete goes through the fleet's own request budget.
                let budget = Some(f64::from(limits.requests_per_second.max(1)));
                let summary = summary::summarize_within(
                    &run,
                    (import_limit, budget),
                    &args.nodes,
                    args.time_scale,
                );
                fleet = Some(fleet::Fleet::of(
                    &run,
                    image.unwrap_or_default(),
                    limits,
                    &args.nodes,
                    summary.ideal.even,
                    args.time_scale,
                ));
                summaries.push(summary);
                continue;
            }
            Variant::Sharded => {
                eprintln!(
                    "    {} configs × {} replicas, {n} VMs per config",
                    args.shard_configs, args.shard_replicas
                );
                let run = sharded::run(&cluster, &args, &binaries).await?;
                sharded = Some(sharded::Sharded::of(
                    &run,
                    import_limit,
                    &args.nodes,
                    args.time_scale,
                ));
                continue;
            }
        };
        // The provider's budget, `--rps` when set: its delete's ideal at
        // that rate (the naive loop has none).
        let budget = summary::budget(variant).map(|default| args.rps.map_or(default, f64::from));
        summaries.push(summary::summarize_within(
            &run,
            (import_limit, budget),
            &args.nodes,
            args.time_scale,
        ));
    }

    let report = report::Report::new(&args, machine, summaries, sharded, fleet);
    std::fs::create_dir_all(&args.results)
        .with_context(|| format!("creating {}", args.results.display()))?;
    let result_path = args.results.join(format!("{}.json", report.key()));
    run::write_json(&result_path, &report)?;
    let section = markdown::section(&report);
    eprintln!("\n{section}");
    eprintln!("==> results: {}", result_path.display());
    if let Some(path) = &args.markdown {
        markdown::update_file(path, &report.key(), &section)?;
        eprintln!("==> updated {}", path.display());
    }
    if args.smoke {
        let mut summaries = report.variants.clone();
        summaries.extend(
            report
                .sharded
                .iter()
                .flat_map(|s| s.configs.iter().cloned()),
        );
        let mut failed = smoke::failures(&summaries);
        failed.extend(report.fleet.iter().flat_map(smoke::fleet_failures));
        for f in &failed {
            eprintln!("SMOKE CHECK FAILED: {f}");
        }
        if failed.is_empty() {
            eprintln!(
                "==> smoke check passed: every VM Ready and gone, one VM per resource, import limit held"
            );
        }
        return Ok(failed.is_empty());
    }
    Ok(true)
}
