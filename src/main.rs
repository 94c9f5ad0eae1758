//! `proxmox-provider`: the controller binary.
//!
//! Subcommands:
//! * `run`: the controller (see `docs/controller.md`); every flag is also an
//!   environment variable.
//! * `crds`: print every CustomResourceDefinition as multi-document YAML, or
//!   write one file per CRD into a directory (how `crds/` is regenerated).
//! * `import`: observe-only ProxmoxVM and ProxmoxContainer manifests for
//!   the guests a Proxmox cluster already runs (see `provider_proxmox::import`).

use std::{
    io::{IsTerminal, Write},
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context;
use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use provider_proxmox::reconcile::{self, LeaderElection, Settings};

/// With the `mimalloc` feature, mimalloc serves every allocation (see the
/// feature's note in Cargo.toml).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Crossplane-style Kubernetes provider for Proxmox VE virtual machines.
#[derive(Parser, Debug)]
#[command(name = "proxmox-provider", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the controller: reconcile ProxmoxVMs until SIGTERM or Ctrl-C.
    Run(RunArgs),
    /// Print the CustomResourceDefinitions as multi-document YAML
    /// (`proxmox-provider crds | kubectl apply -f -` installs them).
    Crds(CrdsArgs),
    /// Write observe-only manifests (managementPolicies ["Observe"]) for
    /// guests a Proxmox cluster already runs: one ProxmoxVM or
    /// ProxmoxContainer per guest, named by its VMID in
    /// crossplane.io/external-name. Proxmox is reached through a provider
    /// config and its credentials Secret, read with your kubeconfig, as the
    /// provider reads them.
    Import(ImportArgs),
}

#[derive(Args, Debug)]
struct ImportArgs {
    /// The provider config to reach Proxmox through, which the manifests
    /// name too.
    #[arg(long, value_name = "NAME", default_value = "default")]
    provider_config: String,
    /// Its kind (a ProviderConfig is looked up in --namespace).
    #[arg(long, value_enum, default_value = "cluster-provider-config")]
    provider_config_kind: ConfigKindArg,
    /// The namespace of the manifests.
    #[arg(long, value_parser = namespace_name, default_value = "default")]
    namespace: String,
    /// Only guests on this node.
    #[arg(long)]
    node: Option<String>,
    /// Only guests in this pool.
    #[arg(long)]
    pool: Option<String>,
    /// Only guests with this tag (repeat: every tag).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Only guests whose name matches this glob (`*`, `?`).
    #[arg(long, value_name = "GLOB")]
    name: Option<String>,
    /// Which guests.
    #[arg(long, value_enum, default_value = "all")]
    kinds: KindsArg,
    /// Templates too (left out by default).
    #[arg(long)]
    templates: bool,
    /// Guests whose description carries a provider's owner marker too
    /// (left out by default: a resource, of this cluster or another,
    /// already manages them; imported, they are only observed).
    #[arg(long)]
    include_managed: bool,
    /// Write one file per guest into this directory instead of printing one
    /// multi-document stream.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Kubeconfig (default: in-cluster config, then ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ConfigKindArg {
    ClusterProviderConfig,
    ProviderConfig,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum KindsArg {
    All,
    Vms,
    Containers,
}

#[derive(Args, Debug)]
struct CrdsArgs {
    /// Write one file per CRD into this directory instead of printing them
    /// (`proxmox-provider crds --output-dir crds` regenerates `crds/`).
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Address serving /metrics, /healthz and /readyz, without
    /// authentication: loopback by default, so only the host (or the Pod)
    /// reaches it. A Deployment passes 0.0.0.0:8080 so the kubelet's probes
    /// and Prometheus reach it, and its network policy decides who may.
    #[arg(long, env = "METRICS_ADDR", default_value = "127.0.0.1:8080")]
    metrics_addr: SocketAddr,
    /// Share the provider configs among replicas: one Lease per config
    /// (crossplane-provider-proxmox.* in POD_NAMESPACE); a replica reconciles
    /// only the configs it holds.
    #[arg(long, env = "LEADER_ELECTION", default_value_t = true, action = ArgAction::Set)]
    leader_election: bool,
    /// Log filter: a level (error, warn, info, debug, trace) or
    /// tracing-subscriber directives.
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "text")]
    log_format: LogFormat,
    /// How often a VM that is up to date is compared with Proxmox again
    /// (drift check), as a Go duration; a provider config's resyncInterval
    /// other than 1m, and a crossplane.io/poll-interval annotation, win.
    #[arg(long, env = "POLL_INTERVAL", default_value = "1m", value_parser = go_duration)]
    poll_interval: Duration,
    /// ProxmoxVMs reconciled at once.
    #[arg(long, env = "MAX_CONCURRENT_RECONCILES", default_value_t = 10,
          value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_reconciles: u16,
    /// Serve one namespace only (the namespaced mode): its ProxmoxVMs and
    /// ProviderConfigs, and only its Secrets, ConfigMaps and Events; the
    /// Leases stay in POD_NAMESPACE. Nothing cluster-scoped is read, so a
    /// Role there (and one for the Leases) is all the RBAC it needs
    /// (deploy/namespaced/, the chart's watchNamespace); a ProxmoxVM naming
    /// a ClusterProviderConfig is told it is not served. Default: every
    /// namespace, and ClusterProviderConfigs.
    #[arg(long, env = "WATCH_NAMESPACE", value_name = "NAMESPACE", value_parser = namespace_name)]
    watch_namespace: Option<String>,
    /// Kubeconfig to use outside a cluster (default: in-cluster config, then
    /// ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// How running tasks are observed: one active-task list per node
    /// (`batched`) or one status request per task (`per-task`). Only for
    /// `make bench`, which compares the two.
    #[arg(
        long,
        env = "TASK_OBSERVE_MODE",
        value_enum,
        default_value = "batched",
        hide = true
    )]
    task_observe_mode: TaskObserveMode,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum TaskObserveMode {
    Batched,
    PerTask,
}

