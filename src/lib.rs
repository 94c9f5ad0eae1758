//! Crossplane-style Kubernetes provider for Proxmox VE virtual machines.
//!
//! The crate is split along the walls that keep it honest:
//!
//! * [`api`]: the Kubernetes resource types (`ProxmoxVM`, `ProviderConfig`,
//!   `ClusterProviderConfig`) from which the CRDs in `crds/` are generated.
//! * [`proxmox`]: the Proxmox VE REST client. It knows nothing of Kubernetes.
//! * [`reconcile`]: the controller. Its decisions are a pure function of the
//!   spec, the observed Proxmox state and the status; I/O stays at the edges.
//! * [`sim`]: `pve-sim`, a Proxmox VE API simulator for tests, demos and
//!   users' CI. It shares no code with [`proxmox`], so an encoding or UPID bug
//!   written once cannot pass in both.

pub mod api;
pub mod proxmox;
pub mod reconcile;
pub mod sim;

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
