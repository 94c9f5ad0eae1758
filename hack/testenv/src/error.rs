//! The one error type of the launcher. Every variant says what was being
//! done and, for process failures, shows the tail of the process's log.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "building the control plane with {script} failed ({status}); its progress is above. \
         Set CONTROL_PLANE_BIN_DIR to a directory with prebuilt etcd, kube-apiserver and kubectl to skip the build"
    )]
    Build { script: PathBuf, status: String },

    #[error("{binary} is missing; {hint}")]
    MissingBinary { binary: PathBuf, hint: String },

    #[error("generating certificates: {0}")]
    Pki(#[from] rcgen::Error),

    #[error("{process} exited while starting ({status}). Last lines of {}:\n{tail}", log.display())]
    Exited {
        process: &'static str,
        status: String,
        log: PathBuf,
        tail: String,
    },

    #[error(
        "timed out after {} s waiting for {what} (last probe: {last_probe}). Last lines of {}:\n{tail}",
        timeout.as_secs(), log.display()
    )]
    Timeout {
        what: String,
        timeout: Duration,
        last_probe: String,
        log: PathBuf,
        tail: String,
    },

    #[error(
        "gave up after {attempts} attempts: the chosen ports were taken by other processes each time"
    )]
    PortsExhausted { attempts: u32 },

    #[error("kubeconfig {}: {message}", path.display())]
    Kubeconfig { path: PathBuf, message: String },

    #[error("{} {message}", dir.display())]
    RunDir { dir: PathBuf, message: String },

    #[error("state file {}: {message}", path.display())]
    State { path: PathBuf, message: String },

    #[error("restarting kube-apiserver: {message}")]
    Restart { message: String },
}

impl Error {
    /// A process died because another one took its port between our probe
    /// and its bind (the race every "bind :0, release, reuse" scheme has).
    pub fn is_port_race(&self) -> bool {
        matches!(self, Error::Exited { tail, .. } if tail.contains("address already in use"))
    }
}

/// `.context(|| "what")` for io results, the one conversion used everywhere.
pub(crate) trait IoContext<T> {
    fn context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, Error>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, Error> {
        self.map_err(|source| Error::Io {
            what: what().into(),
            source,
        })
    }
}