fn go_duration(text: &str) -> Result<Duration, String> {
    provider_proxmox::api::provider_config::go_duration(text)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?} is not a positive Go duration such as 30s, 1m or 1h30m"))
}

/// A namespace's name: a DNS label (RFC 1123).
fn namespace_name(text: &str) -> Result<String, String> {
    let valid = (1..=63).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-');
    if valid {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a namespace name (lower-case letters, digits and -, at most 63)"
        ))
    }
}

fn main() -> anyhow::Result<()> {
    provider_proxmox::install_crypto_provider();
    match Cli::parse().command {
        Command::Run(args) => run(args),
        Command::Crds(args) => match args.output_dir {
            Some(dir) => write_crds(&dir),
            None => print_crds(),
        },
        Command::Import(args) => import(args),
    }
}

fn import(args: ImportArgs) -> anyhow::Result<()> {
    use provider_proxmox::api::ProviderConfigKind;
    use provider_proxmox::import;
    use provider_proxmox::reconcile::providers::ConfigKey;
    let kind = match args.provider_config_kind {
        ConfigKindArg::ClusterProviderConfig => ProviderConfigKind::ClusterProviderConfig,
        ConfigKindArg::ProviderConfig => ProviderConfigKind::ProviderConfig,
    };
    let key = ConfigKey {
        kind,
        namespace: match kind {
            ProviderConfigKind::ProviderConfig => args.namespace.clone(),
            ProviderConfigKind::ClusterProviderConfig => String::new(),
        },
        name: args.provider_config.clone(),
    };
    let filter = import::Filter {
        node: args.node,
        pool: args.pool,
        tags: args.tags,
        name: args.name,
        kinds: match args.kinds {
            KindsArg::All => import::Kinds::All,
            KindsArg::Vms => import::Kinds::Vms,
            KindsArg::Containers => import::Kinds::Containers,
        },
        templates: args.templates,
    };
    let target = import::Target {
        namespace: args.namespace,
        config_kind: kind,
        config_name: args.provider_config,
    };
    let guests = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(async {
            let kube = kube_client(args.kubeconfig.as_deref()).await?;
            let client = import::client(kube, &key).await?;
            import::list(&client, &filter)
                .await
                .context("listing the guests")
        })?;
    let (guests, managed) = import::unmanaged(guests, args.include_managed);
    for g in &managed {
        eprintln!(
            "left out guest {} ({}): already managed by {} (its owner marker; --include-managed to import it anyway)",
            g.vmid,
            g.name.as_deref().unwrap_or("no name"),
            g.managed_by.as_deref().unwrap_or_default(),
        );
    }
    let docs = import::manifests(&guests, &target);
    eprintln!("{} guest(s) chosen", docs.len());
    match args.output_dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            for (file, object) in &docs {
                let path = dir.join(file);
                let yaml = import::to_yaml(object).context("rendering a manifest")?;
                std::fs::write(&path, yaml)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(())
        }
        None => {
            let mut out = String::new();
            for (_, object) in &docs {
                out.push_str("---\n");
                out.push_str(&import::to_yaml(object).context("rendering a manifest")?);
            }
            write_stdout(&out, "the manifests")
        }
    }
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    init_logging(&args)?;
    reconcile::providers::set_task_observe_mode(match args.task_observe_mode {
        TaskObserveMode::Batched => pve_client::ObserveMode::Batched,
        TaskObserveMode::PerTask => pve_client::ObserveMode::PerTask,
    });
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(async move {
            let kube = kube_client(args.kubeconfig.as_deref()).await?;
            let settings = Settings {
                poll_interval: args.poll_interval,
                max_concurrent_reconciles: args.max_concurrent_reconciles,
                metrics_addr: Some(args.metrics_addr),
                leader_election: if args.leader_election {
                    Some(LeaderElection::in_namespace(lease_namespace()?))
                } else {
                    None
                },
                identity: identity(),
                cluster_configs: args.watch_namespace.is_none(),
                namespace: args.watch_namespace.clone(),
            };
            reconcile::providers::set_agent(&settings.identity);
            tracing::info!(
                version = env!("CARGO_PKG_VERSION"),
                poll_interval = ?settings.poll_interval,
                max_concurrent_reconciles = settings.max_concurrent_reconciles,
                leader_election = settings.leader_election.is_some(),
                watch_namespace = settings.namespace.as_deref().unwrap_or("(all)"),
                task_observe_mode = ?args.task_observe_mode,
                "starting proxmox-provider"
            );
            reconcile::run(kube, settings, shutdown_signal())
                .await
                .context("the controller stopped")
        })
}

