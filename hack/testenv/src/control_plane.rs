//! Starting a control plane and the handle to a running one.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::audit::AuditFiles;
use crate::binaries::Binaries;
use crate::error::Error;
use crate::launch::{Plan, Running};
use crate::pki::{Pki, PkiFiles};
use crate::process::Lifetime;
use crate::process::Supervised;
use crate::restart::{self, ApiserverLaunch};
use crate::state::State;
use crate::{
    Options, attached, default_dir, detached, install_crypto_provider, kubeconfig, readiness, sys,
};

/// A running control plane. Dropping an attached one stops it and removes
/// its directory; dropping a detached one leaves it running.
#[derive(Debug)]
pub struct ControlPlane {
    dir: PathBuf,
    kubeconfig: PathBuf,
    server: String,
    ca_cert_pem: String,
    binaries: Binaries,
    lifetime: Lifetime,
    /// kube-apiserver's and etcd's; the first changes with a restart.
    pids: Mutex<Vec<u32>>,
    apiserver_launch: ApiserverLaunch,
    start_timeout: Duration,
    restarts: AtomicU32,
    audit_log: Option<PathBuf>,
}

impl ControlPlane {
    /// Builds the binaries if needed, then starts etcd and kube-apiserver and
    /// waits until the apiserver is ready and namespace `default` exists.
    pub async fn start(options: Options) -> Result<Self, Error> {
        install_crypto_provider();
        let binaries = Binaries::ensure().await?;
        let dir = match (&options.lifetime, &options.dir) {
            (Lifetime::Detached, Some(dir)) => {
                detached::prepare(dir)?;
                dir.clone()
            }
            (Lifetime::Detached, None) => {
                let dir = default_dir();
                detached::prepare(&dir)?;
                dir
            }
            (Lifetime::Attached, _) => attached::new_run_dir()?,
        };
        // Absolute paths: the processes and the state file outlive our cwd.
        let dir = std::path::absolute(&dir).map_err(|source| Error::Io {
            what: format!("resolving {}", dir.display()),
            source,
        })?;
        let node_names = options
            .node
            .as_ref()
            .map(crate::Node::serving_names)
            .unwrap_or_default();
        let pki = Pki::generate_serving(&node_names)?;
        let pki_files = pki.write(&dir.join("pki"))?;
        let audit = options
            .audit
            .as_ref()
            .map(|policy| AuditFiles::write(&dir, policy))
            .transpose()?;
        let deadline = tokio::time::Instant::now() + options.start_timeout;
        let Running {
            mut etcd,
            mut apiserver,
            server,
            apiserver_launch,
        } = Plan {
            binaries: &binaries,
            dir: &dir,
            pki: &pki_files,
            ca_cert_pem: &pki.ca_cert,
            audit: audit.as_ref(),
            node: options.node.as_ref(),
            lifetime: options.lifetime,
            deadline,
            timeout: options.start_timeout,
        }
        .run()
        .await?;

        let kubeconfig = dir.join("kubeconfig");
        let ready = async {
            kubeconfig::write(&kubeconfig, &kubeconfig::admin(&server, &pki))?;
            let client =
                kube::Client::try_from(kubeconfig::load(&kubeconfig).await?).map_err(|e| {
                    Error::Kubeconfig {
                        path: kubeconfig.clone(),
                        message: format!("building a client: {e}"),
                    }
                })?;
            let apiserver_log = apiserver.log.clone();
            readiness::wait_for(
                "namespace default",
                deadline,
                options.start_timeout,
                &mut [&mut apiserver, &mut etcd],
                &apiserver_log,
                || readiness::default_namespace(&client),
            )
            .await?;
            let controllers = match &options.node {
                Some(node) => {
                    start_controllers(node, &dir, &kubeconfig, &pki_files, options.lifetime)?
                }
                None => Vec::new(),
            };
            let owner = match options.lifetime {
                Lifetime::Attached => sys::ProcessId::current(),
                Lifetime::Detached => None,
            };
            State {
                owner,
                etcd: etcd.id,
                apiserver: apiserver.id,
                server: server.clone(),
                kubeconfig: kubeconfig.clone(),
                controllers: controllers.iter().map(|c| c.id).collect(),
            }
            .write(&dir)?;
            Ok::<_, Error>(controllers)
        }
        .await;
        // On error, dropping the handles kills the processes.
        let controllers = ready?;
        let mut pids = vec![apiserver.id.pid, etcd.id.pid];
        pids.extend(controllers.iter().map(|c| c.id.pid));
        let mut processes = vec![apiserver, etcd];
        processes.extend(controllers);
        match options.lifetime {
            Lifetime::Attached => {
                if let Err(e) = attached::keep_until_exit(&dir, processes) {
                    attached::stop(&dir);
                    return Err(e);
                }
            }
            Lifetime::Detached => processes.into_iter().for_each(Supervised::release),
        }
        Ok(Self {
            dir,
            kubeconfig,
            server,
            ca_cert_pem: pki.ca_cert,
            binaries,
            lifetime: options.lifetime,
            pids: Mutex::new(pids),
            apiserver_launch,
            start_timeout: options.start_timeout,
            restarts: AtomicU32::new(0),
            audit_log: audit.map(|files| files.log),
        })
    }

