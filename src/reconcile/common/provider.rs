//! A provider config as a resource's pass finds it, and what every kind
//! says and does when it cannot be used: one condition and one retry,
//! whatever the kind.

use std::time::Duration;

use crate::api::Reason;
use crate::api::provider_config::{CloneSources, DownloadPolicy, Limits, Timing};

/// How soon a resource whose provider config is missing or unusable looks
/// again (creating or fixing the config also wakes it at once).
pub const RETRY: Duration = Duration::from_secs(30);

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
        /// Where its downloads may come from (`downloadPolicy`), and the
        /// host of its endpoint (a node no download may name).
        downloads: Option<DownloadPolicy>,
        endpoint_host: String,
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

impl ProviderState {
    /// Why nothing further can be done with this config, as the Synced
    /// condition's reason and message; `None` when it is usable.
    pub fn problem(&self) -> Option<(Reason, String)> {
        match self {
            Self::Ready { .. } => None,
            Self::NotFound { message } => Some((Reason::ProviderConfigNotFound, message.clone())),
            Self::Unusable { message } => Some((
                Reason::ReconcileError,
                format!("cannot use the provider config: {message}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_unusable_config_is_said_alike_by_every_kind() {
        let missing = ProviderState::NotFound {
            message: "ProviderConfig ns/pve not found".into(),
        };
        assert_eq!(
            missing.problem(),
            Some((
                Reason::ProviderConfigNotFound,
                "ProviderConfig ns/pve not found".into()
            ))
        );
        let unusable = ProviderState::Unusable {
            message: "the credentials Secret ns/pve does not exist".into(),
        };
        assert_eq!(
            unusable.problem(),
            Some((
                Reason::ReconcileError,
                "cannot use the provider config: the credentials Secret ns/pve does not exist"
                    .into()
            ))
        );
    }
}
