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
mod audit;
mod binaries;
mod control_plane;
mod detached;
mod error;
pub mod kubeconfig;
mod launch;
mod node;
mod pki;
mod process;
mod readiness;
mod restart;
mod run_dir;
mod state;
mod sys;

use std::path::PathBuf;
use std::time::Duration;

pub use attached::{spawn as spawn_attached, sweep_stale_runs};
pub use audit::AuditPolicy;
pub use binaries::{BIN_DIR_ENV, Binaries, repo_root};
pub use control_plane::ControlPlane;
pub use detached::{Status, status, stop as stop_detached};
pub use error::Error;
pub use node::Node;
pub use pki::{ADMIN_GROUP, ADMIN_USER};
pub use process::Lifetime;
pub use sys::{ProcessId, Signal};

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
    /// Write an audit log with this policy (`ControlPlane::audit_log`);
    /// `None`: no audit log.
    pub audit: Option<AuditPolicy>,
    /// Serve a node too (`testenv up --node-address`): see [`Node`].
    /// `None`: loopback only, no controllers, as envtest.
    pub node: Option<Node>,
}

impl Options {
    pub fn attached() -> Self {
        Self {
            lifetime: Lifetime::Attached,
            dir: None,
            start_timeout: start_timeout_from_env(),
            audit: None,
            node: None,
        }
    }

    pub fn detached(dir: PathBuf) -> Self {
        Self {
            lifetime: Lifetime::Detached,
            dir: Some(dir),
            start_timeout: start_timeout_from_env(),
            audit: None,
            node: None,
        }
    }

    /// The same options, serving a node (see [`Node`]).
    pub fn with_node(self, node: Node) -> Self {
        Self {
            node: Some(node),
            ..self
        }
    }

    /// The same options with an audit log written under `policy`.
    pub fn with_audit(self, policy: AuditPolicy) -> Self {
        Self {
            audit: Some(policy),
            ..self
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
