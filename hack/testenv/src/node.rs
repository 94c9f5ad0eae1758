//! What a real node (a kubelet, hack/node/) needs from the control plane
//! beyond envtest's: an apiserver address the node and its pods can reach,
//! the `kubernetes` Service pointing at it, ServiceAccount admission (pods
//! get their token volume), a client certificate for the apiserver to reach
//! kubelets (`kubectl logs`, `exec`), and kube-controller-manager and
//! kube-scheduler (Deployments, ServiceAccounts, `kube-root-ca.crt`).
//!
//! Opt-in (`testenv up --node-address ADDRESS --node-bin-dir DIR`): the
//! suites that start a control plane themselves run without any of it.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::Error;

/// The first address of `--service-cluster-ip-range`: the `kubernetes`
/// Service's ClusterIP, which pods dial (through kube-proxy).
pub const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";

/// A node's view of the control plane.
#[derive(Debug, Clone)]
pub struct Node {
    /// The address the apiserver advertises (the `kubernetes` Service's
    /// endpoint) and serves on besides loopback; the node's own address,
    /// inside the network namespace hack/node/up.sh makes.
    pub address: Ipv4Addr,
    /// Where `kube-controller-manager` and `kube-scheduler` are
    /// (hack/node/build.sh's output).
    pub bin_dir: PathBuf,
}

impl Node {
    /// The names the serving certificate must hold besides loopback's: the
    /// node address and the `kubernetes` Service, by IP and by name.
    pub fn serving_names(&self) -> Vec<String> {
        vec![
            self.address.to_string(),
            KUBERNETES_SERVICE_IP.into(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            "kubernetes.default.svc.cluster.local".into(),
        ]
    }

    /// Both controller binaries, which must exist.
    pub fn controllers(&self) -> Result<[PathBuf; 2], Error> {
        let binaries = [
            self.bin_dir.join("kube-controller-manager"),
            self.bin_dir.join("kube-scheduler"),
        ];
        for binary in &binaries {
            if !binary.is_file() {
                return Err(Error::MissingBinary {
                    binary: binary.clone(),
                    hint: "--node-bin-dir names hack/node/build.sh's output".into(),
                });
            }
        }
        Ok(binaries)
    }

    /// kube-controller-manager: the controllers a Deployment needs, the
    /// ServiceAccount and token controllers, and the publisher of
    /// `kube-root-ca.crt` into every namespace. It and the scheduler use the
    /// admin kubeconfig and serve their own ports on loopback only.
    pub fn controller_manager(
        &self,
        binary: &Path,
        kubeconfig: &Path,
        ca_cert: &Path,
        service_account_key: &Path,
    ) -> Command {
        let mut command = Command::new(binary);
        command.args(common_flags(kubeconfig)).args([
            format!("--root-ca-file={}", ca_cert.display()),
            format!(
                "--service-account-private-key-file={}",
                service_account_key.display()
            ),
            "--use-service-account-credentials=false".into(),
        ]);
        command
    }

    pub fn scheduler(&self, binary: &Path, kubeconfig: &Path) -> Command {
        let mut command = Command::new(binary);
        command.args(common_flags(kubeconfig));
        command
    }
}

fn common_flags(kubeconfig: &Path) -> Vec<String> {
    let kubeconfig = kubeconfig.display();
    vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--leader-elect=false".into(),
        "--bind-address=127.0.0.1".into(),
    ]
}
