//! `testenv`: start, stop and inspect a detached local control plane.
//!
//! `testenv up` prints progress on stderr and the admin kubeconfig path as
//! the last line on stdout, so scripts can do `KUBECONFIG=$(testenv up | tail -1)`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use testenv::{ControlPlane, Options, Status};

#[derive(Parser)]
#[command(about = "A local etcd + kube-apiserver for development and tests")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a control plane in the background; prints the kubeconfig path last.
    Up(UpArgs),
    /// Stop it (by PID) and remove its directory.
    Down(DirArg),
    /// Tell whether it runs (exit status 0 only if it does).
    Status(DirArg),
    /// Print the kubeconfig path of the running control plane.
    Kubeconfig(DirArg),
    /// Start an attached control plane, print `OWNER <dir> <pids>`, then
    /// exit at once (`--exit`) or wait to be killed. The lifetime tests use
    /// it as the owner process whose end they check.
    #[command(hide = true)]
    Hold {
        /// Exit normally right after starting, instead of waiting.
        #[arg(long)]
        exit: bool,
    },
}

#[derive(clap::Args)]
struct DirArg {
    /// Run directory [default: .work/cluster in the repository]
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(clap::Args)]
struct UpArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Serve a node at this address too (hack/node/up.sh, inside its network
    /// namespace): the apiserver on every address, the `kubernetes` Service
    /// leading to this one, ServiceAccount admission, a kubelet client
    /// certificate, kube-controller-manager and kube-scheduler.
    #[arg(long, requires = "node_bin_dir")]
    node_address: Option<std::net::Ipv4Addr>,
    /// Where kube-controller-manager and kube-scheduler are (hack/node/build.sh's output).
    #[arg(long, requires = "node_address")]
    node_bin_dir: Option<PathBuf>,
}

impl DirArg {
    fn dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(testenv::default_dir)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("testenv: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("testenv: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> Result<ExitCode, testenv::Error> {
    match command {
        Command::Up(args) => {
            let dir = args.dir.dir();
            if let Status::Up { kubeconfig, .. } = testenv::status(&dir)? {
                eprintln!("testenv: already running in {}", dir.display());
                print_kubeconfig_hint(&kubeconfig);
                return Ok(ExitCode::SUCCESS);
            }
            let mut options = Options::detached(dir.clone());
            if let (Some(address), Some(bin_dir)) = (args.node_address, args.node_bin_dir) {
                options = options.with_node(testenv::Node { address, bin_dir });
            }
            eprintln!(
                "testenv: starting etcd and kube-apiserver{} in {}",
                if options.node.is_some() {
                    ", kube-controller-manager and kube-scheduler"
                } else {
                    ""
                },
                dir.display()
            );
            let started = std::time::Instant::now();
            // Interrupted half-way, the start future is dropped, and with it
            // the handles that kill whatever it had started.
            let plane = tokio::select! {
                plane = ControlPlane::start(options) => plane?,
                signal = interrupted() => {
                    eprintln!("testenv: {signal}; stopped what was started");
                    return Ok(ExitCode::from(130));
                }
            };
            eprintln!(
                "testenv: ready at {} after {:.1} s (logs in {})",
                plane.server(),
                started.elapsed().as_secs_f64(),
                plane.dir().display()
            );
            print_kubeconfig_hint(plane.kubeconfig_path());
            Ok(ExitCode::SUCCESS)
        }
        Command::Down(arg) => {
            let dir = arg.dir();
            let stopped = testenv::stop_detached(&dir).await?;
            eprintln!(
                "testenv: stopped {stopped} process(es) and removed {}",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Status(arg) => {
            let dir = arg.dir();
            Ok(match testenv::status(&dir)? {
                Status::Up {
                    server,
                    kubeconfig,
                    pids,
                } => {
                    println!("up: {server} (pids {pids:?})");
                    println!("kubeconfig: {}", kubeconfig.display());
                    ExitCode::SUCCESS
                }
                Status::Down => {
                    println!("down: nothing runs in {}", dir.display());
                    ExitCode::FAILURE
                }
                Status::Broken { live_pids } => {
                    println!(
                        "broken: {} has a stale control plane (live pids {live_pids:?}); \
                         run `testenv down` to clean up",
                        dir.display()
                    );
                    ExitCode::FAILURE
                }
            })
        }
        Command::Hold { exit } => {
            let plane = ControlPlane::start(Options::attached()).await?;
            let pids: Vec<String> = plane.pids().iter().map(u32::to_string).collect();
            println!("OWNER {} {}", plane.dir().display(), pids.join(" "));
            // Like a static in a test binary, the control plane is never
            // dropped: only the process's end may stop it.
            std::mem::forget(plane);
            if exit {
                std::process::exit(0);
            }
            std::future::pending::<()>().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Kubeconfig(arg) => {
            let dir = arg.dir();
            match testenv::status(&dir)? {
                Status::Up { kubeconfig, .. } => {
                    println!("{}", kubeconfig.display());
                    Ok(ExitCode::SUCCESS)
                }
                _ => {
                    eprintln!(
                        "testenv: no control plane runs in {}; start one with `testenv up`",
                        dir.display()
                    );
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

/// The hint goes to stderr so that the path stays the last stdout line.
fn print_kubeconfig_hint(kubeconfig: &std::path::Path) {
    eprintln!("testenv: export KUBECONFIG={}", kubeconfig.display());
    println!("{}", kubeconfig.display());
}

/// Resolves on SIGINT, SIGTERM or SIGHUP, naming it.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind| signal(kind).ok();
    let (mut int, mut term, mut hup) = (
        listen(SignalKind::interrupt()),
        listen(SignalKind::terminate()),
        listen(SignalKind::hangup()),
    );
    async fn recv(signal: &mut Option<tokio::signal::unix::Signal>) {
        match signal {
            Some(signal) => {
                signal.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    tokio::select! {
        () = recv(&mut int) => "interrupted",
        () = recv(&mut term) => "terminated",
        () = recv(&mut hup) => "hung up",
    }
}
