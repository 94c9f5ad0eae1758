//! The HTTPS listener: TLS with tokio-rustls, HTTP/1.1 with hyper, one task
//! per connection, graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::config::SimConfig;
use super::control::faults::FaultRule;
use super::control::traffic::Entry;
use super::control::urls::UrlEntry;
use super::error::Error;
use super::http::pipeline;
use super::instance::Instance;
use super::tls::TlsMaterial;

/// Starts simulators.
pub struct Simulator;

impl Simulator {
    /// Binds `config.listen`, generates or loads the certificate, seeds the
    /// cluster and serves until the handle is shut down or dropped.
    pub async fn start(mut config: SimConfig) -> Result<SimHandle, Error> {
        if let Some(state) = config.state.clone() {
            crate::state::build::configure(&state, &mut config)?;
        }
        config.validate()?;
        let tls = TlsMaterial::load(&config.tls, &config.nodes[0])?;
        let inst = Arc::new(Instance::new(
            &config,
            tls.ca_pem.clone(),
            tls.fingerprint.clone(),
        )?);
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| Error::Listen {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr()?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let acceptor = TlsAcceptor::from(tls.server_config.clone());
        let join = tokio::spawn(accept_loop(listener, acceptor, inst.clone(), stop_rx));
        Ok(SimHandle {
            addr,
            fingerprint: tls.fingerprint,
            ca_pem: tls.ca_pem,
            stop: stop_tx,
            join: Some(join),
            instance: inst,
        })
    }
}

/// A running simulator. Dropping it stops the server.
pub struct SimHandle {
    addr: SocketAddr,
    fingerprint: String,
    ca_pem: String,
    stop: watch::Sender<bool>,
    join: Option<JoinHandle<()>>,
    instance: Arc<Instance>,
}

impl SimHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:PORT` (IPv6 addresses in brackets).
    pub fn base_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// SHA-256 fingerprint of the server certificate, `AA:BB:...`.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// PEM of the CA that signed the server certificate.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// `https://127.0.0.1:PORT/_sim`, the control API.
    pub fn control_url(&self) -> String {
        format!("{}/_sim", self.base_url())
    }

    /// Number of worker tasks started so far (for tests and diagnostics).
    pub fn task_count(&self) -> usize {
        self.instance.tasks.records().len()
    }

    /// Adds a fault rule after the existing ones (as `POST /_sim/faults`);
    /// returns its id, or why the rule cannot be applied.
    pub fn add_fault(&self, rule: FaultRule) -> Result<u64, Error> {
        self.instance.add_fault(rule).map_err(Error::FaultRule)
    }

    /// Releases the tasks held under `hold` (as `POST /_sim/release`).
    pub fn release(&self, hold: &str) {
        self.instance.holds.release(hold);
    }

    /// Removes all fault rules (as `DELETE /_sim/faults`).
    pub fn clear_faults(&self) {
        self.instance.faults().clear();
    }

    /// Registers what a download-url of `entry.url` yields (as `POST /_sim/urls`).
    pub fn register_url(&self, entry: UrlEntry) {
        self.instance.urls().register(entry);
    }

    /// Request counts per route and status (as `GET /_sim/stats`).
    pub fn stats(&self) -> serde_json::Value {
        self.instance.traffic().stats()
    }

    /// The request log (as `GET /_sim/requests`).
    pub fn requests(&self) -> Vec<Entry> {
        self.instance.traffic().entries().cloned().collect()
    }

    /// Clears the request log and statistics.
    pub fn clear_requests(&self) {
        self.instance.traffic().clear();
    }

    /// Stops accepting, lets open requests finish (up to a few seconds).
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(join) = self.join.take() {
            let _ = join.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    inst: Arc<Instance>,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => {
                let Ok((tcp, _peer)) = accepted else { continue };
                let _ = tcp.set_nodelay(true);
                connections.spawn(serve_connection(tcp, acceptor.clone(), inst.clone(), stop.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Give open connections a moment to finish their responses.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.abort_all();
}

async fn serve_connection(
    tcp: tokio::net::TcpStream,
    acceptor: TlsAcceptor,
    inst: Arc<Instance>,
    mut stop: watch::Receiver<bool>,
) {
    let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
    else {
        return;
    };
    let service = service_fn(move |req| pipeline::serve(inst.clone(), req));
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(tls), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
