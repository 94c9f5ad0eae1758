//! The Proxmox client against in-process pve-sims over real HTTPS, in one
//! test binary. The simulator's control API (`/_sim/`) is the referee.
//!
//! Each module below is a group of tests; add one with a file next to this
//! one and a `mod` line here. [`harness`] starts simulators and clients;
//! every test has its own, so tests run side by side.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod harness;

mod api;
mod auth_tls;
mod errors;
mod limits;
mod lxc;
mod observer;
mod retry;
mod tasks;
mod vzdump;
