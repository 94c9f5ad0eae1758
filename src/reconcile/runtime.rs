//! Process infrastructure that names no kind: memory between passes, the
//! count of a cache's changes, metrics and their server, fair admission,
//! settings, the provider configs' Leases ([`shards`]) and wake-ups.

pub mod changes;
pub mod cycle;
pub mod memory;
pub mod metrics;
pub mod queue;
pub mod server;
pub mod settings;
pub mod shards;
pub mod wake;
