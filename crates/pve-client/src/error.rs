//! The one error type of the Proxmox client, classified so callers can act
//! (answers are classified in `classify.rs`).
//!
//! No secret is ever put into an error: messages built from server answers
//! pass through the client's redaction with every secret it knows.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::upid::Upid;

/// Result alias for the Proxmox client.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong talking to Proxmox VE.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// 401: no, wrong or expired credentials, or a missing CSRF token.
    #[error("unauthorized: {message}")]
    Unauthorized { message: String },

    /// 403: `Permission check failed (<path>, <privilege>)`.
    #[error("forbidden: {message}")]
    Forbidden {
        /// ACL path PVE checked, e.g. `/vms/100`.
        path: Option<String>,
        /// Privilege(s) PVE wanted, e.g. `VM.Allocate` or `VM.Config.Disk|VM.Config.CDROM`.
        privilege: Option<String>,
        message: String,
    },

    /// The object does not exist (404, or a 500 saying `... does not exist`).
    #[error("not found: {message}")]
    NotFound { message: String },

    /// The VM is locked: `VM is locked (<what>)` from the config lock, or a
    /// `can't lock file ... got timeout` from the flock (`what` = `flock`).
    #[error("locked ({what}): {message}")]
    Locked { what: String, message: String },

    /// The object already exists (VMID taken, file present).
    #[error("already exists: {message}")]
    AlreadyExists { message: String },

    /// The config changed since it was read: the `digest` sent with an
    /// update no longer matches (`checksum mismatch (file change by other
    /// user?)`). Re-read, recompute, and send again.
    #[error("conflict: {message}")]
    Conflict { message: String },

    /// 400: parameter verification failed, with PVE's per-parameter map.
    #[error("invalid request: {message}{}", format_errors(.errors))]
    Invalid {
        message: String,
        errors: BTreeMap<String, String>,
    },

    /// A failure worth retrying later: 5xx from a proxy hop, the
    /// AnyEvent::HTTP pseudo-statuses 595/596/597/599, connection resets and
    /// timeouts.
    #[error("transient error{}: {message}", status.map(|s| format!(" (HTTP {s})")).unwrap_or_default())]
    Transient {
        status: Option<u16>,
        message: String,
        /// Whether the request may have reached the API handler. `false`
        /// when it provably did not (connection refused, 595 from the
        /// pveproxy→pvedaemon hop): only then may a task-starting request be
        /// sent again.
        may_have_run: bool,
    },

    /// 501: the endpoint does not exist on this server (e.g. the REST
    /// `importdisk` the old provider called).
    #[error("not implemented: {message}")]
    NotImplemented { message: String },

    /// Any other error PVE raised (mostly `500 <message>` from a `die`).
    #[error("proxmox error (HTTP {status}): {message}")]
    Api { status: u16, message: String },

    /// A task ended with an exit status other than `OK` / `WARNINGS: n`.
    #[error("task {upid} failed: {exit_status}{}", format_tail(.log_tail))]
    TaskFailed {
        upid: Upid,
        exit_status: String,
        /// The last lines of the task log, oldest first.
        log_tail: Vec<String>,
    },

    /// Waiting for a task gave up; the task may still be running.
    #[error("task {upid} still running after {waited:?}")]
    TaskTimeout { upid: Upid, waited: Duration },

    /// PVE kept answering `no such task` past the grace period.
    #[error("task {upid} is unknown to node {} (no such task)", .upid.node())]
    TaskUnknown { upid: Upid },

    /// A call that must start a task answered without a UPID.
    #[error("{endpoint} returned no task id (UPID): {body}")]
    MissingUpid { endpoint: String, body: String },

    /// The server answered something the client cannot understand.
    #[error("protocol error: {message}")]
    Protocol { message: String },

    /// The TLS handshake failed (certificate not trusted, pin mismatch, ...).
    #[error("TLS error: {message}")]
    Tls { message: String },

    /// The client configuration is unusable (bad URL, CA bundle, pin).
    #[error("invalid client configuration: {message}")]
    Config { message: String },

    /// The caller cancelled a wait.
    #[error("cancelled")]
    Cancelled,

    /// The caller's [`crate::WriteGate`] closed before a write was sent:
    /// nothing was sent.
    #[error("not sent: {endpoint} (the caller may no longer write)")]
    NotSent { endpoint: String },
}

