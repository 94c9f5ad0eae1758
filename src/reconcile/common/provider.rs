//! A provider config as a resource's pass finds it.

use crate::api::provider_config::{CloneSources, Limits, Timing};

/// The provider config named by `spec.providerConfigRef`, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderState {
    /// Config and credentials read, Proxmox answered the observation.
    Ready {
        /// Parsed durations of the config.
        timing: Timing,
        /// Its concurrency limits.
        limits: Limits,
        /// VMs beyond templates its resources may clone
        /// (`clonePolicy.allowNonTemplates`).
        clones: Option<CloneSources>,
    },
    /// The named ProviderConfig/ClusterProviderConfig does not exist.
    NotFound {
        /// E.g. `ClusterProviderConfig "default" not found`.
        message: String,
    },
    /// It exists but cannot be used: credentials Secret missing, endpoint
    /// unreachable, authentication refused, observation failed.
    Unusable {
        /// What went wrong.
        message: String,
    },
}
