//! A Kubernetes event a plan asks to publish, whatever the kind.

/// A Kubernetes event to publish about the resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// CamelCase reason, e.g. `TaskSucceeded`.
    pub reason: &'static str,
    /// Human text.
    pub note: String,
}
