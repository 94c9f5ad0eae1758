//! Crossplane-style Kubernetes provider for Proxmox VE: virtual machines,
//! containers and images.
//!
//! The workspace is split along the walls that keep it honest; the
//! dependency graph enforces them (see docs/architecture.md):
//!
//! * [`api`]: the Kubernetes resource types (`ProxmoxVM`, `ProxmoxContainer`,
//!   `ProxmoxImage`, `ProviderConfig`, `ClusterProviderConfig`) from which the
//!   CRDs in `crds/` are generated.
//! * [`reconcile`]: the controllers, one slice per kind. Each kind's decisions
//!   are a pure function of the spec, the observed Proxmox state and the
//!   status; I/O stays at the edges, in the envelope every kind shares.
//! * [`import`]: observe-only manifests for guests a cluster already runs
//!   (`proxmox-provider import`).
//! * `pve-client` (crates/pve-client): the Proxmox VE REST client and its
//!   typed model of Proxmox values. It does not depend on Kubernetes crates.
//! * `pve-sim` (crates/pve-sim): a Proxmox VE API simulator for tests, demos
//!   and users' CI. It depends on neither this crate nor `pve-client`, so an
//!   encoding or UPID bug written once cannot pass in both.

pub mod api;
pub mod import;
pub mod reconcile;

pub use pve_client::install_crypto_provider;
