//! The PVE API semantics clients of Proxmox VE depend on (docs/pve-sim.md),
//! one group per file: add one with a file here and a `mod` line below.

mod auth;
mod binary;
mod clone;
pub mod config;
mod control;
mod create;
mod download;
mod errors;
mod lifecycle;
mod locks;
mod tasks;
mod tls;
