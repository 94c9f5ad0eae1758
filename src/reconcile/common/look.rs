//! How deep a pass looks at what it manages: a cheap look may only
//! conclude that nothing is to be done, a full one decides.

/// How the VM was observed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Depth {
    /// Power state and lock from the VM's own `status/current`.
    #[default]
    Full,
    /// An idle VM: power state and lock from the shared cluster view (the
    /// glue falls back to [`Depth::Full`] when the view does not show it as
    /// expected). A plan from such a look may only conclude "up to date";
    /// anything else asks for a full look first
    /// ([`super::Idle::LookCloser`]).
    Idle,
}
