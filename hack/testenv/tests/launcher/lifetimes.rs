//! The launcher's promises about process lifetimes, checked with real
//! etcd and kube-apiserver processes: nothing outlives an attached owner
//! however it ends, and a detached control plane runs until stopped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testenv::{ControlPlane, Options, ProcessId, Status};

/// Waits (generously) until none of `processes` runs any more.
fn assert_all_gone(processes: &[ProcessId], context: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes.iter().any(ProcessId::is_alive) {
        assert!(
            Instant::now() < deadline,
            "{context}: still running: {processes:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn identify(pids: &[u32]) -> Vec<ProcessId> {
    pids.iter()
        .map(|&pid| ProcessId::of(pid).unwrap_or_else(|| panic!("process {pid} is not running")))
        .collect()
}

struct Owner {
    child: std::process::Child,
    dir: PathBuf,
    processes: Vec<ProcessId>,
}

/// Starts `testenv hold` (exiting at once when `exit`, else waiting to be
/// killed) and reads which control plane it started.
fn run_owner(exit: bool) -> Owner {
    let mut args = vec!["hold"];
    if exit {
        args.push("--exit");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_testenv"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(report) = line.strip_prefix("OWNER ") {
            let mut fields = report.split(' ');
            let dir = PathBuf::from(fields.next().unwrap());
            let pids: Vec<u32> = fields.map(|p| p.parse().unwrap()).collect();
            assert_eq!(pids.len(), 2, "{line}");
            let processes = identify(&pids);
            return Owner {
                child,
                dir,
                processes,
            };
        }
    }
    panic!(
        "the owner process ended without starting a control plane: {:?}",
        child.wait()
    );
}

#[test]
fn owner_killed_with_sigkill_leaves_no_process_and_the_next_run_sweeps_its_dir() {
    let mut owner = run_owner(false);
    assert!(owner.processes.iter().all(ProcessId::is_alive));
    owner.child.kill().unwrap(); // SIGKILL: no exit hook, no destructor runs
    owner.child.wait().unwrap();
    assert_all_gone(&owner.processes, "after SIGKILL of the owner");
    // Nothing could remove the directory; the next attached start does.
    assert!(owner.dir.exists());
    testenv::sweep_stale_runs();
    assert!(
        !owner.dir.exists(),
        "{} survived the sweep",
        owner.dir.display()
    );
}

#[test]
fn owner_exiting_normally_stops_its_processes_and_removes_its_dir() {
    let mut owner = run_owner(true);
    let status = owner.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert_all_gone(&owner.processes, "after a normal exit of the owner");
    assert!(
        !owner.dir.exists(),
        "{} was left behind",
        owner.dir.display()
    );
}

#[tokio::test]
async fn dropping_an_attached_control_plane_stops_it() {
    let plane = ControlPlane::start(Options::attached()).await.unwrap();
    let processes = identify(&plane.pids());
    let dir = plane.dir().to_owned();
    drop(plane);
    assert_all_gone(&processes, "after drop");
    assert!(!dir.exists());
}

#[tokio::test]
async fn a_detached_control_plane_runs_until_stopped() {
    let dir = std::env::temp_dir().join(format!("testenv-detached-{}", std::process::id()));
    let plane = ControlPlane::start(Options::detached(dir.clone()))
        .await
        .unwrap();
    let processes = identify(&plane.pids());
    let _cleanup = KillOnDrop(processes.clone(), dir.clone());
    let kubeconfig = plane.kubeconfig_path().to_owned();
    drop(plane);

    // Still serving after its handle is gone.
    assert!(processes.iter().all(ProcessId::is_alive));
    match testenv::status(&dir).unwrap() {
        Status::Up {
            kubeconfig: reported,
            ..
        } => assert_eq!(reported, kubeconfig),
        other => panic!("expected Up, got {other:?}"),
    }
    let config = testenv::kubeconfig::load(&kubeconfig).await.unwrap();
    let client = kube::Client::try_from(config).unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client)
        .get("default")
        .await
        .unwrap();

    // A second start in the same directory is refused while it runs.
    let again = ControlPlane::start(Options::detached(dir.clone())).await;
    assert!(
        again.is_err(),
        "a second control plane started in {}",
        dir.display()
    );

    assert_eq!(testenv::stop_detached(&dir).await.unwrap(), 2);
    assert_all_gone(&processes, "after stop_detached");
    assert!(!Path::new(&dir).exists());
    assert!(matches!(testenv::status(&dir).unwrap(), Status::Down));
}

/// Detached processes outlive a failed test; this stops them anyway.
struct KillOnDrop(Vec<ProcessId>, PathBuf);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for process in &self.0 {
            let _ = process.signal(testenv::Signal::Kill);
        }
        let _ = std::fs::remove_dir_all(&self.1);
    }
}
