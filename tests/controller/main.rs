//! The controller suite: the provider's code against a real kube-apiserver
//! and in-process pve-sims, in one test binary with one control plane.
//!
//! Each module below is a group of tests; add one with a file next to this
//! one and a `mod` line here. Helpers: [`support`] (the control plane,
//! kubectl, namespaces, ServiceAccounts; shared with the other suites) and
//! [`reconcile`] (a namespace, pve-sim, ProviderConfig and controller per
//! test, side by side).
//!
//! Tests run in parallel and share the cluster: each keeps to its own
//! namespace and names its cluster-scoped objects after it. The CRDs are
//! the one shared thing a test changes (bad_input writes around the
//! schema); [`reconcile::schema`] serialises that.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// `pub`: the harness is an API and a suite need not use all of it (the
// dead-code lint spares public items of a test crate, not private ones).
#[path = "../support/mod.rs"]
pub mod support;

pub mod reconcile;

mod adoption;
mod architecture;
pub mod backup_jobs;
pub mod backups;
mod bad_input;
mod concurrency;
mod configs;
mod containers;
mod contract;
mod control_plane;
mod crds;
mod create;
mod downloads;
mod events;
mod failures;
pub mod firewall;
mod fleet;
mod guest_firewall;
mod ha;
mod hardware;
mod hostile;
mod images;
mod lifecycle;
mod motion;
mod pools;
mod races;
mod rbac;
mod requests;
mod runtime;
mod safe_start;
mod safety;
pub mod sdn;
mod seed;
pub mod snapshots;
