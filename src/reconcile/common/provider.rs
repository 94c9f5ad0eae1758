//! A provider config as a resource's pass finds it, and what every kind
//! says and does when it cannot be used: one condition and one retry,
//! whatever the kind.

use std::time::Duration;

use crate::api::Reason;
use crate::api::provider_config::{CloneSources, DownloadPolicy, Limits, Timing};
use crate::reconcile::error::{Error, forbidden_message as forbidden_message_of};

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
    /// The API server refused the provider a read the pass needs (403:
    /// its RBAC does not grant it): the config, its Secrets, a Secret the
    /// resource names.
    Forbidden {
        /// The API server's words (who, which verb, which resource, where).
        message: String,
    },
}

/// What every kind says of a Kubernetes request its RBAC refused:
/// `refused` is the API server's message, `retrying` when it is tried
/// again (`in 30s`).
pub fn forbidden_message(refused: &str, retrying: &str) -> String {
    format!(
        "the provider's ServiceAccount may not do what this resource needs: {refused}; grant it in the provider's RBAC (its ClusterRole or a Role of this namespace); retrying {retrying}"
    )
}

/// A connection whose config or Secrets the API server refused to let the
/// provider read (403), as the state every kind says (`Forbidden`, retried
/// after [`RETRY`]); any other error as it was.
pub fn refused_as_state<T>(
    connection: Result<Result<T, ProviderState>, Error>,
) -> Result<Result<T, ProviderState>, Error> {
    match connection {
        Err(e) => match forbidden_message_of(&e) {
            Some(message) => Ok(Err(ProviderState::Forbidden { message })),
            None => Err(e),
        },
        ok => ok,
    }
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
            Self::Forbidden { message } => Some((
                Reason::Forbidden,
                forbidden_message(message, &format!("in {}s", RETRY.as_secs())),
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
        let refused = r#"secrets "pve" is forbidden: User "x" cannot get resource "secrets""#;
        let forbidden = ProviderState::Forbidden {
            message: refused.into(),
        };
        assert_eq!(
            forbidden.problem(),
            Some((
                Reason::Forbidden,
                format!(
                    "the provider's ServiceAccount may not do what this resource needs: {refused}; grant it in the provider's RBAC (its ClusterRole or a Role of this namespace); retrying in 30s"
                )
            ))
        );
    }

    #[test]
    fn only_a_refusal_by_the_api_server_becomes_the_forbidden_state() {
        let status = |code: u16| {
            Error::Kube(kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: format!("refused {code}"),
                ..kube::core::Status::default()
            })))
        };
        let forbidden = refused_as_state::<()>(Err(status(403)));
        assert!(
            matches!(&forbidden, Ok(Err(ProviderState::Forbidden { message })) if message == "refused 403"),
            "{forbidden:?}"
        );
        assert!(refused_as_state::<()>(Err(status(500))).is_err());
        assert!(matches!(refused_as_state::<()>(Ok(Ok(()))), Ok(Ok(()))));
    }
}
