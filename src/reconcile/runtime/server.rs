//! `/metrics` (OpenMetrics), `/healthz` (liveness) and `/readyz`
//! (readiness) on one HTTP listener.
//!
//! Ready means: the controller's cache of ProxmoxVMs is filled, or this
//! replica is a standby (not the leader) — a standby is ready to take over,
//! so it must not be reported as failing.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use super::metrics::Metrics;
use crate::reconcile::error::Error;

/// What `/readyz` answers from.
#[derive(Debug, Default)]
pub struct Readiness {
    leader_election: bool,
    leading: AtomicBool,
    synced: AtomicBool,
}

impl Readiness {
    /// Readiness of a process with or without leader election.
    pub fn new(leader_election: bool) -> Self {
        Self {
            leader_election,
            ..Self::default()
        }
    }

    /// This replica became leader (`true`) or stopped being one.
    pub fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::SeqCst);
        if !leading {
            self.synced.store(false, Ordering::SeqCst);
        }
    }

    /// The controller's cache is (`true`) or is no longer filled.
    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::SeqCst);
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        let standby = self.leader_election && !self.leading.load(Ordering::SeqCst);
        standby || self.synced.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
}

/// Binds the listener (so a bad address fails at start, and tests can ask
/// for port 0 and learn the port).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Server {
            addr: addr.to_string(),
            source,
        })
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let app = Router::new()
        .route("/metrics", get(metrics_page))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(Shared { metrics, readiness });
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| Error::Server { addr, source })
}

async fn metrics_page(State(s): State<Shared>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

async fn ready(State(s): State<Shared>) -> impl IntoResponse {
    if s.readiness.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the ProxmoxVM cache is not filled yet",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standby_is_ready_a_leader_once_synced() {
        let r = Readiness::new(true);
        assert!(r.is_ready(), "standby before the first election");
        r.set_leading(true);
        assert!(!r.is_ready(), "leading, cache not filled");
        r.set_synced(true);
        assert!(r.is_ready());
        r.set_leading(false);
        assert!(r.is_ready(), "standby again");
        let single = Readiness::new(false);
        assert!(!single.is_ready());
        single.set_synced(true);
        assert!(single.is_ready());
    }
}
