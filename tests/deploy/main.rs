//! The deploy suite: what ships besides the binary (`deploy/`, `examples/`,
//! the Dockerfile, the scripts, the Crossplane package) checked with the
//! real kube-apiserver, kubectl, Helm, Lua and linters, in one test binary
//! with one control plane.
//!
//! Each module below is a group of tests; add one with a file next to this
//! one and a `mod` line here. Helpers: [`support`] (the control plane;
//! shared with the other suites) and [`tools`] (pinned tools, rendered
//! manifests, YAML). Tests run in parallel and share the cluster: each
//! keeps to its own namespace or to dry runs, and names its cluster-scoped
//! objects after its namespace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// `pub`: the harness is an API and a suite need not use all of it (the
// dead-code lint spares public items of a test crate, not private ones).
#[path = "../support/mod.rs"]
pub mod support;

pub mod tools;

mod demo;
mod examples;
mod gitops;
mod lint;
mod manifests;
mod node;
mod pve_sim;
mod rbac;
