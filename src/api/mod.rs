//! Kubernetes API types: `ProxmoxVM`, `ProxmoxImage`, `ProxmoxContainer`,
//! `ProxmoxPool`, `ProxmoxSnapshot`, `ClusterProviderConfig`.
//!
//! The types follow Crossplane v2 managed-resource conventions (`spec.forProvider`,
//! `spec.providerConfigRef`, `spec.managementPolicies`, `status.atProvider`,
//! `status.conditions`), so Crossplane tooling, `kubectl wait`, Flux and Argo CD
//! read them the way they read any other managed resource. The CRDs in `crds/`
//! are generated from these types (`proxmox-provider crds`).

pub mod backup;
pub mod backup_job;
pub mod condition;
pub mod container;
pub mod crd;
pub mod firewall;
pub mod image;
pub mod ip_set;
pub mod kinds;
pub mod managed;
pub mod meta;
pub mod pool;
pub mod provider_config;
pub mod quantity;
pub mod rules;
pub mod sdn;
pub mod security_group;
pub mod snapshot;
pub mod task;
pub mod vm;

#[cfg(test)]
mod validation_tests;

pub use backup::{ProxmoxBackup, ProxmoxBackupSpec, ProxmoxBackupStatus};
pub use backup_job::{ProxmoxBackupJob, ProxmoxBackupJobSpec, ProxmoxBackupJobStatus};
pub use condition::{Condition, ConditionStatus, ConditionType, Reason, set_condition};
pub use container::{ProxmoxContainer, ProxmoxContainerSpec, ProxmoxContainerStatus};
pub use image::{ProxmoxImage, ProxmoxImageSpec, ProxmoxImageStatus};
pub use ip_set::{ProxmoxIPSet, ProxmoxIPSetSpec, ProxmoxIPSetStatus};
pub use meta::{ManagementPolicy, ProviderConfigKind, ProviderConfigReference};
pub use pool::{ProxmoxPool, ProxmoxPoolSpec, ProxmoxPoolStatus};
pub use provider_config::{ClusterProviderConfig, ProviderConfig, ProviderSettings};
pub use quantity::Quantity;
pub use sdn::{ProxmoxSDNZone, ProxmoxVNet};
pub use security_group::{
    ProxmoxSecurityGroup, ProxmoxSecurityGroupSpec, ProxmoxSecurityGroupStatus,
};
pub use snapshot::{ProxmoxSnapshot, ProxmoxSnapshotSpec, ProxmoxSnapshotStatus};
pub use vm::{ProxmoxVM, ProxmoxVMSpec, ProxmoxVMStatus};

/// API group of every kind this provider serves.
pub const GROUP: &str = "proxmox.m.crossplane.io";
/// The one served and stored version.
pub const VERSION: &str = "v1alpha1";
