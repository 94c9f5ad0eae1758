//! Starting etcd and kube-apiserver on free loopback ports with
//! envtest's flags, retrying when another process steals a port.

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;

use crate::audit::AuditFiles;
use crate::binaries::Binaries;
use crate::error::{Error, IoContext};
use crate::node::Node;
use crate::pki::PkiFiles;
use crate::process::{Lifetime, Supervised};
use crate::readiness;
use crate::restart::ApiserverLaunch;

/// envtest retries five times too.
const ATTEMPTS: u32 = 5;

pub struct Running {
    pub etcd: Supervised,
    pub apiserver: Supervised,
    pub server: String,
    /// How the apiserver was started, to start it again the same way.
    pub apiserver_launch: ApiserverLaunch,
}

pub struct Plan<'a> {
    pub binaries: &'a Binaries,
    pub dir: &'a Path,
    pub pki: &'a PkiFiles,
    pub ca_cert_pem: &'a str,
    pub audit: Option<&'a AuditFiles>,
    pub node: Option<&'a Node>,
    pub lifetime: Lifetime,
    pub deadline: Instant,
    pub timeout: Duration,
}

impl Plan<'_> {
    /// Starts both processes and waits until the apiserver is ready.
    pub async fn run(&self) -> Result<Running, Error> {
        let http = readiness::http_client(self.ca_cert_pem).map_err(|message| Error::Io {
            what: "building the readiness HTTP client".into(),
            source: std::io::Error::other(message),
        })?;
        for _ in 0..ATTEMPTS {
            match self.attempt(&http).await {
                Err(e) if e.is_port_race() => continue,
                other => return other,
            }
        }
        Err(Error::PortsExhausted { attempts: ATTEMPTS })
    }

    /// One try with fresh ports. On any error the processes started so far
    /// are killed as their handles drop.
    async fn attempt(&self, http: &reqwest::Client) -> Result<Running, Error> {
        let [client_port, peer_port, apiserver_port] = free_ports()?;
        let data_dir = self.dir.join("etcd");
        // A failed attempt may have left a half-initialised member behind.
        if data_dir.exists() {
            std::fs::remove_dir_all(&data_dir)
                .context(|| format!("removing {}", data_dir.display()))?;
        }
        let etcd_url = format!("http://127.0.0.1:{client_port}");
        let mut etcd = Supervised::spawn(
            "etcd",
            self.etcd_command(&data_dir, &etcd_url, peer_port),
            self.dir.join("etcd.log"),
            self.lifetime,
        )?;
        let etcd_log = etcd.log.clone();
        readiness::wait_for(
            "etcd /health",
            self.deadline,
            self.timeout,
            &mut [&mut etcd],
            &etcd_log,
            || readiness::etcd_health(http, &etcd_url),
        )
        .await?;

        let server = format!("https://127.0.0.1:{apiserver_port}");
        let apiserver_launch =
            ApiserverLaunch::of(&self.apiserver_command(&etcd_url, apiserver_port));
        let mut apiserver = Supervised::spawn(
            "kube-apiserver",
            apiserver_launch.command(),
            self.dir.join("kube-apiserver.log"),
            self.lifetime,
        )?;
        let apiserver_log = apiserver.log.clone();
        readiness::wait_for(
            "kube-apiserver /readyz",
            self.deadline,
            self.timeout,
            &mut [&mut apiserver, &mut etcd],
            &apiserver_log,
            || readiness::apiserver_ready(http, &server),
        )
        .await?;
        Ok(Running {
            etcd,
            apiserver,
            server,
            apiserver_launch,
        })
    }

    /// envtest's etcd flags, plus quiet logs. Data is thrown away after the
    /// run, so fsync is skipped (the single biggest speed-up on slow disks).
    fn etcd_command(&self, data_dir: &Path, url: &str, peer_port: u16) -> Command {
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut command = Command::new(&self.binaries.etcd);
        command.args([
            format!("--data-dir={}", data_dir.display()),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
            // Tests store little; a small quota fails fast on a runaway writer.
            "--quota-backend-bytes=536870912".into(),
        ]);
        command
    }

    /// envtest's kube-apiserver flags. Two additions make start-up independent
    /// of the host's network: without them the apiserver picks the address of
    /// the default route to advertise and refuses to start on a host without
    /// one ("no default routes found"); a loopback advertise address is only
    /// accepted when no endpoint reconciler writes it into the `kubernetes`
    /// Service, which nothing in tests reads.
    ///
    /// For a node the apiserver serves on every address of its network
    /// namespace (hack/node/up.sh's, which has no link out), advertises the
    /// node's so that the `kubernetes` Service leads to it, reaches kubelets
    /// with a client certificate, and keeps the ServiceAccount admission
    /// plugin (the controller manager makes the ServiceAccounts it needs).
    fn apiserver_command(&self, etcd_url: &str, port: u16) -> Command {
        let pki = self.pki;
        let mut command = Command::new(&self.binaries.kube_apiserver);
        command.args([
            format!("--etcd-servers={etcd_url}"),
            format!("--cert-dir={}", self.dir.join("pki").display()),
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            format!("--secure-port={port}"),
            format!("--service-account-issuer=https://127.0.0.1:{port}/"),
            format!(
                "--service-account-key-file={}",
                pki.service_account_public_key.display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                pki.service_account_key.display()
            ),
            "--authorization-mode=RBAC".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
        ]);
        match self.node {
            None => command.args([
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                // No controller manager runs, so no ServiceAccount `default`
                // would ever appear for the admission plugin to find.
                "--disable-admission-plugins=ServiceAccount",
            ]),
            Some(node) => command.args([
                "--bind-address=0.0.0.0".into(),
                format!("--advertise-address={}", node.address),
                format!(
                    "--kubelet-client-certificate={}",
                    pki.kubelet_client_cert.display()
                ),
                format!("--kubelet-client-key={}", pki.kubelet_client_key.display()),
                "--kubelet-preferred-address-types=InternalIP".into(),
            ]),
        };
        if let Some(audit) = self.audit {
            command.args(audit.flags());
        }
        command
    }
}

/// Three distinct free loopback ports. They are released before use, so
/// another process may take one first; [`Plan::run`] retries then.
fn free_ports() -> Result<[u16; 3], Error> {
    // Holding all listeners until all are chosen keeps the three distinct.
    let listeners = (0..3)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<Result<Vec<_>, _>>()
        .context(|| "finding free loopback ports")?;
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .context(|| "reading a bound port")?
            .port();
    }
    Ok(ports)
}
