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
//! | [`pass`] | one pass: read → preflight → connect → observe → schedule → plan → act → status |
//! | [`providers`] | provider configs → one shared Proxmox client each |
//! | [`observe`] | filling the plan's `Observation` from Proxmox and Kubernetes |
//! | [`act`] | carrying out the plan's one step |
//! | [`status`] | server-side apply of the status, only when changed |
//! | [`events`] | core v1 events, aggregated |
//! | [`connection`] | the connection Secret |
//! | [`schedule`] | VMIDs, placement, per-node import/clone slots, decided atomically |
//! | [`assign`] | what a pass reads for the scheduler and tells it afterwards |
//! | [`inventory`] | each provider config's cluster view, one read per poll interval |
//! | [`queue`] | fair (first come, first served) admission of passes |
//! | [`writes`] | our last writes, so passes can read the cache safely |
//! | [`wake`] | waking a resource when its task ended, a slot freed, its template got further or a Secret/ConfigMap it reads changed |
//! | [`backoff`] | per-resource error backoff |
//! | [`metrics`], [`server`] | Prometheus metrics, `/metrics` `/healthz` `/readyz` |

pub mod act;
pub mod assign;
pub mod backoff;
pub mod configs;
pub mod connection;
pub mod context;
pub mod controller;
pub mod error;
pub mod events;
pub mod invalid;
pub mod inventory;
pub mod metrics;
pub mod nocloud;
pub mod observe;
pub mod pass;
pub mod plan;
pub mod providers;
pub mod queue;
pub mod runtime;
pub mod schedule;
pub mod server;
pub mod settings;
pub mod status;
pub mod wake;
pub mod writes;

pub use error::Error;
pub use runtime::{Runtime, run};
pub use settings::{LeaderElection, Settings};
