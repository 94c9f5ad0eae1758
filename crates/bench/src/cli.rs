//! The command line of `provider-bench` (`make bench` passes the `BENCH_*`
//! environment variables through).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "provider-bench",
    about = "Many ProxmoxVMs on a real control plane against pve-sim, measured from the simulator's and the API server's side"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the benchmark (every variant in turn) and report.
    Run(RunArgs),
    /// The predecessor's per-VM blocking pattern against one simulator, as
    /// a child process of `run` (so its CPU and memory are its own).
    #[command(hide = true)]
    Predecessor(crate::predecessor::Args),
    /// Write a result's Markdown section again (from its JSON).
    Render(RenderArgs),
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// A result written by `run` (`benchmarks/<label>-<N>.json`).
    #[arg(long)]
    pub json: PathBuf,
    /// The Markdown file whose section for that label and size is replaced.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub markdown: PathBuf,
}

/// What is compared, one row each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// `proxmox-provider` observing tasks with one active-task list per node.
    Batched,
    /// `proxmox-provider` polling every task's status on its own.
    PerTask,
    /// A worker per VM that creates, polls its own task every 3 s, then
    /// resizes and starts (the Go predecessor's pattern), with pve-client.
    Predecessor,
    /// `proxmox-provider` sharded: several ClusterProviderConfigs, each on
    /// a simulator of its own, and several replicas with a Lease per
    /// config; the run's N VMs per config, applied to all at once.
    Sharded,
    /// `proxmox-provider` with the VMs as linked clones of one
    /// ProxmoxImage's template on each node (one download and one import
    /// per node), with the fleet's limits.
    Fleet,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Batched => "batched",
            Variant::PerTask => "per-task",
            Variant::Predecessor => "predecessor",
            Variant::Sharded => "sharded",
            Variant::Fleet => "fleet",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Variant::Batched => "provider, batched task observation",
            Variant::PerTask => "provider, per-task polling",
            Variant::Predecessor => "predecessor pattern (worker per VM, polls every 3 s)",
            Variant::Sharded => "provider, sharded: configs × replicas with a Lease per config",
            Variant::Fleet => {
                "provider, fleet: linked clones of one ProxmoxImage's template per node"
            }
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// ProxmoxVMs per variant [default: 1000, or 100 with --quick].
    #[arg(long, env = "BENCH_VMS")]
    pub vms: Option<usize>,
    /// Quick mode: 100 VMs unless --vms says otherwise.
    #[arg(long, env = "BENCH_QUICK", value_parser = clap::builder::BoolishValueParser::new(), default_value = "false")]
    pub quick: bool,
    /// Simulated Proxmox nodes (every VM may go to any of them).
    #[arg(
        long,
        env = "BENCH_NODES",
        value_delimiter = ',',
        default_value = "pve1,pve2,pve3,pve4"
    )]
    pub nodes: Vec<String>,
    /// pve-sim's --time-scale: 0.1 makes the 3.5 GiB image import take ~3 s.
    #[arg(long, env = "BENCH_TIME_SCALE", default_value_t = 0.1)]
    pub time_scale: f64,
    /// Every VM with a guest firewall of its own (options and two rules,
    /// `spec.forProvider.firewall`): what the firewall costs at rest.
    #[arg(long, env = "BENCH_FIREWALL", value_parser = clap::builder::BoolishValueParser::new(), default_value = "false")]
    pub firewall: bool,
    /// The variants to run, in order.
    #[arg(
        long,
        env = "BENCH_VARIANTS",
        value_enum,
        value_delimiter = ',',
        default_value = "batched,per-task,predecessor"
    )]
    pub variants: Vec<Variant>,
    /// The `sharded` variant's ClusterProviderConfigs (each with a
    /// simulator of its own and the run's VM count).
    #[arg(long, env = "BENCH_SHARD_CONFIGS", default_value_t = 3,
          value_parser = clap::value_parser!(u8).range(1..=26))]
    pub shard_configs: u8,
    /// The `sharded` variant's provider replicas.
    #[arg(long, env = "BENCH_SHARD_REPLICAS", default_value_t = 3,
          value_parser = clap::value_parser!(u8).range(1..=26))]
    pub shard_replicas: u8,
    /// The `batched` and `per-task` variants' requests per second to
    /// Proxmox (their config's `limits.requestsPerSecond`); unset: the
    /// default (50). A run of 10,000 VMs needs more than the default to
    /// stay near its import ideal (about 13 requests per VM created).
    #[arg(long, env = "BENCH_RPS",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rps: Option<u32>,
    /// The `fleet` variant's requests per second to Proxmox (its config's
    /// `limits.requestsPerSecond`).
    #[arg(long, env = "BENCH_FLEET_RPS", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub fleet_rps: u32,
    /// The `fleet` variant's clones at once per node
    /// (`limits.maxConcurrentClonesPerNode`).
    #[arg(long, env = "BENCH_FLEET_CLONE_SLOTS", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub fleet_clone_slots: u32,
    /// Seconds measured while idle, after all VMs are Ready (and the
    /// `--settle` seconds).
    #[arg(long, env = "BENCH_IDLE", default_value_t = 180)]
    pub idle: u64,
    /// Seconds between all Ready and the idle window, not measured: the
    /// VMs' full looks settle on their phases of the full-look interval
    /// (1.5 times it), so the window shows the cost at rest in steady
    /// state rather than the first cycle's.
    #[arg(long, env = "BENCH_SETTLE", default_value_t = 0)]
    pub settle: u64,
    /// The ProviderConfig's `fullLookInterval` (a Go duration; unset: the
    /// provider's default, 20m). A short one shows what the full looks
    /// cost at rest within a short window.
    #[arg(long, env = "BENCH_FULL_LOOK")]
    pub full_look_interval: Option<String>,
    /// VMs whose tags are changed by hand on Proxmox after the idle window
    /// (a change the shared cluster view shows): how soon the provider
    /// puts them back (`drift.rs`). 0: none.
    #[arg(long, env = "BENCH_DRIFT", default_value_t = 0)]
    pub drift: usize,
    /// Seconds allowed from apply to all Ready; past it the run reports
    /// where the VMs stuck and moves on (to deleting them).
    #[arg(long, env = "BENCH_TIMEOUT", default_value_t = 1800)]
    pub timeout: u64,
    /// Seconds allowed from delete to all gone [default: --timeout].
    #[arg(long, env = "BENCH_DELETE_TIMEOUT")]
    pub delete_timeout: Option<u64>,
    /// Smoke check: fail (exit status 1) unless every variant completed, made
    /// one VM per resource and never exceeded the per-node import limit.
    #[arg(long)]
    pub smoke: bool,
    /// Add (or replace) this run's section in this Markdown file.
    #[arg(long, env = "BENCH_MARKDOWN")]
    pub markdown: Option<PathBuf>,
    /// Name of the run in the Markdown file (e.g. `before`, `after`); a
    /// later run with the same label and size replaces its section.
    #[arg(long, env = "BENCH_LABEL", default_value = "latest")]
    pub label: String,
    /// Where logs and raw records go.
    #[arg(long, env = "BENCH_DIR", default_value = ".work/bench")]
    pub work_dir: PathBuf,
    /// Where the JSON result goes (`<label>-<N>.json`).
    #[arg(long, env = "BENCH_RESULTS", default_value = "benchmarks")]
    pub results: PathBuf,
    /// Where `proxmox-provider` and `pve-sim` are [default: next to this binary].
    #[arg(long, env = "BENCH_BIN_DIR")]
    pub bin_dir: Option<PathBuf>,
}

impl RunArgs {
    pub fn delete_timeout(&self) -> u64 {
        self.delete_timeout.unwrap_or(self.timeout)
    }

    pub fn vm_count(&self) -> usize {
        self.vms.unwrap_or(if self.quick { 100 } else { 1000 })
    }
}
