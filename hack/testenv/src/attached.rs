//! Control planes that die with the current process (tests).
//!
//! Three mechanisms, one per way a test binary can end:
//! - every child gets a parent-death signal (SIGKILL), which covers even a
//!   SIGKILLed test binary;
//! - on a normal exit (all tests done, failed or not) an exit hook kills and
//!   collects the children and removes their run directory, since Rust never
//!   drops statics;
//! - after a SIGKILL nothing of ours runs, so every new attached run first
//!   removes the directories of owners that are gone (etcd preallocates
//!   128 MB of WAL files; they must not pile up in /tmp).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext};
use crate::process::Supervised;
use crate::state::State;
use crate::sys::{self, ProcessId, Signal};

fn base_dir() -> PathBuf {
    std::env::temp_dir().join("crossplane-provider-proxmox-testenv")
}

/// A new, empty run directory owned by this process, named
/// `<pid>-<start time>-<sequence>` so a later sweep can tell whether the
/// owner still runs.
pub fn new_run_dir() -> Result<PathBuf, Error> {
    static SEQUENCE: AtomicU32 = AtomicU32::new(0);
    let base = base_dir();
    std::fs::create_dir_all(&base).context(|| format!("creating {}", base.display()))?;
    sweep_stale(&base);
    let me = ProcessId::current().ok_or_else(|| Error::RunDir {
        dir: base.clone(),
        message: "cannot identify the current process through /proc".into(),
    })?;
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let dir = base.join(format!("{}-{}-{sequence}", me.pid, me.start_time));
    crate::run_dir::create_marked(&dir)?;
    Ok(dir)
}

/// Removes the attached runs of owners that are gone, killing any process
/// of theirs that survived (the parent-death signal should have done that).
pub fn sweep_stale_runs() {
    sweep_stale(&base_dir());
}

fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let owner = entry.file_name().to_str().and_then(parse_owner);
        if owner.is_some_and(|owner| owner.is_alive()) {
            continue;
        }
        let dir = entry.path();
        if let Ok(Some(state)) = State::read(&dir) {
            let survivors = state.live_processes();
            for process in &survivors {
                let _ = process.signal(Signal::Kill);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while survivors.iter().any(ProcessId::is_alive) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
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

/// Running attached control planes: their directory and processes.
static RUNNING: Mutex<Vec<(PathBuf, Vec<Supervised>)>> = Mutex::new(Vec::new());

/// Takes ownership of a started control plane's processes so that they,
/// and `dir`, are gone when this process exits normally.
pub fn keep_until_exit(dir: &Path, processes: Vec<Supervised>) -> Result<(), Error> {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    // Registered first, so that a failure below still leaves them to `stop`.
    RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push((dir.to_owned(), processes));
    let mut result = Ok(());
    REGISTERED.call_once(|| result = sys::at_exit(stop_all_at_exit));
    result.context(|| "registering the exit hook")
}

/// Stops the control plane of `dir` now and removes the directory.
pub fn stop(dir: &Path) {
    let taken: Vec<_> = {
        let mut running = RUNNING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (stopping, keep) = running.drain(..).partition(|(d, _)| d == dir);
        *running = keep;
        stopping
    };
    for (dir, processes) in taken {
        kill_and_remove(&dir, processes);
    }
}

/// Takes the process `name` of the control plane of `dir` out of the
/// registry (to stop and replace it); `None` if there is none.
pub fn take(dir: &Path, name: &str) -> Option<Supervised> {
    let mut running = RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_, processes) = running.iter_mut().find(|(d, _)| d == dir)?;
    let index = processes.iter().position(|p| p.name == name)?;
    Some(processes.remove(index))
}

/// Registers `process` with the control plane of `dir` again (after
/// [`take`]); if that control plane was stopped meanwhile, the process is
/// killed instead.
pub fn put_back(dir: &Path, process: Supervised) {
    let mut running = RUNNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match running.iter_mut().find(|(d, _)| d == dir) {
        Some((_, processes)) => processes.push(process),
        None => process.kill(),
    }
}

fn kill_and_remove(dir: &Path, processes: Vec<Supervised>) {
    for process in processes {
        // Kills and collects the exit status: no zombie is left behind.
        process.kill();
    }
    let _ = std::fs::remove_dir_all(dir);
}

extern "C" fn stop_all_at_exit() {
    // Never block or panic at exit: if another thread holds the lock right
    // now, the parent-death signal and the next sweep clean up instead.
    let Ok(mut running) = RUNNING.try_lock() else {
        return;
    };
    for (dir, processes) in running.drain(..) {
        kill_and_remove(&dir, processes);
    }
}

/// PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not
/// the process. Test threads and tokio workers come and go, so every
/// attached child is forked by one thread that lives as long as the process
/// (it blocks on its queue forever; the sender is never dropped).
pub fn spawn(command: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: Mutex<Option<mpsc::Sender<Request>>> = Mutex::new(None);

    let spawner = {
        let mut slot = SPAWNER
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match slot.as_ref() {
            Some(sender) => sender.clone(),
            None => {
                let (sender, requests) = mpsc::channel::<Request>();
                std::thread::Builder::new()
                    .name("testenv-spawner".into())
                    .spawn(move || {
                        for (mut command, reply) in requests {
                            sys::die_with_spawning_thread(&mut command);
                            // The requester may have given up; nothing to do then.
                            let _ = reply.send(command.spawn());
                        }
                    })?;
                slot.insert(sender).clone()
            }
        }
    };
    let gone = || std::io::Error::other("the testenv spawner thread is gone");
    let (reply, response) = mpsc::channel();
    spawner.send((command, reply)).map_err(|_| gone())?;
    response.recv().map_err(|_| gone())?
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
}