fn init_logging(args: &RunArgs) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log_level)
        .with_context(|| format!("invalid --log-level {:?}", args.log_level))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
    Ok(())
}

async fn kube_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .with_context(|| format!("loading the kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "no Kubernetes configuration: run in a cluster, or pass --kubeconfig (KUBECONFIG)",
        )?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// The namespace for the leader election Lease: `POD_NAMESPACE`, else the
/// namespace of the pod's service account.
fn lease_namespace() -> anyhow::Result<String> {
    const SERVICE_ACCOUNT_NAMESPACE: &str =
        "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
    let non_empty = |ns: String| Some(ns.trim().to_owned()).filter(|ns| !ns.is_empty());
    std::env::var("POD_NAMESPACE")
        .ok()
        .and_then(non_empty)
        .or_else(|| {
            std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
                .ok()
                .and_then(non_empty)
        })
        .context(
            "leader election needs a namespace for its Leases (crossplane-provider-proxmox.*): \
             set POD_NAMESPACE=<namespace> (for example POD_NAMESPACE=default), \
             or run with --leader-election=false (LEADER_ELECTION=false) when only one instance runs",
        )
}

/// Who this replica is: the pod name (or host name) plus a random suffix,
/// so two processes on one host never share an identity.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "proxmox-provider".to_owned());
    format!("{host}-{:08x}", rand::random::<u32>())
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down");
}

fn print_crds() -> anyhow::Result<()> {
    let yaml = provider_proxmox::api::crd::all_yaml().context("rendering the CRDs as YAML")?;
    write_stdout(&yaml, "the CRDs")
}

fn write_stdout(text: &str, what: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // `proxmox-provider crds | head` closes the pipe early: that is the
        // reader's choice, not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written.with_context(|| format!("writing {what} to stdout")),
    }
}

fn write_crds(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (file, crd) in provider_proxmox::api::crd::all() {
        let yaml = provider_proxmox::api::crd::to_yaml(&crd)
            .with_context(|| format!("rendering {file} as YAML"))?;
        let path = dir.join(&file);
        std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
    }
    let path = dir.join("Kustomization");
    std::fs::write(&path, provider_proxmox::api::crd::kustomization())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
