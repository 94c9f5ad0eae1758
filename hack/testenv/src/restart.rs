//! Restarting kube-apiserver in place: same port, flags and certificates,
//! etcd (and so every object) kept. To clients this looks like a control
//! plane upgrade or a crashed apiserver coming back: connections drop,
//! requests fail for a few seconds, watches must be re-established.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Error;
use crate::process::{Lifetime, Supervised};
use crate::state::State;
use crate::{attached, readiness};

/// The process name under which the apiserver is supervised.
pub const APISERVER: &str = "kube-apiserver";

/// How long a stopping apiserver may take before it is killed. Without
/// clients it stops in about a second; with watches open it can take far
/// longer, which tests need not wait for.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The apiserver's command line, kept to start it again identically
/// (`std::process::Command` cannot be cloned).
#[derive(Debug, Clone)]
pub struct ApiserverLaunch {
    program: PathBuf,
    args: Vec<OsString>,
}

impl ApiserverLaunch {
    pub fn of(command: &Command) -> Self {
        Self {
            program: PathBuf::from(command.get_program()),
            args: command.get_args().map(ToOwned::to_owned).collect(),
        }
    }

    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        command
    }
}

/// What a restart needs to know about the control plane.
pub struct Target<'a> {
    pub dir: &'a Path,
    pub server: &'a str,
    pub ca_cert_pem: &'a str,
    pub launch: &'a ApiserverLaunch,
    pub timeout: Duration,
    /// Numbers the new log file (`kube-apiserver-restart-N.log`), so the
    /// logs of earlier runs stay readable.
    pub number: u32,
}

/// Stops the attached apiserver of `target.dir` (SIGTERM, SIGKILL after a
/// grace period) and starts it again; returns the new process's PID once
/// `/readyz` answers `ok`. The new process is registered like the first, so
/// it dies with the current process too.
pub async fn restart_apiserver(target: Target<'_>) -> Result<u32, Error> {
    let old = attached::take(target.dir, APISERVER).ok_or_else(|| Error::Restart {
        message: "no running kube-apiserver is registered for this control plane".into(),
    })?;
    old.stop(STOP_GRACE).await;

    let log = target
        .dir
        .join(format!("{APISERVER}-restart-{}.log", target.number));
    let mut apiserver = Supervised::spawn(
        APISERVER,
        target.launch.command(),
        log.clone(),
        Lifetime::Attached,
    )?;
    let http = readiness::http_client(target.ca_cert_pem).map_err(|message| Error::Restart {
        message: format!("building the readiness HTTP client: {message}"),
    })?;
    readiness::wait_for(
        "kube-apiserver /readyz after a restart",
        Instant::now() + target.timeout,
        target.timeout,
        &mut [&mut apiserver],
        &log,
        || readiness::apiserver_ready(&http, target.server),
    )
    .await?;

    let pid = apiserver.id.pid;
    if let Some(mut state) = State::read(target.dir)? {
        state.apiserver = apiserver.id;
        state.write(target.dir)?;
    }
    attached::put_back(target.dir, apiserver);
    Ok(pid)
}
