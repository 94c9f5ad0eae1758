//! Starting etcd and kube-apiserver so they die with their owner (attached)
//! or outlive it (detached), with output captured in a log file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::error::{Error, IoContext};
use crate::sys::{self, ProcessId, Signal};

/// How long the control plane lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// Dies with the current process, however it ends (tests).
    Attached,
    /// Outlives the current process; stopped by PID later (`testenv down`).
    Detached,
}

/// A started process whose output goes to `log`. It is killed when dropped
/// (a failed or interrupted start leaves nothing running) unless
/// [`release`](Self::release)d to run on by itself.
#[derive(Debug)]
pub struct Supervised {
    pub name: &'static str,
    pub log: PathBuf,
    pub id: ProcessId,
    child: Child,
    released: bool,
}

impl Supervised {
    pub fn spawn(
        name: &'static str,
        mut command: Command,
        log: PathBuf,
        lifetime: Lifetime,
    ) -> Result<Self, Error> {
        let out = std::fs::File::create(&log).context(|| format!("creating {}", log.display()))?;
        let err = out
            .try_clone()
            .context(|| format!("duplicating {}", log.display()))?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let program = command.get_program().to_owned();
        let child = match lifetime {
            Lifetime::Attached => crate::attached::spawn(command),
            Lifetime::Detached => {
                sys::detach(&mut command);
                command.spawn()
            }
        }
        .context(|| format!("starting {}", Path::new(&program).display()))?;
        let id = ProcessId::of(child.id()).unwrap_or(ProcessId {
            pid: child.id(),
            start_time: 0,
        });
        Ok(Self {
            name,
            log,
            id,
            child,
            released: false,
        })
    }

    /// `Err` with the log's tail if the process has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::Exited {
                process: self.name,
                status: status.to_string(),
                log: self.log.clone(),
                tail: log_tail(&self.log),
            }),
            Err(e) => Err(Error::Io {
                what: format!("checking on {}", self.name),
                source: e,
            }),
        }
    }

    /// Kills the process at once and collects it (data is thrown away anyway).
    pub fn kill(self) {
        drop(self);
    }

    /// Asks the process to stop (SIGTERM) and kills it if it has not after
    /// `grace`; collects it either way.
    pub async fn stop(mut self, grace: Duration) {
        // An error means it is gone already; dropping collects it.
        let _ = self.id.signal(Signal::Term);
        let deadline = tokio::time::Instant::now() + grace;
        while matches!(self.child.try_wait(), Ok(None)) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Lets the process run on after this handle is gone (detached mode).
    pub fn release(mut self) {
        self.released = true;
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if !self.released {
            // Errors mean it is already gone.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Asks `id` to stop (SIGTERM), then insists (SIGKILL) after `grace`.
/// Works for processes that are not our children (`testenv down`).
pub async fn terminate(id: ProcessId, grace: Duration) -> Result<(), Error> {
    id.signal(Signal::Term)
        .context(|| format!("sending SIGTERM to {}", id.pid))?;
    if !wait_until(grace, || !id.is_alive()).await {
        id.signal(Signal::Kill)
            .context(|| format!("sending SIGKILL to {}", id.pid))?;
        if !wait_until(Duration::from_secs(10), || !id.is_alive()).await {
            return Err(Error::Io {
                what: format!("stopping process {}", id.pid),
                source: std::io::Error::other("still running 10 s after SIGKILL"),
            });
        }
    }
    // A detached process's parent is init, which collects the exit status a
    // moment later; wait for that so `pgrep` right after `down` is empty.
    // An init that never reaps leaves a harmless zombie; not an error.
    wait_until(Duration::from_secs(5), || id.is_reaped()).await;
    Ok(())
}

async fn wait_until(within: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while !done() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// The last lines of a log file, for error messages.
pub fn log_tail(log: &Path) -> String {
    const LINES: usize = 40;
    match std::fs::read(log) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LINES)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", log.display()),
    }
}
