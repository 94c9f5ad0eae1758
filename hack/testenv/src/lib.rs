//! A real Kubernetes control plane for tests and people: etcd and
//! kube-apiserver built from Go modules (`hack/control-plane/build.sh`),
//! started on free loopback ports with envtest's flags, certificate
//! authentication for an admin in `system:masters`, RBAC authorization and
//! a ServiceAccount token signer.
//!
//! Two lifetimes:
//! - [`Lifetime::Attached`] (tests): the processes die with the current
//!   process however it ends, and their run directory (under the system temp
//!   dir) is removed at exit or, after a SIGKILL, by the next attached start.
//! - [`Lifetime::Detached`] (`testenv up`, `make cluster-up`): the processes
//!   outlive the launcher; [`stop_detached`] stops them by PID.
//!
//! ```no_run
//! # async fn demo() -> Result<(), testenv::Error> {
//! let plane = testenv::ControlPlane::start(testenv::Options::attached()).await?;
//! let client = kube::Client::try_from(plane.kube_config().await?).expect("valid config");
//! # Ok(()) }
//! ```

mod attached;
mod binaries;
mod error;
pub mod kubeconfig;
mod launch;
mod pki;
mod process;
mod readiness;
mod run_dir;
mod state;
mod sys;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use attached::sweep_stale_runs;
pub use binaries::{BIN_DIR_ENV, Binaries, repo_root};
pub use error::Error;
pub use pki::{ADMIN_GROUP, ADMIN_USER};
pub use process::Lifetime;
pub use sys::{ProcessId, Signal};

use launch::{Plan, Running};
use pki::Pki;
use state::State;

/// Overrides the start timeout (seconds, default 120).
pub const START_TIMEOUT_ENV: &str = "TESTENV_START_TIMEOUT";

