//! The deploy suite's helpers: the tools of `hack/tools/`, running commands
//! the way a user would, and the cluster steps every manifest test starts
//! with.
//!
//! Tools are made available by `hack/tools/ensure.sh` (built from pinned Go
//! modules or installed from Debian packages, cached outside the
//! repository); a test that cannot get one fails with the command to run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

use serde_json::Value;

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Path of a tool of `hack/tools/ensure.sh` (`helm`, `dockerfile-lint`,
/// `argocd-lua`, `servicemonitor-crd`, `lua`, `shellcheck`), built or
/// installed on first use.
pub fn tool(name: &str) -> PathBuf {
    // One ensure at a time per process: they would only wait on each other's
    // lock file anyway, and the output stays readable.
    static ENSURE: Mutex<()> = Mutex::new(());
    let _one = ENSURE.lock().unwrap_or_else(|p| p.into_inner());
    let script = repo().join("hack/tools/ensure.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(name)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or_default().trim();
    assert!(
        out.status.success() && !path.is_empty(),
        "`hack/tools/ensure.sh {name}` failed; run it by hand to see why:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(path)
}

/// Runs `command` (stdin closed) and returns what it printed.
pub fn run(command: &mut Command) -> Output {
    command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"))
}

/// Runs `command` with `input` on its stdin.
pub fn run_with_input(command: &mut Command, input: &str) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin was piped");
    stdin
        .write_all(input.as_bytes())
        .unwrap_or_else(|e| panic!("writing the stdin of {command:?}: {e}"));
    drop(stdin);
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for {command:?}: {e}"))
}

/// Runs `command`, which must succeed; returns its stdout.
pub fn run_ok(command: &mut Command) -> String {
    let out = run(command);
    assert!(
        out.status.success(),
        "{command:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `helm <args>` with the pinned Helm, in the repository root.
pub fn helm(args: &[&str]) -> Output {
    run(Command::new(tool("helm")).args(args).current_dir(repo()))
}

/// The chart of `deploy/helm/`.
pub const CHART: &str = "deploy/helm/crossplane-provider-proxmox";

/// `helm template` of the chart as release `crossplane-provider-proxmox`
/// in `crossplane-system` (CRDs included) with extra arguments; must succeed.
pub fn helm_template(kube_version: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "template",
        "crossplane-provider-proxmox",
        CHART,
        "--namespace",
        "crossplane-system",
        "--include-crds",
        "--kube-version",
        kube_version,
    ];
    args.extend(extra);
    let out = helm(&args);
    assert!(
        out.status.success(),
        "helm {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// A file of the repository, as text.
pub fn read(relative: &str) -> String {
    let path = repo().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The documents of a YAML stream (empty documents dropped).
pub fn yaml_docs(text: &str, origin: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .unwrap_or_else(|e| panic!("parsing YAML of {origin}: {e}"));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The one document of `docs` with this kind and name.
pub fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {kind} {name}, found {}",
        found.len()
    );
    found[0]
}

/// `kind/name` of every document, sorted.
pub fn kinds_and_names(docs: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = docs
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap_or("?"),
                d["metadata"]["name"].as_str().unwrap_or("?")
            )
        })
        .collect();
    names.sort();
    names
}

const TEMP_PREFIX: &str = "crossplane-provider-proxmox-deploy-tests-";

/// This process's temporary directory. The first call removes those of
/// earlier test processes that are gone (a test binary cannot clean up
/// after itself at exit).
fn temp_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let root = std::env::temp_dir();
        if let Ok(entries) = std::fs::read_dir(&root) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let pid = name.to_str().and_then(|n| n.strip_prefix(TEMP_PREFIX));
                if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        let dir = root.join(format!("{TEMP_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        dir
    })
}

/// Writes `contents` to a fresh temporary file whose name ends in `suffix`.
pub fn temp_file(suffix: &str, contents: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let dir = temp_dir();
    let path = dir.join(format!(
        "{}{suffix}",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, contents).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

/// The Secret YAML `scripts/pve-sim-tls.sh <args>` prints (openssl ensured).
pub fn pve_sim_tls(args: &[&str]) -> String {
    tool("openssl");
    run_ok(Command::new(repo().join("scripts/pve-sim-tls.sh")).args(args))
}

/// CRDs installed and namespace crossplane-system present (deploy/ puts
/// everything namespaced there; a dry run cannot create it first).
pub async fn prerequisites() {
    crate::support::install_crds(repo().join("crds")).await;
    crate::support::apply_path(repo().join("deploy/provider/namespace.yaml"), None).await;
}

/// `kubectl kustomize <dir>` (the kustomize of `kubectl apply -k`).
pub async fn kustomize(dir: &str) -> String {
    crate::support::kubectl_ok(&["kustomize", &repo().join(dir).display().to_string()]).await
}

/// The ProxmoxVMs of a namespace as untyped objects, so a test can write
/// any spec or status.
pub fn proxmoxvms(namespace: &str) -> kube::Api<kube::api::DynamicObject> {
    let resource = kube::api::ApiResource::erase::<provider_proxmox::api::ProxmoxVM>(&());
    kube::Api::namespaced_with(crate::support::client(), namespace, &resource)
}

/// `kubectl wait --for=<condition> <target>` in a namespace, e.g.
/// `condition=Ready` on `proxmoxvm/vm-100`.
pub async fn kubectl_wait(
    namespace: &str,
    target: &str,
    condition: &str,
    timeout: &str,
) -> crate::support::KubectlOutput {
    crate::support::kubectl(&[
        "wait",
        "--namespace",
        namespace,
        &format!("--for={condition}"),
        target,
        &format!("--timeout={timeout}"),
    ])
    .await
}

/// The API server's version without the `v`, for `helm --kube-version`.
pub async fn server_version() -> String {
    let info = crate::support::client().apiserver_version().await.unwrap();
    info.git_version.trim_start_matches('v').to_owned()
}
