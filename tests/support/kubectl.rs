//! Running the real kubectl against the test cluster as the admin, for
//! checks that should look exactly like what a user would type.

use std::path::Path;
use std::process::Stdio;

use tokio::io::AsyncWriteExt;

use super::cluster::cluster;

/// What kubectl printed and whether it succeeded.
#[derive(Debug)]
pub struct KubectlOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `kubectl <args>` with the admin kubeconfig, feeding `stdin` if given.
pub async fn kubectl_with_stdin(args: &[&str], stdin: Option<&str>) -> KubectlOutput {
    run(&cluster().kubeconfig, args, stdin).await
}

/// Runs `kubectl <args>` as the user of `kubeconfig` (e.g. a ServiceAccount's).
pub async fn kubectl_as(kubeconfig: &Path, args: &[&str]) -> KubectlOutput {
    run(kubeconfig, args, None).await
}

async fn run(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> KubectlOutput {
    let cluster = cluster();
    let mut child = tokio::process::Command::new(&cluster.kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "running {} (is kubectl installed?): {e}",
                cluster.kubectl.display()
            )
        });
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin was piped");
        pipe.write_all(input.as_bytes())
            .await
            .expect("writing kubectl's stdin");
        drop(pipe);
    }
    let output = child.wait_with_output().await.expect("waiting for kubectl");
    KubectlOutput {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `kubectl <args>` with the admin kubeconfig.
pub async fn kubectl(args: &[&str]) -> KubectlOutput {
    kubectl_with_stdin(args, None).await
}

/// Runs `kubectl <args>`; panics with its stderr unless it succeeds.
pub async fn kubectl_ok(args: &[&str]) -> String {
    let out = kubectl(args).await;
    assert!(
        out.success,
        "kubectl {} failed:\n{}",
        args.join(" "),
        out.stderr
    );
    out.stdout
}

/// A manifest given as a file (or directory) or as YAML text.
#[derive(Debug, Clone, Copy)]
pub enum Manifest<'a> {
    Path(&'a Path),
    Yaml(&'a str),
}

impl<'a> From<&'a Path> for Manifest<'a> {
    fn from(path: &'a Path) -> Self {
        Manifest::Path(path)
    }
}

impl<'a> From<&'a str> for Manifest<'a> {
    fn from(yaml: &'a str) -> Self {
        Manifest::Yaml(yaml)
    }
}

/// `kubectl apply --dry-run=server`, as a user would type it (client-side
/// apply, so messages are the familiar `spec.x: Invalid value: ...`): the
/// server runs defaulting, schema and CEL validation (transition rules too,
/// against the stored object) and admission, and stores nothing.
/// `namespace` applies to namespaced objects that name none.
pub async fn apply_dry_run(manifest: Manifest<'_>, namespace: Option<&str>) -> KubectlOutput {
    let mut args = vec!["apply", "--dry-run=server"];
    if let Some(ns) = namespace {
        args.extend(["--namespace", ns]);
    }
    let path;
    match manifest {
        Manifest::Path(p) => {
            path = p.display().to_string();
            args.extend(["-f", &path]);
            kubectl(&args).await
        }
        Manifest::Yaml(yaml) => {
            args.extend(["-f", "-"]);
            kubectl_with_stdin(&args, Some(yaml)).await
        }
    }
}

/// Server-side dry-run apply that must be accepted; returns kubectl's output.
pub async fn apply_dry_run_server<'a>(
    manifest: impl Into<Manifest<'a>>,
    namespace: Option<&str>,
) -> String {
    dry_run_expecting(manifest.into(), namespace, true)
        .await
        .stdout
}

/// Server-side dry-run apply that must be rejected; returns the server's
/// message (kubectl's stderr) for the test to assert on.
pub async fn apply_expect_rejected<'a>(
    manifest: impl Into<Manifest<'a>>,
    namespace: Option<&str>,
) -> String {
    dry_run_expecting(manifest.into(), namespace, false)
        .await
        .stderr
}

async fn dry_run_expecting(
    manifest: Manifest<'_>,
    namespace: Option<&str>,
    accepted: bool,
) -> KubectlOutput {
    let out = apply_dry_run(manifest, namespace).await;
    let verdict = if out.success { "accepted" } else { "rejected" };
    assert_eq!(
        out.success, accepted,
        "the server {verdict} {manifest:?}:\n{}{}",
        out.stdout, out.stderr
    );
    out
}
