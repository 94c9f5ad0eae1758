//! Run directories: where certificates, etcd's data, logs, the kubeconfig
//! and `state.json` of one control plane live.
//!
//! Attached runs (tests) get a fresh directory under the system temp dir,
//! named after the owning process. Nothing runs when a test binary is
//! SIGKILLed, so each new attached run first removes the directories of
//! owners that are gone; otherwise etcd's preallocated WAL files would pile
//! up in /tmp. A normal exit cleans up through an exit hook.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext};
use crate::state::State;
use crate::sys::{self, ProcessId, Signal};

/// Marks a directory as made by testenv: only such directories are ever
/// reused or deleted, so a mistyped `--dir` cannot wipe someone's files.
const MARKER: &str = ".testenv-run";

fn attached_base() -> PathBuf {
    std::env::temp_dir().join("crossplane-provider-proxmox-testenv")
}

/// A new, empty directory for a control plane attached to this process.
pub fn new_attached() -> Result<PathBuf, Error> {
    static SEQUENCE: AtomicU32 = AtomicU32::new(0);
    let base = attached_base();
    std::fs::create_dir_all(&base).context(|| format!("creating {}", base.display()))?;
    sweep_stale(&base);
    let me = ProcessId::current().ok_or_else(|| Error::RunDir {
        dir: base.clone(),
        message: "cannot identify the current process through /proc".into(),
    })?;
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let dir = base.join(format!("{}-{}-{sequence}", me.pid, me.start_time));
    create_marked(&dir)?;
    Ok(dir)
}

/// Makes `dir` ready for a detached control plane: creates it, or clears a
/// previous run's leftovers. Refuses while that run is still up.
pub fn prepare_detached(dir: &Path) -> Result<(), Error> {
    if dir.join(MARKER).exists() {
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
        remove(dir)?;
    } else if is_non_empty(dir) {
        return Err(Error::RunDir {
            dir: dir.to_owned(),
            message: "is not empty and was not created by testenv; refusing to use it".into(),
        });
    }
    create_marked(dir)
}

/// Deletes a run directory, but only one testenv created.
pub fn remove(dir: &Path) -> Result<(), Error> {
    if !dir.exists() {
        return Ok(());
    }
    if !dir.join(MARKER).exists() {
        return Err(Error::RunDir {
            dir: dir.to_owned(),
            message: "was not created by testenv; not deleting it".into(),
        });
    }
    std::fs::remove_dir_all(dir).context(|| format!("removing {}", dir.display()))
}

fn create_marked(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).context(|| format!("creating {}", dir.display()))?;
    crate::pki::write_file(&dir.join(MARKER), "", 0o644)
}

fn is_non_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

/// Removes attached runs whose owner is gone, killing any process of theirs
/// that somehow survived (the parent-death signal should have done that).
fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let owner = entry.file_name().to_str().and_then(parse_owner);
        if owner.is_some_and(|owner| owner.is_alive()) {
            continue;
        }
        if let Ok(Some(state)) = State::read(&dir) {
            kill_and_wait(&state.live_processes());
        }
        // Best effort: a failure here is retried by the next sweep.
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `<pid>-<start time>-<sequence>`
fn parse_owner(name: &str) -> Option<ProcessId> {
    let mut parts = name.split('-');
    let pid = parts.next()?.parse().ok()?;
    let start_time = parts.next()?.parse().ok()?;
    Some(ProcessId { pid, start_time })
}

fn kill_and_wait(processes: &[ProcessId]) {
    for process in processes {
        let _ = process.signal(Signal::Kill);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while processes.iter().any(ProcessId::is_alive) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Attached runs to clean up when the process exits normally.
static AT_EXIT: Mutex<Vec<(PathBuf, Vec<ProcessId>)>> = Mutex::new(Vec::new());

/// Makes sure `dir` and `processes` are gone when this process exits
/// normally. (An abnormal end is covered by the parent-death signal for the
/// processes and by [`sweep_stale`] for the directory.)
pub fn clean_up_at_exit(dir: &Path, processes: Vec<ProcessId>) -> Result<(), Error> {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    let mut result = Ok(());
    REGISTERED.call_once(|| result = sys::at_exit(run_exit_cleanup));
    result.context(|| "registering the exit hook")?;
    AT_EXIT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push((dir.to_owned(), processes));
    Ok(())
}

/// Forgets an attached run that was stopped explicitly.
pub fn forget_at_exit(dir: &Path) {
    AT_EXIT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .retain(|(registered, _)| registered != dir);
}

extern "C" fn run_exit_cleanup() {
    // Never block or panic at exit: if another thread holds the lock right
    // now, the sweep of the next run will clean up instead.
    let Ok(mut runs) = AT_EXIT.try_lock() else {
        return;
    };
    for (dir, processes) in runs.drain(..) {
        kill_and_wait(&processes);
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_is_parsed_from_the_directory_name() {
        assert_eq!(
            parse_owner("123-456-7"),
            Some(ProcessId {
                pid: 123,
                start_time: 456
            })
        );
        assert_eq!(parse_owner("not-a-run"), None);
    }

    #[test]
    fn refuses_foreign_non_empty_directories() {
        let dir = std::env::temp_dir().join(format!("testenv-foreign-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("precious.txt"), "keep me").unwrap();
        let prepared = prepare_detached(&dir);
        let removed = remove(&dir);
        let survived = dir.join("precious.txt").exists();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(prepared.is_err(), "prepare_detached accepted a foreign dir");
        assert!(removed.is_err(), "remove deleted a foreign dir");
        assert!(survived);
    }
}
