//! Proxmox VE REST client. Knows nothing of Kubernetes.
//!
//! One [`Client`] per ProviderConfig, cheap to clone. It authenticates (API
//! token, or tickets with CSRF tokens renewed before their 2 h expiry),
//! verifies TLS (system roots, a CA bundle, or a pinned SHA-256 leaf
//! fingerprint), limits concurrency and rate, classifies every failure into
//! one [`Error`], retries only what is safe to retry ([`retry`]), and
//! observes tasks without blocking ([`Client::observe_task`]) at a request
//! rate that grows with nodes rather than with tasks in flight
//! ([`observer`]).
//!
//! Disk images are imported with the `import-from` drive option
//! ([`vm::Drive::import`]) from files placed by `download-url`
//! ([`storage::DownloadContent::Import`]). There is no REST `importdisk`
//! endpoint; the provider this crate replaces called one and got a 501.

pub mod agent;
mod auth;
pub mod backup;
mod classify;
mod client;
pub mod cluster;
pub mod config;
pub mod error;
pub mod firewall;
pub mod form;
pub mod guest_alias;
pub mod guest_firewall;
pub mod ha;
pub mod hook;
pub mod ipset;
mod lenient;
mod limit;
pub mod lxc;
pub mod node;
pub mod observer;
pub mod pool;
mod request;
pub mod retry;
pub mod sdn;
pub mod secret;
pub mod snapshot;
pub mod storage;
pub mod task;
pub mod tls;
mod transport;
pub mod upid;
pub mod vm;
pub mod vzdump;
mod wait;

pub use agent::{AgentInterface, AgentIpAddress, AgentNetwork, AgentNotReady};
pub use backup::{BackupJob, BackupJobOptions};
pub use client::Client;
pub use cluster::{ClusterOptions, NextIdRange, Resource, ResourceType, Version};
pub use config::{
    AuthOptions, ClientConfig, Credentials, Limits, ObserveMode, RetryPolicy, TaskOptions,
};
pub use error::{Error, ErrorClass, Result};
pub use guest_firewall::FirewallOptions;
pub use ha::{HaAffinity, HaGroup, HaResource, HaResourceSpec, HaRule, ha_nodes};
pub use hook::{RequestHook, RequestRecord, WriteGate};
pub use node::{NetworkInterface, NodeInfo};
pub use observer::{ListedTask, ObserveOptions};
pub use pool::{AclEntry, AclSubject, Pool, PoolMember};
pub use retry::CallKind;
pub use sdn::{SdnObject, SdnOptions, SdnState};
pub use secret::Secret;
pub use snapshot::{Guest, GuestType, SnapshotEntry, SnapshotTask, TakeSnapshot};
pub use storage::{Checksum, DownloadContent, DownloadUrl, StorageContent, UrlMetadata};
pub use task::{
    ExitStatus, Progress, TaskListEntry, TaskListFilter, TaskLog, TaskLogLine, TaskObservation,
    TaskOutcome, TaskStatus, TaskSuccess,
};
pub use tls::{Fingerprint, TlsOptions};
pub use upid::{InvalidUpid, Upid};
pub use vzdump::{
    BackupMode, BackupVolume, Compression, Restore, Vzdump, parse_backup_name, vzdump_job_id,
};
pub use wait::WaitOptions;

/// Installs the process-wide rustls crypto provider (ring).
///
/// kube and reqwest both build rustls configurations from the process default
/// provider; exactly one must be installed before either makes a connection.
/// Calling this more than once is harmless.
pub fn install_crypto_provider() {
    // `install_default` fails only when a provider is already installed,
    // which is the state we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
