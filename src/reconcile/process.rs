//! Starting and stopping the controller: the metrics server, the
//! controller itself and, with leader election, the Leases of the provider
//! configs ([`super::runtime::shards`]), until a shutdown future resolves.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::net::TcpListener;

use super::controllers;
use super::error::Error;
use super::runtime::metrics::Metrics;
use super::runtime::server::{self, Readiness};
use super::runtime::settings::Settings;

/// A shutdown signal that many waiters can share.
type Stop = Shared<BoxFuture<'static, ()>>;

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
            // Every replica runs the controller and fills its cache.
            readiness: Arc::new(Readiness::new(false)),
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
    /// finish. A kind whose CRD is not installed has no objects until it is
    /// (Crossplane's safe-start): its controller starts when the CRD comes.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), Error> {
        let stop: Stop = shutdown.boxed().shared();
        // An API server that does not answer yet (starting, restarting) is
        // waited for: exiting would only make the pod crash-loop. Which
        // CRDs it serves is each watch's business (`unserved_as_empty`).
        let mut delay = Duration::from_millis(500);
        loop {
            match self.kube.apiserver_version().await {
                Ok(_) => break,
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
        // With or without leader election the controller runs for the
        // whole life of the process: which provider configs it acts for is
        // decided per config by their Leases (`shards`).
        controllers::run(
            self.kube,
            self.settings,
            self.metrics,
            self.readiness,
            stop.clone(),
        )
        .await;
        if let Some(server) = server {
            stop.await;
            match server.await {
                Ok(Err(e)) => tracing::warn!(error = %e, "metrics server"),
                Err(e) => tracing::warn!(error = %e, "metrics server task"),
                Ok(Ok(())) => {}
            }
        }
        Ok(())
    }
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
