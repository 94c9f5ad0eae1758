//! Test harness for integration tests against a real kube-apiserver.
//!
//! A module of each suite (test binary) that needs a cluster:
//! `tests/controller/` and `tests/deploy/` declare it `pub mod support;`
//! with a `#[path]` in their `main.rs` (`pub`: each uses only part of it),
//! `tests/chaos.rs` as `pub mod support;`. Every test binary gets one
//! cluster, started lazily on first use and shared by its tests:
//!
//! - by default a testenv control plane (etcd + kube-apiserver built from Go
//!   modules, see `hack/testenv`) on loopback, attached to the test process:
//!   it dies with it, even on SIGKILL;
//! - with `USE_EXISTING_CLUSTER=1` and `KUBECONFIG=<file>`, that cluster
//!   instead (e.g. kind in a user's CI); `KUBECTL` may name the kubectl.
//!
//! Every `#[tokio::test]` has its own runtime and a `kube::Client` dies with
//! the runtime that built it, so the shared state holds configuration only
//! and [`client`] builds a new client on each call (cheap).
//!
//! API:
//! - [`cluster()`] → [`Cluster`]: admin `kube::Config`, kubeconfig path,
//!   kubectl path, whether it is testenv.
//! - [`client()`] → a fresh admin `kube::Client`.
//! - [`namespace(prefix)`](namespace()) → [`TestNamespace`], uniquely named,
//!   deletion requested on drop (best effort: no namespace controller runs,
//!   so it stays `Terminating`).
//! - [`install_crds(dir)`](install_crds()) → server-side applies every YAML
//!   document in `dir` and waits until each CRD is `Established` and served;
//!   idempotent and safe from many tests. [`apply_path`] /
//!   [`apply_objects`] apply any manifests.
//! - [`kubectl`], [`kubectl_ok`] → the real kubectl as admin ([`kubectl_as`]
//!   with another kubeconfig);
//!   [`apply_dry_run_server`] (must be accepted) and
//!   [`apply_expect_rejected`] (must be rejected; returns the server's
//!   message), both for a file or YAML text ([`Manifest`]).
//! - [`service_account_kubeconfig(ns, name, grant)`](service_account_kubeconfig())
//!   → [`ServiceAccountAccess`]: a ServiceAccount bound only to the given
//!   ClusterRole/Role ([`Grant`]), with a TokenRequest token, as kubeconfig
//!   file and kube-rs config; [`bind`] grants it more.
//! - [`workspace_binary`] → the path of another workspace package's binary.
//! - [`poll`] → wait for a condition with a deadline and a clear message.
//!
//! Everything panics with what it was doing or waiting for, which is what a
//! failing test should print.

mod binaries;
mod cluster;
mod kubectl;
mod manifests;
mod namespace;
mod service_account;
mod wait;

pub use binaries::workspace_binary;
pub use cluster::{Cluster, USE_EXISTING_CLUSTER, client, cluster, scratch_dir};
pub use kubectl::{
    KubectlOutput, Manifest, apply_dry_run, apply_dry_run_server, apply_expect_rejected, kubectl,
    kubectl_as, kubectl_ok, kubectl_with_stdin,
};
pub use manifests::{
    FIELD_MANAGER, apply_objects, apply_objects_on, apply_path, install_crds, parse_manifests,
    read_manifests, wait_until_served, wait_until_served_on,
};
pub use namespace::{LABEL as NAMESPACE_LABEL, TestNamespace, namespace};
pub use service_account::{Grant, ServiceAccountAccess, bind, granted, service_account_kubeconfig};
pub use wait::poll;

/// The SHA-256 of `text`, in lower-case hex: pve-sim's content of an
/// unregistered URL is the URL's text, so this is its checksum.
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The repository root (for `crds/`, `deploy/`, fixtures).
pub fn repo_root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}
