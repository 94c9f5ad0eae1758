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

impl fmt::Debug for RequestHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestHook")
    }
}
