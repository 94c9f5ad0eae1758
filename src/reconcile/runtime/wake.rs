//! Asking a kind's controller for a pass: waking a resource as soon as
//! what it waits for happened, rather than at its next timer.
//!
//! * **A task ended**: [`crate::reconcile::managed::task_watch`].
//! * **A slot freed.** The scheduler hands a node's freed import or clone
//!   slot to the resource that has waited longest for one (see
//!   `schedule::slots`); the pass that freed it wakes that resource.
//! * **A template came along, a Secret or ConfigMap changed**: the VM's
//!   own wakers (`vm::wake`, registered by `controllers.rs`).
//!
//! Every wake-up is an ordinary trigger of the controller: a pass of that
//! resource, which decides from what it then observes. A resource that is
//! never woken still has its timer.

use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;

/// Asks a controller for passes of its resources (`K`: what its cache
/// holds, e.g. `DeserializeGuard<ProxmoxVM>`).
#[derive(Clone, Debug)]
pub struct Waker<K: kube::runtime::reflector::Lookup<DynamicType = ()>> {
    sender: Option<UnboundedSender<ObjectRef<K>>>,
}

impl<K: kube::runtime::reflector::Lookup<DynamicType = ()>> Waker<K> {
    /// Wakes through `sender` (the controller's extra trigger stream).
    pub fn new(sender: UnboundedSender<ObjectRef<K>>) -> Self {
        Self {
            sender: Some(sender),
        }
    }

    /// A waker that wakes nothing (no controller runs).
    pub fn none() -> Self {
        Self { sender: None }
    }

    /// Asks for a pass of `vm`.
    pub fn wake(&self, vm: ObjectRef<K>) {
        if let Some(sender) = &self.sender {
            // Closed only when the controller stopped: nothing to wake.
            let _ = sender.unbounded_send(vm);
        }
    }
}
