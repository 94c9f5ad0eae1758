//! A hook called after every HTTP exchange, for metrics.
//!
//! The client knows nothing of Prometheus; whoever builds it may pass a
//! [`RequestHook`] in [`crate::ClientConfig::request_hook`] and count
//! what it is told.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// One finished HTTP exchange. Carries no parameter values, so no secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The path template, e.g. `/nodes/{node}/qemu/{vmid}/config`.
    pub path: &'a str,
    /// The HTTP status, or `None` when no answer came (connection error,
    /// timeout, TLS failure).
    pub status: Option<u16>,
    /// From sending to the end of the body.
    pub elapsed: Duration,
}

/// A callback for every HTTP exchange (each retry attempt counts).
#[derive(Clone)]
pub struct RequestHook(Arc<dyn Fn(&RequestRecord<'_>) + Send + Sync>);

impl RequestHook {
    /// Wraps a callback. It runs on the request's task: keep it cheap.
    pub fn new(f: impl Fn(&RequestRecord<'_>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Runs the callback for one exchange (the client does, for every one).
    pub fn call(&self, record: &RequestRecord<'_>) {
        (self.0)(record);
    }
}

/// Asked right before each write (any method but `GET`) is sent, after
/// the limiter gave it a slot: `false` and nothing is sent
/// ([`crate::Error::NotSent`]). The caller's last word on whether it may
/// still write: a check made before the request waited for its slot (or
/// before the process was paused) may no longer hold when it goes out.
#[derive(Clone)]
pub struct WriteGate(Arc<dyn Fn() -> bool + Send + Sync>);

impl WriteGate {
    /// Wraps a check. It runs on the request's task: keep it cheap.
    pub fn new(f: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Whether a write may go out now.
    pub fn open(&self) -> bool {
        (self.0)()
    }
}

impl fmt::Debug for WriteGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WriteGate")
    }
}

impl fmt::Debug for RequestHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestHook")
    }
}
