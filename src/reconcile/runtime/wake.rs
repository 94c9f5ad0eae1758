//! Asking a kind's controller for a pass: waking a resource as soon as
//! what it waits for happened, rather than at its next timer.
//!
//! * **A task ended**: [`crate::reconcile::managed::task_watch`].
//! * **A slot freed.** The scheduler hands a node's freed import or clone
//!   slot to the resource that has waited longest for one (see
//!   `schedule::slots`); the pass that freed it wakes that resource.
//! * **A template came along, a Secret or ConfigMap changed**: the VM's
//!   own wakers ([`crate::reconcile::vm::wake`]).
//!
//! Every wake-up is an ordinary trigger of the controller: a pass of that
//! resource, which decides from what it then observes. A resource that is
//! never woken still has its timer.

use futures::channel::mpsc::UnboundedSender;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;

use crate::api::{ProxmoxContainer, ProxmoxVM};

/// A reference to a ProxmoxVM, as the controller's triggers take it.
pub type VmRef = ObjectRef<DeserializeGuard<ProxmoxVM>>;

/// The reference of a ProxmoxVM found in the cache or a watch event.
pub fn vm_ref(vm: &ProxmoxVM) -> VmRef {
    let name = ObjectRef::new(&vm.name_any());
    match vm.namespace() {
        Some(namespace) => name.within(&namespace),
        None => name,
    }
}

/// A reference to a ProxmoxContainer, as its controller's triggers take it.
pub type CtRef = ObjectRef<DeserializeGuard<ProxmoxContainer>>;

/// Asks a controller for passes: the ProxmoxVMs' (the default) or the
/// ProxmoxContainers'.
#[derive(Clone, Debug)]
pub struct Waker<
    K: kube::runtime::reflector::Lookup<DynamicType = ()> = DeserializeGuard<ProxmoxVM>,
> {
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
