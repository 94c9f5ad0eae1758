//! `make demo` (`hack/demo.sh`) ends with Ctrl-C: that is a teardown, not
//! an error. Each test runs the whole demo (its own control plane, pve-sim
//! at 1/20 of real time, the provider, examples/vm-100.yaml), waits until
//! it says the VM is Ready and how to keep using it, interrupts it as a
//! terminal would, and checks that it exits 0 without an error and leaves
//! none of the processes it started behind.
//!
//! The terminal sends SIGINT to its whole foreground process group, so two
//! tests start the script as the leader of a process group of its own and
//! signal that group (once with SIGINT at its default, once ignored from
//! the start, as in a background job of a script); the third runs `make
//! demo` on a pseudo-terminal (util-linux `script`) and types Ctrl-C, which
//! is where make itself gets the signal too.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testenv::{ProcessId, Signal};

use crate::support::poll;
use crate::tools::{repo, temp_file};

/// What the demo prints once the VM is Ready and it waits for Ctrl-C.
const WAITING: &str = "Press Ctrl-C to tear everything down.";

/// Output of a child, collected by a thread as it comes.
#[derive(Clone, Default)]
struct Collected(Arc<Mutex<Vec<u8>>>);

impl Collected {
    fn drain(&self, mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<()> {
        let into = self.0.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = from.read(&mut buf) {
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A running demo. Dropping it kills whatever it started that is still
/// there, so a failed test leaves nothing running either.
struct Demo {
    child: Child,
    dir: PathBuf,
    stdout: Collected,
    stderr: Collected,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Demo {
    /// Starts `command` (the script, or something that runs it) with the
    /// demo's options: a fresh DEMO_DIR, free loopback ports, time scale 0.05.
    fn start(mut command: Command) -> Self {
        let dir = temp_file(".demo", "").with_extension("dir");
        command
            .current_dir(repo())
            .env("DEMO_DIR", &dir)
            .env("DEMO_SIM_FLAGS", "--time-scale 0.05")
            .env("DEMO_SIM_LISTEN", "127.0.0.1:0")
            .env("DEMO_METRICS_ADDR", "127.0.0.1:0")
            .env_remove("DEMO_USE_CURRENT_CLUSTER")
            .env_remove("DEMO_EXIT_WHEN_READY")
            .env_remove("DEMO_MANIFEST")
            .env_remove("DEMO_OWN_GROUP")
            .env_remove("DEMO_SIGINT_RESET")
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("starting the demo");
        let (stdout, stderr) = (Collected::default(), Collected::default());
        let readers = vec![
            stdout.drain(child.stdout.take().unwrap()),
            stderr.drain(child.stderr.take().unwrap()),
        ];
        Self {
            child,
            dir,
            stdout,
            stderr,
            readers,
        }
    }

    fn output(&self) -> String {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            self.stdout.text(),
            self.stderr.text()
        )
    }

    /// Waits (builds included: the first run may compile the workspace)
    /// until the demo's VM is Ready and it waits for Ctrl-C.
    async fn wait_until_waiting(&mut self) {
        poll(
            "the demo's VM to be Ready",
            Duration::from_secs(900),
            || {
                let exited = self.child.try_wait().unwrap();
                let output = self.output();
                async move {
                    if let Some(status) = exited {
                        panic!("the demo ended ({status}) before its VM was Ready:\n{output}");
                    }
                    if output.contains(WAITING) {
                        Ok(())
                    } else {
                        Err("not yet".to_owned())
                    }
                }
            },
        )
        .await;
    }

    /// proxmox-provider, pve-sim, etcd and kube-apiserver of this demo,
    /// each asserted to run now.
    fn started_processes(&self) -> Vec<(String, ProcessId)> {
        let mut found = vec![];
        for name in ["proxmox-provider", "pve-sim"] {
            let ids = self.processes(|argv| {
                argv.first()
                    .is_some_and(|a| a.ends_with(&format!("/{name}")))
            });
            assert_eq!(ids.len(), 1, "one {name} of this demo runs: {ids:?}");
            found.push((name.to_owned(), ids[0]));
        }
        let plane = self.control_plane();
        assert_eq!(
            plane.len(),
            2,
            "the demo's control plane names etcd and kube-apiserver in its state.json"
        );
        found.extend(plane);
        for (name, id) in &found {
            assert!(id.is_alive(), "{name} ({}) runs before Ctrl-C", id.pid);
        }
        found
    }

    /// etcd and kube-apiserver of the demo's control plane, from the
    /// state.json of its directory (none before it starts or after it is
    /// removed).
    fn control_plane(&self) -> Vec<(String, ProcessId)> {
        let state = std::fs::read_to_string(self.dir.join("cluster/state.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .unwrap_or_default();
        ["etcd", "apiserver"]
            .into_iter()
            .filter_map(|name| {
                let id = serde_json::from_value(state[name].clone()).ok()?;
                Some((name.to_owned(), id))
            })
            .collect()
    }

    /// Running processes whose command line (or environment, for those the
    /// scripts started) names this demo's directory and that `matches`.
    fn processes(&self, matches: impl Fn(&[String]) -> bool) -> Vec<ProcessId> {
        let dir = self.dir.display().to_string();
        let mut ids = vec![];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
                continue;
            };
            let read = |file: &str| std::fs::read(entry.path().join(file)).unwrap_or_default();
            let argv: Vec<String> = String::from_utf8_lossy(&read("cmdline"))
                .split('\0')
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect();
            let environ = String::from_utf8_lossy(&read("environ")).into_owned();
            let ours = argv.iter().any(|a| a.contains(&dir))
                || environ.split('\0').any(|v| v == format!("DEMO_DIR={dir}"));
            if ours && matches(&argv) {
                ids.extend(ProcessId::of(pid).filter(ProcessId::is_alive));
            }
        }
        ids
    }

    /// Waits for the demo to end, then for its output to be read.
    async fn wait_for_exit(&mut self) -> (ExitStatus, String) {
        let status = poll(
            "the demo to end after Ctrl-C",
            Duration::from_secs(180),
            || {
                let exited = self.child.try_wait().unwrap();
                async move { exited.ok_or_else(|| "still running".to_owned()) }
            },
        )
        .await;
        for reader in self.readers.drain(..) {
            reader.join().unwrap();
        }
        (status, self.output())
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let plane = self.control_plane().into_iter().map(|(_, id)| id);
        for id in self.processes(|_| true).into_iter().chain(plane) {
            let _ = id.signal(Signal::Kill);
        }
    }
}

/// After the demo ended: a clean exit, the teardown announced, no error,
/// and none of `started` left (zombies count as gone).
async fn assert_torn_down(
    status: ExitStatus,
    output: &str,
    started: &[(String, ProcessId)],
    dir: &Path,
) {
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after Ctrl-C:\n{output}"
    );
    assert!(!output.contains("demo: error"), "{output}");
    assert!(!output.contains("make: ***"), "{output}");
    assert!(
        output.contains("interrupted; tearing down"),
        "the demo took Ctrl-C as its end:\n{output}"
    );
    poll(
        "the demo's processes to be gone",
        Duration::from_secs(60),
        || {
            let left: Vec<String> = started
                .iter()
                .filter(|(_, id)| id.is_alive())
                .map(|(name, id)| format!("{name} ({})", id.pid))
                .collect();
            async move {
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(format!("still running: {}", left.join(", ")))
                }
            }
        },
    )
    .await;
    assert!(
        !dir.join("cluster").exists(),
        "testenv down removed the control plane's directory"
    );
}

/// Runs the demo as the leader of its own process group (`bash -c SETUP;
/// exec bash hack/demo.sh`), then does what the terminal does on Ctrl-C:
/// SIGINT to every process of that group.
async fn interrupt_its_process_group(setup: &str) {
    let mut command = Command::new("bash");
    command
        .args(["-c", &format!("{setup}\nexec bash \"$0\""), "hack/demo.sh"])
        .stdin(Stdio::null())
        .process_group(0);
    let mut demo = Demo::start(command);
    demo.wait_until_waiting().await;
    let started = demo.started_processes();

    let group = demo.child.id().to_string();
    let sent = Command::new("bash")
        .args(["-c", "kill -INT -- \"-$1\"", "kill", &group])
        .status()
        .unwrap();
    assert!(sent.success(), "SIGINT sent to process group {group}");

    let (status, output) = demo.wait_for_exit().await;
    let dir = demo.dir.clone();
    assert_torn_down(status, &output, &started, &dir).await;
}

#[tokio::test]
async fn sigint_to_the_demos_process_group_tears_it_down_and_exits_0() {
    interrupt_its_process_group(":").await;
}

/// A background job of a script, and some harnesses, start with SIGINT
/// ignored; bash cannot trap it then, while the provider and pve-sim, which
/// install their own handlers, would stop on it. A SIGINT to the group must
/// still be a teardown, not "stopped unexpectedly".
#[tokio::test]
async fn sigint_to_the_demos_process_group_is_a_teardown_even_when_started_ignoring_it() {
    interrupt_its_process_group("trap '' INT").await;
}

/// `make demo` on a terminal: Ctrl-C typed there must not make make report
/// an interrupt either (GNU make, when it gets the SIGINT itself, kills
/// itself with it after the recipe, however the recipe ended).
#[tokio::test]
async fn ctrl_c_on_a_terminal_ends_make_demo_with_exit_0() {
    let mut command = Command::new("script");
    // -e: script's exit status is make's; the pty merges stdout and stderr.
    command
        .args(["--quiet", "--return", "--command", "make demo", "/dev/null"])
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .stdin(Stdio::piped())
        .process_group(0);
    let mut demo = Demo::start(command);
    let mut terminal = demo.child.stdin.take().expect("script's input");
    demo.wait_until_waiting().await;
    let started = demo.started_processes();

    terminal.write_all(b"\x03").unwrap();
    terminal.flush().unwrap();

    let (status, output) = demo.wait_for_exit().await;
    drop(terminal);
    let dir = demo.dir.clone();
    assert_torn_down(status, &output, &started, &dir).await;
}
