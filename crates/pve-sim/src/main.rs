//! `pve-sim`: the Proxmox VE API simulator binary, a thin wrapper over
//! [`pve_sim`]. See docs/pve-sim.md.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use pve_sim::{
    ApiTokenSpec, FaultRates, Grant, NodeSetting, SimConfig, Simulator, TlsSource, UserSpec,
};

/// Simulates the Proxmox VE REST API (HTTPS, /api2/json) in memory.
#[derive(Parser, Debug)]
#[command(name = "pve-sim", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8006")]
    listen: SocketAddr,
    /// PEM certificate (chain) to serve instead of a generated one.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Write the CA certificate (PEM) that signed the server certificate here.
    #[arg(long)]
    ca_out: Option<PathBuf>,
    /// Accepted API token, USER@REALM!TOKENID=SECRET (repeatable).
    #[arg(long = "api-token")]
    api_tokens: Vec<ApiTokenSpec>,
    /// Accepted login for POST /access/ticket, USER@REALM:PASSWORD (repeatable).
    #[arg(long = "user")]
    users: Vec<UserSpec>,
    /// Grant roles/privileges: `SUBJECT:PATH:ROLE[,ROLE]` (repeatable), e.g. ci@pve!prov:/vms:PVEVMAdmin.
    #[arg(long = "grant")]
    grants: Vec<Grant>,
    /// A group that exists, for ACL entries (repeatable; no members are modelled).
    #[arg(long = "group")]
    groups: Vec<String>,
    /// Comma-separated node names; the first holds template VM 9000.
    #[arg(long, default_value = "pve", value_delimiter = ',')]
    nodes: Vec<String>,
    /// Node memory, `[NODE=]SIZE` (e.g. `pve2=32G`; without NODE: every node). Default 64G.
    #[arg(long = "node-memory")]
    node_memory: Vec<NodeSetting>,
    /// Node CPUs, `[NODE=]COUNT` (e.g. `pve2=8`). Default 16.
    #[arg(long = "node-cpus")]
    node_cpus: Vec<NodeSetting>,
    /// The PVE major version to simulate: 9 (HA rules) or 8 (HA groups).
    #[arg(long, default_value_t = 9)]
    pve_version: u8,
    /// Start from this state (YAML or JSON; see `GET /_sim/state`) instead of the seeded one.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Multiplies every simulated duration (1.0 realistic, 0.01 for tests).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Login ticket lifetime in seconds (not scaled).
    #[arg(long, default_value_t = 7200)]
    ticket_lifetime: u64,
    /// Seed for fault randomness and generated MACs/UUIDs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Fraction of API requests answered 500.
    #[arg(long, default_value_t = 0.0)]
    fault_500_rate: f64,
    /// Fraction of API requests answered 595 (proxy connection failure).
    #[arg(long, default_value_t = 0.0)]
    fault_595_rate: f64,
    /// Fraction of API requests answered 596 (proxy timeout).
    #[arg(long, default_value_t = 0.0)]
    fault_596_rate: f64,
    /// Fraction of API requests whose connection is reset without a response.
    #[arg(long, default_value_t = 0.0)]
    fault_reset_rate: f64,
    /// Extra latency in milliseconds added to --fault-latency-rate of requests.
    #[arg(long, default_value_t = 0)]
    fault_latency_ms: u64,
    /// Fraction of requests that get --fault-latency-ms.
    #[arg(long, default_value_t = 1.0)]
    fault_latency_rate: f64,
    /// Fraction of requests whose config lock times out ("got timeout").
    #[arg(long, default_value_t = 0.0)]
    fault_lock_timeout_rate: f64,
    /// Fraction of tasks that fail with an injected error.
    #[arg(long, default_value_t = 0.0)]
    fault_task_failure_rate: f64,
}

impl Args {
    /// Whether the command line names credentials; without, the defaults
    /// of [`SimConfig::default`] apply.
    fn explicit_credentials(&self) -> bool {
        !self.api_tokens.is_empty() || !self.users.is_empty()
    }
}

fn config(args: &Args) -> Result<SimConfig, pve_sim::Error> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => TlsSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => TlsSource::Generate,
    };
    let latency = (args.fault_latency_ms > 0).then(|| {
        (
            Duration::from_millis(args.fault_latency_ms),
            args.fault_latency_rate,
        )
    });
    let mut node_memory = std::collections::BTreeMap::new();
    for s in &args.node_memory {
        node_memory.insert(s.node.clone(), s.size()?);
    }
    let mut node_cpus = std::collections::BTreeMap::new();
    for s in &args.node_cpus {
        node_cpus.insert(s.node.clone(), s.count()?);
    }
    let state = args
        .state
        .as_deref()
        .map(pve_sim::state::file::StateFile::load)
        .transpose()?;
    let state_accounts = state
        .as_ref()
        .is_some_and(|s| !s.users.is_empty() || !s.tokens.is_empty());
    let mut config = SimConfig {
        listen: args.listen,
        state,
        node_memory,
        node_cpus,
        pve_version: args.pve_version,
        tls,
        nodes: args.nodes.clone(),
        time_scale: args.time_scale,
        grants: args.grants.clone(),
        groups: args.groups.clone(),
        ticket_lifetime: Duration::from_secs(args.ticket_lifetime),
        faults: FaultRates {
            http_500: args.fault_500_rate,
            http_595: args.fault_595_rate,
            http_596: args.fault_596_rate,
            reset: args.fault_reset_rate,
            latency,
            lock_timeout: args.fault_lock_timeout_rate,
            task_failure: args.fault_task_failure_rate,
        },
        seed: args.seed,
        ..SimConfig::default()
    };
    if args.explicit_credentials() || state_accounts {
        config.api_tokens = args.api_tokens.clone();
        config.users = args.users.clone();
    }
    Ok(config)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    pve_sim::install_crypto_provider();
    let args = Args::parse();
    let sim = match async { Simulator::start(config(&args)?).await }.await {
        Ok(sim) => sim,
        Err(e) => {
            eprintln!("pve-sim: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Some(path) = &args.ca_out {
        if let Err(e) = std::fs::write(path, sim.ca_pem()) {
            eprintln!("pve-sim: cannot write {}: {e}", path.display());
            return std::process::ExitCode::FAILURE;
        }
        println!("ca {}", path.display());
    }
    println!("listening on {}", sim.base_url());
    println!("fingerprint {}", sim.fingerprint());
    if !args.explicit_credentials() {
        println!(
            "credentials default (see docs/pve-sim.md; set --api-token/--user to choose your own)"
        );
    }
    wait_for_signal().await;
    println!("shutting down");
    sim.shutdown().await;
    std::process::ExitCode::SUCCESS
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
