//! The chaos suite: see tests/chaos/mod.rs and docs/reliability.md.
//!
//! `cargo test --workspace --test chaos` runs the reduced size (part of `make test`);
//! `make chaos` runs the full size and writes its figures into
//! docs/reliability.md. Sizes and the seed come from `CHAOS_*` variables
//! (tests/chaos/size.rs); the seed is printed so a run can be repeated.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// `pub`: the harness is an API this binary uses only part of.
pub mod support;

#[path = "chaos/mod.rs"]
mod chaos;

/// The two runs one after the other: the first restarts the kube-apiserver,
/// and each wants the machine's cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn vms_converge_through_kills_failovers_an_apiserver_restart_and_proxmox_faults() {
    let _serial = SERIAL.lock().await;
    chaos::run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_share_the_configs_and_a_paused_or_killed_holder_never_writes_out_of_its_term() {
    let _serial = SERIAL.lock().await;
    chaos::shards::run().await;
}