pub(crate) fn format_errors(errors: &BTreeMap<String, String>) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!(" ({})", parts.join("; "))
}

fn format_tail(tail: &[String]) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; log tail: {}", tail.join(" | "))
    }
}

/// What an [`Error`] means for the caller, worked out in one place so that
/// every caller (the provider config's probe, a pass's observation, a
/// step's dispatch) draws the same line between "the config is wrong" and
/// "Proxmox did not answer this time".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The credentials were refused (401) or lack a privilege (403).
    Credentials,
    /// The TLS handshake failed: the server is not who the config trusts.
    Tls,
    /// The client configuration itself is unusable (URL, CA bundle, pin).
    Config,
    /// The request may succeed later: a proxy hop, a reset, a timeout.
    Unreachable,
    /// The object does not exist.
    NotFound,
    /// The VM is locked by another operation.
    Locked,
    /// The config changed since it was read (stale `digest`).
    Conflict,
    /// The object already exists (a VMID taken, a file present).
    AlreadyExists,
    /// Proxmox understood and refused, or answered what cannot be used:
    /// retrying the same request will not help.
    Refused,
}

impl ErrorClass {
    /// Whether the error says the provider config (credentials, TLS, the
    /// client configuration) is what is wrong, as opposed to Proxmox or
    /// the request.
    pub fn config_is_wrong(self) -> bool {
        match self {
            Self::Credentials | Self::Tls | Self::Config => true,
            Self::Unreachable
            | Self::NotFound
            | Self::Locked
            | Self::Conflict
            | Self::AlreadyExists
            | Self::Refused => false,
        }
    }
}

impl Error {
    /// The error's class (see [`ErrorClass`]).
    pub fn class(&self) -> ErrorClass {
        match self {
            Error::Unauthorized { .. } | Error::Forbidden { .. } => ErrorClass::Credentials,
            Error::Tls { .. } => ErrorClass::Tls,
            Error::Config { .. } => ErrorClass::Config,
            Error::Transient { .. } => ErrorClass::Unreachable,
            Error::NotFound { .. } | Error::TaskUnknown { .. } => ErrorClass::NotFound,
            Error::Locked { .. } => ErrorClass::Locked,
            Error::Conflict { .. } => ErrorClass::Conflict,
            Error::AlreadyExists { .. } => ErrorClass::AlreadyExists,
            Error::Invalid { .. }
            | Error::NotImplemented { .. }
            | Error::Api { .. }
            | Error::TaskFailed { .. }
            | Error::TaskTimeout { .. }
            | Error::MissingUpid { .. }
            | Error::Protocol { .. }
            | Error::Cancelled
            | Error::NotSent { .. } => ErrorClass::Refused,
        }
    }

    /// Whether trying the same request again later may succeed: transient
    /// transport/proxy errors and locks. Task failures and timeouts are not
    /// retryable *requests*; the caller decides about a new task.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Transient { .. } | Error::Locked { .. })
    }

    /// Whether the error says the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// Whether the error is a lock conflict.
    pub fn is_locked(&self) -> bool {
        matches!(self, Error::Locked { .. })
    }

    /// The HTTP status the error came with, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Unauthorized { .. } => Some(401),
            Error::Forbidden { .. } => Some(403),
            Error::Invalid { .. } => Some(400),
            Error::NotImplemented { .. } => Some(501),
            Error::Transient { status, .. } => *status,
            Error::Api { status, .. } => Some(*status),
            Error::NotFound { .. }
            | Error::Locked { .. }
            | Error::AlreadyExists { .. }
            | Error::Conflict { .. }
            | Error::TaskFailed { .. }
            | Error::TaskTimeout { .. }
            | Error::TaskUnknown { .. }
            | Error::MissingUpid { .. }
            | Error::Protocol { .. }
            | Error::Tls { .. }
            | Error::Config { .. }
            | Error::Cancelled
            | Error::NotSent { .. } => None,
        }
    }

    pub(crate) fn protocol(message: impl Into<String>) -> Self {
        Error::Protocol {
            message: message.into(),
        }
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Error::Config {
            message: message.into(),
        }
    }
}
