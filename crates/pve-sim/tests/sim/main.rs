//! pve-sim's own tests, in one test binary: the conformance suite drives
//! the simulator over real HTTPS with a plain reqwest client and checks the
//! behaviours clients of Proxmox VE depend on (PVE API semantics as
//! documented in docs/pve-sim.md); [`schema`] holds every endpoint and
//! parameter it serves against the real PVE API schema.
//!
//! Each module below is a group of tests; add one with a file next to this
//! one and a `mod` line here (or in `conformance/mod.rs`). [`common`]
//! starts simulators; every test has its own, so tests run side by side.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod common;
pub mod schema_source;

mod agent;
mod backup;
mod clients;
mod cluster;
mod conformance;
mod firewall;
mod generic;
mod ha;
mod hardware;
mod host_limits;
mod lxc;
mod mapping;
mod migrate;
mod node_faults;
mod schema;
mod schema_walk;
mod sdn;
mod snapshots;
mod state;
mod thin;
mod upload;
mod vm_options;
mod vzdump;
