//! Control planes that outlive the launcher (`testenv up`): their
//! directory is prepared, inspected and stopped through `state.json`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Error;
use crate::run_dir;
use crate::state::State;

/// Makes `dir` ready for a detached control plane: creates it, or clears a
/// previous run's leftovers. Refuses while that run is still up.
pub fn prepare(dir: &Path) -> Result<(), Error> {
    if run_dir::is_marked(dir) {
        if let Some(state) = State::read(dir)? {
            let live = state.live_processes();
            if !live.is_empty() {
                let pids: Vec<String> = live.iter().map(|p| p.pid.to_string()).collect();
                return Err(Error::RunDir {
                    dir: dir.to_owned(),
                    message: format!(
                        "already has a running control plane (pids {}); run `testenv down` first",
                        pids.join(", ")
                    ),
                });
            }
        }
        run_dir::remove(dir)?;
    } else if run_dir::is_non_empty(dir) {
        return Err(Error::RunDir {
            dir: dir.to_owned(),
            message: "is not empty and was not created by testenv; refusing to use it".into(),
        });
    }
    run_dir::create_marked(dir)
}

/// What `testenv status` reports.
#[derive(Debug)]
pub enum Status {
    /// All its processes run.
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
        n if n == state.processes().len() => Status::Up {
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
pub async fn stop(dir: &Path) -> Result<usize, Error> {
    let mut stopped = 0;
    if let Some(state) = State::read(dir)? {
        for process in state.live_processes() {
            crate::process::terminate(process, Duration::from_secs(15)).await?;
            stopped += 1;
        }
    }
    run_dir::remove(dir)?;
    Ok(stopped)
}
