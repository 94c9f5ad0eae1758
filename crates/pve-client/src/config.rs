//! Client configuration: endpoint, credentials, TLS, limits, retries, tasks.
//!
//! One [`ClientConfig`] per ProviderConfig. Every knob has a default that is
//! safe against a real PVE host; [`ClientConfig::new`] needs only the URL and
//! the credentials.

use std::time::Duration;

use url::Url;

use crate::error::{Error, Result};
use crate::hook::{RequestHook, WriteGate};
use crate::secret::Secret;
use crate::tls::TlsOptions;

/// How the client authenticates.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// An API token: `Authorization: PVEAPIToken=<token_id>=<secret>`.
    /// No ticket round-trip, no CSRF token.
    Token {
        /// `user@realm!tokenid`
        token_id: String,
        secret: Secret,
    },
    /// User and password: a ticket from `POST /access/ticket`, sent as the
    /// `PVEAuthCookie` cookie, with `CSRFPreventionToken` on writes; renewed
    /// after [`AuthOptions::ticket_refresh_after`].
    Password {
        /// `user@realm`, e.g. `root@pam`
        username: String,
        password: Secret,
    },
}

impl Credentials {
    /// Parses the `user@realm!tokenid=secret` form users copy from the GUI.
    pub fn token_from_str(s: &str) -> Result<Self> {
        // PVE splits at the last '=' (the secret is a UUID without '=').
        let (id, secret) = s
            .rsplit_once('=')
            .ok_or_else(|| Error::config("API token must look like user@realm!tokenid=secret"))?;
        if !id.contains('@') || !id.contains('!') || secret.is_empty() {
            return Err(Error::config(
                "API token must look like user@realm!tokenid=secret",
            ));
        }
        Ok(Credentials::Token {
            token_id: id.to_owned(),
            secret: Secret::new(secret),
        })
    }
}

/// Ticket handling.
#[derive(Clone, Debug)]
pub struct AuthOptions {
    /// Age after which a ticket is renewed. PVE tickets live 2 h; renewing at
    /// 1 h leaves a wide margin for clock skew and long-running callers.
    pub ticket_refresh_after: Duration,
}

impl Default for AuthOptions {
    fn default() -> Self {
        Self {
            ticket_refresh_after: Duration::from_secs(60 * 60),
        }
    }
}

/// Per-client limits, so many resources cannot flood one Proxmox host.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Requests in flight at once. pvedaemon has 3 workers by default; a
    /// few more in flight keeps GETs (served by pveproxy) flowing.
    pub max_concurrent_requests: usize,
    /// Sustained request rate (requests per second).
    pub requests_per_second: f64,
    /// Burst allowed above the sustained rate.
    pub burst: u32,
    /// Timeout for one HTTP request, from send to the end of the body.
    /// Above PVE's 30 s proxy inactivity timeout, so the server's 596 arrives
    /// before ours fires.
    pub request_timeout: Duration,
    /// TCP + TLS connect timeout.
    pub connect_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent_requests: 8,
            requests_per_second: 20.0,
            burst: 40,
            request_timeout: Duration::from_secs(65),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Bounded, jittered exponential backoff. See [`crate::retry`] for
/// exactly which requests are retried on what.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Total attempts including the first; 1 disables retries.
    pub max_attempts: u32,
    /// Delay before the first retry (before jitter).
    pub base_delay: Duration,
    /// Upper bound of any one delay.
    pub max_delay: Duration,
    /// Also retry `Locked` answers (`VM is locked`, `can't lock file`). Off
    /// for callers that prefer to see the lock at once and requeue.
    pub retry_locked: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            retry_locked: true,
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }
}

/// How task observation asks the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ObserveMode {
    /// One `GET /nodes/{node}/tasks` per node per [`TaskOptions::list_every`]
    /// answers for every task in flight there, and for those that ended.
    #[default]
    Batched,
    /// One `GET .../tasks/{upid}/status` per task per observation.
    PerTask,
}

/// Task polling and waiting.
#[derive(Clone, Debug)]
pub struct TaskOptions {
    /// How often a waiting caller polls, and the longest the batched
    /// observer reuses one task list.
    pub poll_interval: Duration,
    /// How long the batched observer reuses one node's task list (at most
    /// `poll_interval`). One request per node answers for every task there,
    /// so asking it often costs little, and a task's end is known sooner:
    /// the next step (a freed import slot's next create among them) waits
    /// for it.
    pub list_every: Duration,
    /// How long [`crate::Client::wait_task`] waits before giving up.
    pub task_timeout: Duration,
    /// How long `400 no such task` right after dispatch means "not visible
    /// yet" rather than "unknown task".
    pub not_visible_grace: Duration,
    /// Log lines kept with a failed task.
    pub log_tail_lines: u32,
    /// Observation strategy.
    pub observe_mode: ObserveMode,
    /// How long finished-task results stay cached in the observer.
    pub retain_finished: Duration,
    /// A running task's log is read for progress at most this often
    /// (progress costs a request per task; the batched list costs none).
    pub progress_every: Duration,
}

