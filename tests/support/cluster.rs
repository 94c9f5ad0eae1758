//! The one cluster of a test binary: a testenv control plane started on
//! first use, or the cluster of `$KUBECONFIG` with `USE_EXISTING_CLUSTER=1`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use testenv::{AuditPolicy, ControlPlane, Options};

/// Set to `1` (or `true`) to run against `$KUBECONFIG` instead of starting
/// a control plane (e.g. kind in a user's CI).
pub const USE_EXISTING_CLUSTER: &str = "USE_EXISTING_CLUSTER";

/// The shared cluster. It holds only configuration: every `#[tokio::test]`
/// has its own runtime, and a `kube::Client` dies with the runtime that
/// built it, so [`client`] builds a new one per call.
pub struct Cluster {
    /// The admin's kube-rs configuration.
    pub config: kube::Config,
    /// The admin kubeconfig file (for kubectl and for derived kubeconfigs).
    pub kubeconfig: PathBuf,
    /// kubectl matching the apiserver's version when testenv runs it;
    /// `$KUBECTL` or `kubectl` from PATH for an existing cluster.
    pub kubectl: PathBuf,
    /// Where tests may write files (ServiceAccount kubeconfigs, ...).
    pub scratch: PathBuf,
    /// The apiserver's audit log: one line per request of any
    /// ServiceAccount (`Metadata` level, on arrival), so a test that runs
    /// the provider under one can list every call it made. `None` for an
    /// existing cluster.
    pub audit_log: Option<PathBuf>,
    /// `None` for an existing cluster. Kept alive for the whole process:
    /// statics are never dropped, testenv's exit hook and the processes'
    /// parent-death signal stop it when the test binary ends.
    pub control_plane: Option<ControlPlane>,
}

impl Cluster {
    /// Whether this is the testenv control plane (admin = `default` in
    /// `system:masters`), not a cluster someone else set up.
    pub fn is_testenv(&self) -> bool {
        self.control_plane.is_some()
    }
}

/// The cluster, started on first use. Concurrent first calls wait for one
/// start; a failed start fails every test with the same message.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();
    match CLUSTER.get_or_init(|| {
        testenv::install_crypto_provider();
        // Start from a thread of our own: the caller is inside a tokio
        // runtime (where blocking on another future is not allowed) that
        // ends with its test, while the configuration must outlive it.
        std::thread::spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("building a runtime: {e}"))?
                .block_on(connect())
        })
        .join()
        .unwrap_or_else(|_| Err("starting the cluster panicked".into()))
    }) {
        Ok(cluster) => cluster,
        Err(message) => panic!("no cluster for this test: {message}"),
    }
}

/// A fresh admin client for the current test's runtime.
pub fn client() -> kube::Client {
    kube::Client::try_from(cluster().config.clone())
        .expect("the admin configuration was loaded once already")
}

fn use_existing_cluster() -> bool {
    std::env::var(USE_EXISTING_CLUSTER).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

async fn connect() -> Result<Cluster, String> {
    if use_existing_cluster() {
        return existing().await;
    }
    // Only ServiceAccounts are audited: the tests act as the admin, a
    // provider under test as a ServiceAccount.
    let options = Options::attached()
        .with_audit(AuditPolicy::requests_of_groups(&["system:serviceaccounts"]));
    let plane = ControlPlane::start(options)
        .await
        .map_err(|e| format!("starting the test control plane: {e}"))?;
    let config = plane.kube_config().await.map_err(|e| e.to_string())?;
    Ok(Cluster {
        config,
        kubeconfig: plane.kubeconfig_path().to_owned(),
        kubectl: plane.binaries().kubectl.clone(),
        scratch: plane.dir().join("scratch"),
        audit_log: plane.audit_log().map(Path::to_path_buf),
        control_plane: Some(plane),
    })
}

async fn existing() -> Result<Cluster, String> {
    let kubeconfig = std::env::var_os("KUBECONFIG")
        .map(PathBuf::from)
        .ok_or_else(|| format!("{USE_EXISTING_CLUSTER} is set but KUBECONFIG is not"))?;
    if std::env::split_paths(&kubeconfig).count() != 1 || !kubeconfig.is_file() {
        return Err(format!(
            "{USE_EXISTING_CLUSTER} needs KUBECONFIG to name one existing file, not {}",
            kubeconfig.display()
        ));
    }
    let config = kube::Config::from_kubeconfig(&kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| format!("loading {}: {e}", kubeconfig.display()))?;
    let kubectl =
        std::env::var_os("KUBECTL").map_or_else(|| PathBuf::from("kubectl"), PathBuf::from);
    let scratch = std::env::temp_dir().join(format!(
        "crossplane-provider-proxmox-tests-{}",
        std::process::id()
    ));
    Ok(Cluster {
        config,
        kubeconfig,
        kubectl,
        scratch,
        audit_log: None,
        control_plane: None,
    })
}

/// `cluster().scratch`, created.
pub fn scratch_dir() -> &'static Path {
    let dir = &cluster().scratch;
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}
