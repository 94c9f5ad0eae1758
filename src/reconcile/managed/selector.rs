//! Kinds that choose other kinds' objects by label (an IP set's members,
//! a backup job's guests), whatever the kinds: the chosen objects of one
//! namespace, and the wake-up of the choosers an event of the chosen
//! kind's watch concerns.
//!
//! A chooser is woken when an object it selects (before or after the
//! event) appears, goes or changes what the chooser reads of it (`seen`);
//! the object's other changes (status writes every few seconds while a
//! task runs) wake none: a chooser's pass reads Proxmox, and those
//! requests count.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::channel::mpsc::UnboundedSender;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

/// The objects of `store` in `namespace` (those that match the schema),
/// as `seen` reads them (`None`: left out).
pub fn of_namespace<W, G>(
    store: &Store<DeserializeGuard<W>>,
    namespace: Option<&str>,
    seen: fn(&W) -> Option<G>,
) -> Vec<G>
where
    W: Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state()
        .into_iter()
        .filter_map(|g| match &g.0 {
            Ok(obj) if obj.namespace().as_deref() == namespace => seen(obj),
            Ok(_) | Err(_) => None,
        })
        .collect()
}

/// See the module documentation: `K` chooses objects of kind `W`, read
/// as `G`.
pub struct Waker<K, W, G>
where
    K: Resource<DynamicType = ()> + 'static,
    W: Resource<DynamicType = ()> + 'static,
{
    sender: UnboundedSender<ObjectRef<K>>,
    choosers: Store<K>,
    /// The chosen kind's cache, still holding the version before the
    /// event (the waker sees events before the cache takes them in).
    chosen: Store<DeserializeGuard<W>>,
    /// The choosers an event concerns, woken by [`Waker::flush`] once the
    /// chosen kind's cache took the event in: a chooser's pass reads that
    /// cache, and woken before it could read the old version, decide on
    /// it, and not be woken again (a resync away).
    pending: Arc<Mutex<Vec<ObjectRef<K>>>>,
    seen: fn(&W) -> Option<G>,
    selects: fn(&K, &G) -> bool,
}

impl<K, W, G> Clone for Waker<K, W, G>
where
    K: Resource<DynamicType = ()> + 'static,
    W: Resource<DynamicType = ()> + 'static,
{
    fn clone(&self) -> Self {
        Self {
            sender: self.sender.clone(),
            choosers: self.choosers.clone(),
            chosen: self.chosen.clone(),
            pending: Arc::clone(&self.pending),
            seen: self.seen,
            selects: self.selects,
        }
    }
}

impl<K, W, G> Waker<K, W, G>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    W: Resource<DynamicType = ()> + Clone + 'static,
    G: PartialEq,
{
    /// Wakes through `sender` the choosers of `choosers` that select
    /// (`selects`) objects of `chosen`, read as `seen`.
    pub fn new(
        sender: UnboundedSender<ObjectRef<K>>,
        (choosers, chosen): (Store<K>, Store<DeserializeGuard<W>>),
        seen: fn(&W) -> Option<G>,
        selects: fn(&K, &G) -> bool,
    ) -> Self {
        Self {
            sender,
            choosers,
            chosen,
            pending: Arc::default(),
            seen,
            selects,
        }
    }

    /// Wakes the choosers the events seen since the last flush concern:
    /// called once the chosen kind's cache took them in.
    pub fn flush(&self) {
        let pending = std::mem::take(&mut *self.pending());
        for chooser in pending {
            // Closed only when the controller stopped.
            let _ = self.sender.unbounded_send(chooser);
        }
    }

    fn pending(&self) -> MutexGuard<'_, Vec<ObjectRef<K>>> {
        // A panic while holding it left a list of references: still whole.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sees one event of the chosen kind's watch, before its cache takes
    /// it in; the choosers it concerns are woken by [`Waker::flush`].
    pub fn see(&self, event: &Result<watcher::Event<DeserializeGuard<W>>, watcher::Error>) {
        let (obj, gone) = match event {
            Ok(watcher::Event::Apply(obj)) => (obj, false),
            Ok(watcher::Event::Delete(obj)) => (obj, true),
            // Every chooser is looked at when its controller starts.
            Ok(watcher::Event::InitApply(_) | watcher::Event::Init | watcher::Event::InitDone)
            | Err(_) => return,
        };
        let Ok(now) = &obj.0 else { return };
        let cached = self.chosen.get(&ObjectRef::from_obj(obj));
        let before = cached
            .as_ref()
            .and_then(|old| old.0.as_ref().ok())
            .and_then(self.seen);
        let after = if gone { None } else { (self.seen)(now) };
        if before == after {
            return;
        }
        let namespace = now.namespace();
        for chooser in self.choosers.state() {
            if chooser.namespace() != namespace {
                continue;
            }
            let selects = |g: &Option<G>| g.as_ref().is_some_and(|g| (self.selects)(&chooser, g));
            if selects(&before) || selects(&after) {
                self.pending().push(ObjectRef::from_obj(chooser.as_ref()));
            }
        }
    }
}

/// The ProxmoxVMs and ProxmoxContainers of `namespace` whose firewall
/// rules name `name` by `names` (the security groups or the IP sets they
/// name), as `ProxmoxVM <name>`, sorted: what holds that object's
/// deletion.
pub fn firewall_users(
    (vms, containers): (
        &Store<DeserializeGuard<crate::api::ProxmoxVM>>,
        &Store<DeserializeGuard<crate::api::ProxmoxContainer>>,
    ),
    namespace: Option<&str>,
    name: &str,
    names: fn(&crate::api::firewall::GuestFirewall) -> Vec<&str>,
) -> Vec<String> {
    let mut out: Vec<(String, crate::api::firewall::GuestFirewall)> =
        of_namespace(vms, namespace, |vm: &crate::api::ProxmoxVM| {
            Some((
                format!("ProxmoxVM {}", vm.name_any()),
                vm.spec.for_provider.firewall.clone()?,
            ))
        });
    out.extend(of_namespace(
        containers,
        namespace,
        |ct: &crate::api::ProxmoxContainer| {
            Some((
                format!("ProxmoxContainer {}", ct.name_any()),
                ct.spec.for_provider.firewall.clone()?,
            ))
        },
    ));
    let mut out: Vec<String> = out
        .into_iter()
        .filter(|(_, fw)| names(fw).contains(&name))
        .map(|(who, _)| who)
        .collect();
    out.sort();
    out
}
