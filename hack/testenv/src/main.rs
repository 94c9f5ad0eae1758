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
    Up(DirArg),
    /// Stop it (by PID) and remove its directory.
    Down(DirArg),
    /// Tell whether it runs (exit status 0 only if it does).
    Status(DirArg),
    /// Print the kubeconfig path of the running control plane.
    Kubeconfig(DirArg),
}

#[derive(clap::Args)]
struct DirArg {
    /// Run directory [default: .work/cluster in the repository]
    #[arg(long)]
    dir: Option<PathBuf>,
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
        Command::Up(arg) => {
            let dir = arg.dir();
            if let Status::Up { kubeconfig, .. } = testenv::status(&dir)? {
                eprintln!("testenv: already running in {}", dir.display());
                print_kubeconfig_hint(&kubeconfig);
                return Ok(ExitCode::SUCCESS);
            }
            eprintln!(
                "testenv: starting etcd and kube-apiserver in {}",
                dir.display()
            );
            let started = std::time::Instant::now();
            // Interrupted half-way, the start future is dropped, and with it
            // the handles that kill whatever it had started.
            let plane = tokio::select! {
                plane = ControlPlane::start(Options::detached(dir)) => plane?,
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
