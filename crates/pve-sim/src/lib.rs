//! `pve-sim`: an in-memory Proxmox VE API simulator for tests, demos and
//! users' CI. It serves the `/api2/json` endpoints a provisioning client
//! needs, with PVE's paths, parameters, return shapes, errors, tasks, locks
//! and timings, plus a control API under `/_sim/`.
//!
//! It shares no code with `crate::proxmox` (a test enforces it), so that a
//! UPID or encoding bug written once cannot pass in both.
//!
//! ```no_run
//! # async fn demo() -> Result<(), pve_sim::Error> {
//! use pve_sim::{SimConfig, Simulator};
//! let sim = Simulator::start(SimConfig { time_scale: 0.01, ..SimConfig::default() }).await?;
//! println!("{} {}", sim.base_url(), sim.fingerprint());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

pub mod api;
pub mod auth;
pub mod clock;
pub mod config;
pub mod control;
pub mod error;
pub mod http;
pub mod instance;
pub mod schema;
pub mod server;
pub mod state;
pub mod tasks;
pub mod tls;
pub mod upid;

pub use config::{
    ApiTokenSpec, DEFAULT_API_TOKEN, DEFAULT_USER, Durations, FaultRates, Grant, NodeSetting,
    Secret, SimConfig, TlsSource, UserSpec,
};
pub use control::faults::{FaultAction, FaultRule};
pub use control::traffic::Entry as RequestLogEntry;
pub use control::urls::UrlEntry;
pub use error::Error;
pub use server::{SimHandle, Simulator};

/// One endpoint the simulator serves and the parameters it accepts, for
/// conformance checks against the real PVE schema.
#[derive(Clone, Debug)]
pub struct EndpointInfo {
    pub method: &'static str,
    /// Path template under `/api2/json`, e.g. `/nodes/{node}/qemu`.
    pub path: &'static str,
    pub params: Vec<&'static schema::Param>,
}

/// Everything the simulator serves (drives the schema conformance test).
pub fn endpoints() -> Vec<EndpointInfo> {
    api::routes()
        .iter()
        .map(|r| EndpointInfo {
            method: r.method,
            path: r.path,
            params: r.params().collect(),
        })
        .collect()
}

/// Installs the process-wide rustls crypto provider (ring), once; the
/// simulator's TLS server and tests' clients need one.
pub fn install_crypto_provider() {
    // Fails only when a provider is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