    /// Restarts kube-apiserver in place (attached control planes only):
    /// stops it (SIGTERM, then SIGKILL after 5 s) and starts it again on
    /// the same port with the same flags and certificates; etcd keeps
    /// running, so every object survives. Returns once the new apiserver is
    /// ready. Meanwhile clients see refused connections, like during a
    /// control plane upgrade. Restarts must not overlap.
    pub async fn restart_apiserver(&self) -> Result<(), Error> {
        if self.lifetime != Lifetime::Attached {
            return Err(Error::Restart {
                message: "only an attached control plane (tests) can restart its apiserver".into(),
            });
        }
        let pid = restart::restart_apiserver(restart::Target {
            dir: &self.dir,
            server: &self.server,
            ca_cert_pem: &self.ca_cert_pem,
            launch: &self.apiserver_launch,
            timeout: self.start_timeout,
            number: self.restarts.fetch_add(1, Ordering::Relaxed) + 1,
        })
        .await?;
        let mut pids = self.pids.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(apiserver) = pids.first_mut() {
            *apiserver = pid;
        }
        Ok(())
    }

    /// The run directory (certificates, etcd data, logs, kubeconfig).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The admin kubeconfig (user `default` in group `system:masters`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:<port>`
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The CA that signed the serving certificate, for further kubeconfigs.
    pub fn ca_cert_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// The binaries in use, including a kubectl of the apiserver's version.
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// The PIDs of kube-apiserver and etcd (then, serving a node, of
    /// kube-controller-manager and kube-scheduler).
    pub fn pids(&self) -> Vec<u32> {
        self.pids.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The audit log (JSON lines), when started with [`crate::Options::audit`].
    pub fn audit_log(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// A client configuration for the admin.
    pub async fn kube_config(&self) -> Result<kube::Config, Error> {
        kubeconfig::load(&self.kubeconfig).await
    }
}

/// kube-controller-manager and kube-scheduler for a node, logging into the
/// run directory. Neither is waited for: the node's own readiness (a
/// Deployment's pod) shows they work.
fn start_controllers(
    node: &crate::Node,
    dir: &Path,
    kubeconfig: &Path,
    pki: &PkiFiles,
    lifetime: Lifetime,
) -> Result<Vec<Supervised>, Error> {
    let [controller_manager, scheduler] = node.controllers()?;
    let controller_manager = Supervised::spawn(
        "kube-controller-manager",
        node.controller_manager(
            &controller_manager,
            kubeconfig,
            &pki.ca_cert,
            &pki.service_account_key,
        ),
        dir.join("kube-controller-manager.log"),
        lifetime,
    )?;
    let scheduler = Supervised::spawn(
        "kube-scheduler",
        node.scheduler(&scheduler, kubeconfig),
        dir.join("kube-scheduler.log"),
        lifetime,
    )?;
    Ok(vec![controller_manager, scheduler])
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.lifetime == Lifetime::Attached {
            attached::stop(&self.dir);
        }
    }
}