impl Default for TaskOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(3),
            list_every: Duration::from_secs(1),
            task_timeout: Duration::from_secs(10 * 60),
            not_visible_grace: Duration::from_secs(30),
            log_tail_lines: 20,
            observe_mode: ObserveMode::Batched,
            retain_finished: Duration::from_secs(15 * 60),
            progress_every: Duration::from_secs(15),
        }
    }
}

/// Everything needed to build a [`crate::Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// `https://host:8006` (a trailing `/api2/json` is accepted and ignored).
    pub endpoint: Url,
    pub credentials: Credentials,
    pub tls: TlsOptions,
    pub auth: AuthOptions,
    pub limits: Limits,
    pub retry: RetryPolicy,
    pub tasks: TaskOptions,
    /// Called after every HTTP exchange (metrics); none by default.
    pub request_hook: Option<RequestHook>,
    /// Asked before each write goes out; none by default (always open).
    pub write_gate: Option<WriteGate>,
    /// Who sends the requests (a replica's identity), added to the
    /// `User-Agent` as `crossplane-provider-proxmox/<version> (<agent>)`.
    pub agent: Option<String>,
}

impl ClientConfig {
    /// A configuration with safe defaults: TLS verified against the system
    /// roots, default limits, retries and task timings.
    pub fn new(endpoint: &str, credentials: Credentials) -> Result<Self> {
        let endpoint = Url::parse(endpoint)
            .map_err(|e| Error::config(format!("invalid endpoint URL {endpoint:?}: {e}")))?;
        if !matches!(endpoint.scheme(), "https" | "http") {
            return Err(Error::config("endpoint URL must be https:// (or http://)"));
        }
        if endpoint.host_str().is_none() {
            return Err(Error::config("endpoint URL has no host"));
        }
        Ok(Self {
            endpoint,
            credentials,
            tls: TlsOptions::default(),
            auth: AuthOptions::default(),
            limits: Limits::default(),
            retry: RetryPolicy::default(),
            tasks: TaskOptions::default(),
            request_hook: None,
            write_gate: None,
            agent: None,
        })
    }

    /// The `.../api2/json/` base every path is joined to.
    pub(crate) fn api_base(&self) -> Url {
        let mut base = self.endpoint.clone();
        let path = base.path().trim_end_matches('/');
        let path = path.strip_suffix("/api2/json").unwrap_or(path);
        base.set_path(&format!("{path}/api2/json/"));
        base.set_query(None);
        base.set_fragment(None);
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> Credentials {
        Credentials::token_from_str("ci@pve!prov=0b7a-uuid").unwrap()
    }

    #[test]
    fn api_base_is_normalised() {
        for url in [
            "https://pve:8006",
            "https://pve:8006/",
            "https://pve:8006/api2/json",
            "https://pve:8006/api2/json/",
        ] {
            let c = ClientConfig::new(url, token()).unwrap();
            assert_eq!(
                c.api_base().as_str(),
                "https://pve:8006/api2/json/",
                "{url}"
            );
        }
        let c = ClientConfig::new("https://lb.example/pve/", token()).unwrap();
        assert_eq!(c.api_base().as_str(), "https://lb.example/pve/api2/json/");
        assert!(ClientConfig::new("ftp://pve", token()).is_err());
        assert!(ClientConfig::new("not a url", token()).is_err());
    }

    #[test]
    fn token_parsing_splits_at_last_equals_and_redacts() {
        let Credentials::Token { token_id, secret } = token() else {
            panic!("expected a token")
        };
        assert_eq!(token_id, "ci@pve!prov");
        assert_eq!(secret.expose(), "0b7a-uuid");
        assert!(!format!("{:?}", token()).contains("0b7a"));
        assert!(Credentials::token_from_str("no-equals").is_err());
        assert!(Credentials::token_from_str("user@pve=secret").is_err());
        assert!(Credentials::token_from_str("user@pve!t=").is_err());
    }

    #[test]
    fn defaults_match_the_design() {
        let t = TaskOptions::default();
        assert_eq!(t.poll_interval, Duration::from_secs(3));
        assert_eq!(t.task_timeout, Duration::from_secs(600));
        assert!(AuthOptions::default().ticket_refresh_after < Duration::from_secs(2 * 3600));
    }
}
