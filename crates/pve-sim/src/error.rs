//! Errors of starting and running a simulator instance (not API errors:
//! those are [`crate::http::ApiError`] and become HTTP responses).

/// Why a simulator could not start (or refused a control request).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("invalid fault rule: {0}")]
    FaultRule(String),
    #[error("TLS setup failed: {0}")]
    Tls(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}
