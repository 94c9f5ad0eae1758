//! Asking Proxmox whether a config works: an authenticated `GET /version`
//! through the config's shared client, at most once per resync interval
//! while the config and its Secrets stay the same.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::api::provider_config::ConfigReason;
use crate::reconcile::providers::{ConfigKey, Problem, Resolved};
use pve_client::{Client, Error as PveError, ErrorClass};

/// What a check found: the Proxmox VE version that answered, or why the
/// config does not work.
pub type Outcome = Result<String, Problem>;

/// A check of one config.
#[derive(Clone, Debug)]
pub struct Check {
    /// What it found.
    pub outcome: Outcome,
    /// The config or one of its Secrets changed since the last check (not
    /// set on the first check of a config).
    pub inputs_changed: bool,
    /// When to check again.
    pub next: Duration,
}

#[derive(Clone, Debug)]
struct Last {
    inputs: String,
    at: Instant,
    outcome: Outcome,
}

/// The last check of every config.
#[derive(Debug, Default)]
pub struct Probes {
    last: Mutex<HashMap<ConfigKey, Last>>,
}

impl Probes {
    /// Checks the config `key` resolved to `resolved`: the last outcome
    /// while its inputs are unchanged and younger than the config's resync
    /// interval (`unresolved_interval` when it has no client), else a
    /// fresh one. The controller never checks one config twice at once.
    pub async fn check(
        &self,
        key: &ConfigKey,
        resolved: Resolved,
        unresolved_interval: Duration,
    ) -> Check {
        let last = self.lock().get(key).cloned();
        let interval = match &resolved.connection {
            Ok(c) => c.timing.resync_interval,
            Err(_) => unresolved_interval,
        };
        let inputs_changed = last.as_ref().is_some_and(|l| l.inputs != resolved.inputs);
        if let Some(last) = last
            && !inputs_changed
            && last.at.elapsed() < interval
        {
            return Check {
                outcome: last.outcome,
                inputs_changed,
                next: interval.saturating_sub(last.at.elapsed()),
            };
        }
        let outcome = match resolved.connection {
            Ok(connection) => version(&connection.client).await,
            Err(problem) => Err(problem),
        };
        self.lock().insert(
            key.clone(),
            Last {
                inputs: resolved.inputs,
                at: Instant::now(),
                outcome: outcome.clone(),
            },
        );
        Check {
            outcome,
            inputs_changed,
            next: interval,
        }
    }

    /// Forgets a config that is gone.
    pub fn forget(&self, key: &ConfigKey) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConfigKey, Last>> {
        self.last.lock().expect("probe records poisoned")
    }
}

/// `GET /version`: any authenticated user may read it, so it tests the
/// endpoint, TLS and the credentials and nothing else.
async fn version(client: &Client) -> Outcome {
    client
        .version()
        .await
        .map(|v| v.version)
        .map_err(|e| classify(&e))
}

/// The `Ready` reason and message of a failed `GET /version`. Error
/// messages of the client never hold credentials.
fn classify(err: &PveError) -> Problem {
    let reason = match err.class() {
        ErrorClass::Credentials => ConfigReason::Unauthorized,
        ErrorClass::Tls => ConfigReason::TlsError,
        ErrorClass::Unreachable => ConfigReason::Unreachable,
        ErrorClass::Config => ConfigReason::InvalidConfig,
        ErrorClass::NotFound
        | ErrorClass::Locked
        | ErrorClass::Conflict
        | ErrorClass::AlreadyExists
        | ErrorClass::Refused => ConfigReason::ProxmoxError,
    };
    let message = if reason == ConfigReason::Unauthorized {
        format!("Proxmox refused the credentials (GET /version): {err}")
    } else {
        format!("GET /version: {err}")
    };
    Problem::new(reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_become_reasons() {
        let cases = [
            (
                PveError::Unauthorized {
                    message: "authentication failure".into(),
                },
                ConfigReason::Unauthorized,
            ),
            (
                PveError::Tls {
                    message: "server certificate fingerprint AA:.. matches none".into(),
                },
                ConfigReason::TlsError,
            ),
            (
                PveError::Transient {
                    status: None,
                    message: "connection refused".into(),
                    may_have_run: false,
                },
                ConfigReason::Unreachable,
            ),
            (
                PveError::Api {
                    status: 500,
                    message: "boom".into(),
                },
                ConfigReason::ProxmoxError,
            ),
        ];
        for (err, reason) in cases {
            let problem = classify(&err);
            assert_eq!(problem.reason, reason, "{err}");
            assert!(problem.message.contains(&err.to_string()), "{problem:?}");
        }
    }
}
