//! The launcher's promises, checked with real etcd and kube-apiserver
//! processes, in one test binary. Every test starts its own control plane
//! (or a `testenv` process that does), so tests run side by side.
//!
//! Each module below is a group of tests; add one with a file next to this
//! one and a `mod` line here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod audit;
mod lifetimes;
mod restart;
