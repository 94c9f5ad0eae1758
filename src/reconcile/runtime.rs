//! Starting and stopping the controller: the metrics server, leader
//! election, and the controller itself, until a shutdown future resolves.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::api::ListParams;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub mod context;
pub mod controller;
pub mod memory;
pub mod metrics;
pub mod queue;
pub mod server;
pub mod settings;
pub mod wake;

use super::error::Error;
use crate::api::ProxmoxVM;
use metrics::Metrics;
use server::Readiness;
use settings::{LeaderElection, Settings};

/// A shutdown signal that many waiters can share.
type Stop = Shared<BoxFuture<'static, ()>>;

/// Lease timing: held for 15 s, renewed 5 s before it runs out.
const LEASE_SECONDS: u64 = 15;
const LEASE_GRACE_SECONDS: u64 = 5;

/// A controller ready to run.
pub struct Runtime {
    kube: kube::Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    listener: Option<TcpListener>,
}

impl Runtime {
    /// Binds the metrics listener (if any); nothing runs yet.
    pub async fn new(kube: kube::Client, settings: Settings) -> Result<Self, Error> {
        let listener = match settings.metrics_addr {
            Some(addr) => Some(server::bind(addr).await?),
            None => None,
        };
        Ok(Self {
            kube,
            readiness: Arc::new(Readiness::new(settings.leader_election.is_some())),
            settings,
            metrics: Arc::new(Metrics::default()),
            listener,
        })
    }

    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The metrics, for tests that read them directly.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Runs until `shutdown` resolves; running passes are allowed to
    /// finish. Fails at once if the CRDs are not installed.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        let stop: Stop = shutdown.boxed().shared();
        // Metadata only: one ProxmoxVM written around the schema must not
        // keep the controller from starting (it is reported on itself). An
        // API server that does not answer yet (starting, restarting) is
        // waited for: exiting would only make the pod crash-loop.
        let api = controller::scoped::<ProxmoxVM>(&self.kube, self.settings.namespace.as_deref());
        let mut delay = Duration::from_millis(500);
        loop {
            match api.list_metadata(&ListParams::default().limit(1)).await {
                Ok(_) => break,
                Err(e @ kube::Error::Api(_)) => return Err(Error::CrdMissing(e)),
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "the API server does not answer yet");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = stop.clone() => return Ok(()),
                    }
                    delay = (delay * 2).min(Duration::from_secs(10));
                }
            }
        }
        let server = self.listener.map(|listener| {
            tokio::spawn(server::serve(
                listener,
                Arc::clone(&self.metrics),
                Arc::clone(&self.readiness),
                stop.clone(),
            ))
        });
        let result = match self.settings.leader_election.clone() {
            None => {
                controller::run(
                    self.kube,
                    self.settings,
                    self.metrics,
                    self.readiness,
                    stop.clone(),
                )
                .await;
                Ok(())
            }
            Some(election) => {
                lead(
                    self.kube,
                    self.settings,
                    election,
                    self.metrics,
                    self.readiness,
                    stop.clone(),
                )
                .await
            }
        };
        if let Some(server) = server {
            stop.await;
            match server.await {
                Ok(Err(e)) => tracing::warn!(error = %e, "metrics server"),
                Err(e) => tracing::warn!(error = %e, "metrics server task"),
                Ok(Ok(())) => {}
            }
        }
        result
    }
}

/// Runs the controller whenever this replica holds the Lease, until `stop`.
async fn lead(
    kube: kube::Client,
    settings: Settings,
    election: LeaderElection,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    stop: Stop,
) -> Result<(), Error> {
    let manager = LeaseManagerBuilder::new(kube.clone(), &election.lease_name)
        .with_namespace(&election.namespace)
        .with_identity(&settings.identity)
        .with_duration(LEASE_SECONDS)
        .with_grace(LEASE_GRACE_SECONDS)
        .build()
        .await?;
    tracing::info!(
        lease = %election.lease_name, namespace = %election.namespace,
        identity = %settings.identity, "waiting to become leader"
    );
    let (leading, lease_task) = manager.watch().await;
    let result = loop {
        let mut became = leading.clone();
        tokio::select! {
            () = stop.clone() => break Ok(()),
            changed = became.wait_for(|l| *l) => if changed.is_err() { break Ok(()) },
        }
        tracing::info!("became leader; starting the controller");
        readiness.set_leading(true);
        let lost = lost(leading.clone(), stop.clone());
        controller::run(
            kube.clone(),
            settings.clone(),
            Arc::clone(&metrics),
            Arc::clone(&readiness),
            lost,
        )
        .await;
        readiness.set_leading(false);
        if stop.peek().is_some() {
            break Ok(());
        }
        tracing::warn!("lost the leader lease; standing by");
    };
    // Closing the channel makes the lease task release the Lease.
    drop(leading);
    match tokio::time::timeout(Duration::from_secs(5), lease_task).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "releasing the lease"),
        Ok(_) => {}
        Err(_) => tracing::warn!("releasing the lease timed out"),
    }
    result
}

/// Resolves when leadership is lost or `stop` fires.
fn lost(mut leading: watch::Receiver<bool>, stop: Stop) -> Stop {
    async move {
        tokio::select! {
            () = stop => {}
            _ = leading.wait_for(|l| !*l) => {}
        }
    }
    .boxed()
    .shared()
}

/// Runs the controller until `shutdown` resolves: [`Runtime::new`] then
/// [`Runtime::run`].
pub async fn run(
    kube: kube::Client,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    Runtime::new(kube, settings).await?.run(shutdown).await
}
