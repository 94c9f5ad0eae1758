//! The ProxmoxVM controller.
//!
//! The decisions are a pure function ([`plan`]); everything else here is the
//! I/O around it, one concept per module:
//!
//! | module | concept |
//! |---|---|
//! | [`runtime`] | start/stop: metrics server, leader election, controller |
//! | [`controller`] | what is watched and what triggers a pass |
//! | [`configs`] | provider config status: Ready, Proxmox version, users |
//! | [`pass`] | one pass: read → preflight → connect → observe → plan → act → status |
//! | [`providers`] | provider configs → one shared Proxmox client each |
//! | [`observe`] | filling the plan's `Observation` from Proxmox and Kubernetes |
//! | [`act`] | carrying out the plan's one step |
//! | [`status`] | server-side apply of the status, only when changed |
//! | [`events`] | core v1 events, aggregated |
//! | [`connection`] | the connection Secret |
//! | [`capacity`] | per-node import/clone limits |
//! | [`backoff`] | per-resource error backoff |
//! | [`metrics`], [`server`] | Prometheus metrics, `/metrics` `/healthz` `/readyz` |

pub mod act;
pub mod backoff;
pub mod capacity;
pub mod configs;
pub mod connection;
pub mod context;
pub mod controller;
pub mod error;
pub mod events;
pub mod invalid;
pub mod metrics;
pub mod observe;
pub mod pass;
pub mod plan;
pub mod providers;
pub mod runtime;
pub mod server;
pub mod settings;
pub mod status;

pub use error::Error;
pub use runtime::{Runtime, run};
pub use settings::{LeaderElection, Settings};