/// Installs ring as the process's rustls provider (idempotent). kube-rs and
/// reqwest both use the process default.
pub fn install_crypto_provider() {
    // Err only means a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Where `testenv up` keeps its cluster unless told otherwise:
/// `.work/cluster` under the repository root (ignored by git).
pub fn default_dir() -> PathBuf {
    repo_root().join(".work/cluster")
}

#[derive(Debug, Clone)]
pub struct Options {
    pub lifetime: Lifetime,
    /// Run directory for a detached control plane; attached ones get a
    /// fresh directory under the system temp dir.
    pub dir: Option<PathBuf>,
    /// From starting etcd to the `default` namespace existing; building the
    /// binaries on first use is not counted.
    pub start_timeout: Duration,
}

impl Options {
    pub fn attached() -> Self {
        Self {
            lifetime: Lifetime::Attached,
            dir: None,
            start_timeout: start_timeout_from_env(),
        }
    }

    pub fn detached(dir: PathBuf) -> Self {
        Self {
            lifetime: Lifetime::Detached,
            dir: Some(dir),
            start_timeout: start_timeout_from_env(),
        }
    }
}

fn start_timeout_from_env() -> Duration {
    let seconds = std::env::var(START_TIMEOUT_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    Duration::from_secs(seconds)
}

/// A running control plane. Dropping an attached one stops it and removes
/// its directory; dropping a detached one leaves it running.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    ca_cert_pem: String,
    binaries: Binaries,
    lifetime: Lifetime,
    pids: Vec<u32>,
}

impl ControlPlane {
    /// Builds the binaries if needed, then starts etcd and kube-apiserver and
    /// waits until the apiserver is ready and namespace `default` exists.
    pub async fn start(options: Options) -> Result<Self, Error> {
        install_crypto_provider();
        let binaries = Binaries::ensure().await?;
        let dir = match (&options.lifetime, &options.dir) {
            (Lifetime::Detached, Some(dir)) => {
                run_dir::prepare_detached(dir)?;
                dir.clone()
            }
            (Lifetime::Detached, None) => {
                let dir = default_dir();
                run_dir::prepare_detached(&dir)?;
                dir
            }
            (Lifetime::Attached, _) => attached::new_run_dir()?,
        };
        // Absolute paths: the processes and the state file outlive our cwd.
        let dir = std::path::absolute(&dir).map_err(|source| error::Error::Io {
            what: format!("resolving {}", dir.display()),
            source,
        })?;
        let pki = Pki::generate()?;
        let pki_files = pki.write(&dir.join("pki"))?;
        let deadline = tokio::time::Instant::now() + options.start_timeout;
        let Running {
            mut etcd,
            mut apiserver,
            server,
        } = Plan {
            binaries: &binaries,
            dir: &dir,
            pki: &pki_files,
            ca_cert_pem: &pki.ca_cert,
            lifetime: options.lifetime,
            deadline,
            timeout: options.start_timeout,
        }
        .run()
        .await?;

        let kubeconfig = dir.join("kubeconfig");
        let ready = async {
            kubeconfig::write(&kubeconfig, &kubeconfig::admin(&server, &pki))?;
            let client =
                kube::Client::try_from(kubeconfig::load(&kubeconfig).await?).map_err(|e| {
                    Error::Kubeconfig {
                        path: kubeconfig.clone(),
                        message: format!("building a client: {e}"),
                    }
                })?;
            let apiserver_log = apiserver.log.clone();
            readiness::wait_for(
                "namespace default",
                deadline,
                options.start_timeout,
                &mut [&mut apiserver, &mut etcd],
                &apiserver_log,
                || readiness::default_namespace(&client),
            )
            .await?;
            let owner = match options.lifetime {
                Lifetime::Attached => sys::ProcessId::current(),
                Lifetime::Detached => None,
            };
            State {
                owner,
                etcd: etcd.id,
                apiserver: apiserver.id,
                server: server.clone(),
                kubeconfig: kubeconfig.clone(),
            }
            .write(&dir)?;
            Ok::<_, Error>(())
        }
        .await;
        // On error, dropping the handles kills both processes.
        ready?;
        let pids = vec![apiserver.id.pid, etcd.id.pid];
        match options.lifetime {
            Lifetime::Attached => {
                if let Err(e) = attached::keep_until_exit(&dir, vec![apiserver, etcd]) {
                    attached::stop(&dir);
                    return Err(e);
                }
            }
            Lifetime::Detached => {
                apiserver.release();
                etcd.release();
            }
        }
        Ok(Self {
            dir,
            kubeconfig,
            server,
            ca_cert_pem: pki.ca_cert,
            binaries,
            lifetime: options.lifetime,
            pids,
        })
    }

    /// The run directory (certificates, etcd data, logs, kubeconfig).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The admin kubeconfig (user `default` in group `system:masters`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:<port>`
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The CA that signed the serving certificate, for further kubeconfigs.
    pub fn ca_cert_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// The binaries in use, including a kubectl of the apiserver's version.
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// The PIDs of kube-apiserver and etcd.
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// A client configuration for the admin.
    pub async fn kube_config(&self) -> Result<kube::Config, Error> {
        kubeconfig::load(&self.kubeconfig).await
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.lifetime == Lifetime::Attached {
            attached::stop(&self.dir);
        }
    }
}

/// What `testenv status` reports.
#[derive(Debug)]
pub enum Status {
    /// Both processes run.
    Up {
        server: String,
        kubeconfig: PathBuf,
        pids: Vec<u32>,
    },
    /// Nothing was started in that directory, or it was stopped.
    Down,
    /// A previous start left a directory but not both processes.
    Broken { live_pids: Vec<u32> },
}

/// Whether a detached control plane runs in `dir`.
pub fn status(dir: &Path) -> Result<Status, Error> {
    let Some(state) = State::read(dir)? else {
        return Ok(Status::Down);
    };
    let live: Vec<u32> = state.live_processes().iter().map(|p| p.pid).collect();
    Ok(match live.len() {
        2 => Status::Up {
            server: state.server,
            kubeconfig: state.kubeconfig,
            pids: live,
        },
        _ => Status::Broken { live_pids: live },
    })
}

/// Stops the detached control plane in `dir` (SIGTERM, then SIGKILL after a
/// grace period; apiserver first, so it does not complain about etcd) and
/// removes the directory. Returns how many processes were stopped.
pub async fn stop_detached(dir: &Path) -> Result<usize, Error> {
    let mut stopped = 0;
    if let Some(state) = State::read(dir)? {
        for process in state.live_processes() {
            process::terminate(process, Duration::from_secs(15)).await?;
            stopped += 1;
        }
    }
    run_dir::remove(dir)?;
    Ok(stopped)
}
