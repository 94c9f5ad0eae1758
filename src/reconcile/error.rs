//! The controller's errors: what makes a pass fail (and retry with backoff)
//! or the controller stop. Proxmox trouble is not among them: it becomes a
//! condition on the resource.

/// An error of the controller layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),

    /// A ProxmoxVM does not match the types this provider knows.
    #[error("ProxmoxVM {name} cannot be read: {message}")]
    InvalidObject {
        /// `namespace/name`.
        name: String,
        /// The deserialization error.
        message: String,
    },

    /// Something could not be serialized (a bug).
    #[error("cannot serialize {what}: {source}")]
    Serialize {
        /// What.
        what: &'static str,
        /// Why.
        source: serde_json::Error,
    },

    /// The metrics and health endpoint could not be served.
    #[error("cannot serve metrics on {addr}: {source}")]
    Server {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },

    /// This replica cannot prove it holds the provider config's Lease (lost,
    /// handed over, or past its renew deadline): nothing is written for it.
    #[error("not holding the Lease of {config}: nothing is written for it")]
    Fenced {
        /// The config.
        config: String,
    },
}

impl Error {
    /// A short, stable label for the `kind` of the error metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Kube(kube::Error::Api(status)) if status.code == 409 => "kube_conflict",
            Self::Kube(kube::Error::Api(_)) => "kube_api",
            Self::Kube(_) => "kube_transport",
            Self::InvalidObject { .. } => "invalid_object",
            Self::Serialize { .. } => "serialize",
            Self::Server { .. } => "server",
            Self::Fenced { .. } => "fenced",
        }
    }
}

/// Whether a Kubernetes error is a 404.
pub(crate) fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

/// Whether a Kubernetes error is a 403 (RBAC).
pub(crate) fn is_forbidden(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 403)
}

/// The API server's message when `err` is its refusal (403) of a request:
/// it names the user, verb, resource, namespace and name.
pub(crate) fn forbidden_message(err: &Error) -> Option<String> {
    match err {
        Error::Kube(kube::Error::Api(s)) if s.code == 403 => Some(s.message.clone()),
        Error::Kube(_)
        | Error::InvalidObject { .. }
        | Error::Serialize { .. }
        | Error::Server { .. }
        | Error::Fenced { .. } => None,
    }
}

/// Whether a Kubernetes error is a 422 (the object breaks its schema).
pub(crate) fn is_invalid(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 422)
}

/// Whether a Kubernetes error is a 409 (stale resourceVersion).
pub(crate) fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 409)
}
