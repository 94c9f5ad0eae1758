//! Conformance suite for `pve-sim`: drives the simulator over real HTTPS
//! with a plain reqwest client and checks the behaviours clients of Proxmox
//! VE depend on (PVE API semantics as documented in docs/pve-sim.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "sim/common.rs"]
mod common;

#[path = "sim/agent.rs"]
mod agent;
#[path = "sim/conformance/auth.rs"]
mod auth;
#[path = "sim/conformance/binary.rs"]
mod binary;
#[path = "sim/clients.rs"]
mod clients;
#[path = "sim/conformance/clone.rs"]
mod clone;
#[path = "sim/cluster.rs"]
mod cluster;
#[path = "sim/conformance/config.rs"]
mod config;
#[path = "sim/conformance/control.rs"]
mod control;
#[path = "sim/conformance/create.rs"]
mod create;
#[path = "sim/conformance/download.rs"]
mod download;
#[path = "sim/conformance/errors.rs"]
mod errors;
#[path = "sim/generic.rs"]
mod generic;
#[path = "sim/ha.rs"]
mod ha;
#[path = "sim/hardware.rs"]
mod hardware;
#[path = "sim/conformance/lifecycle.rs"]
mod lifecycle;
#[path = "sim/conformance/locks.rs"]
mod locks;
#[path = "sim/lxc.rs"]
mod lxc;
#[path = "sim/mapping.rs"]
mod mapping;
#[path = "sim/migrate.rs"]
mod migrate;
#[path = "sim/node_faults.rs"]
mod node_faults;
#[path = "sim/schema_source.rs"]
mod schema_source;
#[path = "sim/schema_walk.rs"]
mod schema_walk;
#[path = "sim/snapshots.rs"]
mod snapshots;
#[path = "sim/state.rs"]
mod state;
#[path = "sim/conformance/tasks.rs"]
mod tasks;
#[path = "sim/thin.rs"]
mod thin;
#[path = "sim/conformance/tls.rs"]
mod tls;
#[path = "sim/upload.rs"]
mod upload;
#[path = "sim/vm_options.rs"]
mod vm_options;
