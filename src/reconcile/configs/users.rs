//! Who uses which provider config, learned from the ProxmoxVM watch.
//!
//! [`Tap`] sees every event of the VM watch right after the controller's
//! cache applied it and asks for a pass of the configs whose user count
//! changed: a VM that appeared, was deleted or moved to another config.
//! Status updates of a VM (every few seconds while a task runs) change no
//! count and trigger nothing. [`Users`] counts from the cache and wakes a
//! config's VMs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::channel::mpsc::UnboundedSender;
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::Triggers;
use crate::api::container::CtRef;
use crate::api::meta::ConfigUser;
use crate::api::{ProxmoxContainer, ProxmoxImage, ProxmoxVM};
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::runtime::server::Readiness;

type Guarded = DeserializeGuard<ProxmoxVM>;

/// The container controller's cache, and how to wake one of them.
#[derive(Clone)]
struct Containers {
    store: Store<DeserializeGuard<ProxmoxContainer>>,
    wake: UnboundedSender<CtRef>,
}

/// The image cache, and how to wake one of them.
#[derive(Clone)]
struct Images {
    store: Store<ProxmoxImage>,
    wake: UnboundedSender<ObjectRef<ProxmoxImage>>,
}

/// The users of a config among the objects of one more kind (the CRUD
/// kinds: security groups, IP sets), and how to wake them.
trait KindUsers: Send + Sync {
    /// As `namespace/name (Kind)`.
    fn names(&self, key: &ConfigKey) -> Vec<String>;
    /// Asks for a pass of each; how many.
    fn wake(&self, key: &ConfigKey) -> usize;
    /// Whether its cache has listed (counts before that are wrong).
    fn listed(&self) -> bool;
}

/// A kind's cache and the channel that wakes its objects.
struct CacheUsers<K: kube::Resource<DynamicType = ()> + Clone + 'static> {
    store: Store<K>,
    wake: UnboundedSender<ObjectRef<K>>,
}

impl<K> KindUsers for CacheUsers<K>
where
    K: kube::Resource<DynamicType = ()> + ConfigUser + Clone + Send + Sync + 'static,
{
    fn names(&self, key: &ConfigKey) -> Vec<String> {
        self.store
            .state()
            .iter()
            .filter(|o| ConfigKey::of(o.as_ref()) == *key)
            .map(|o| {
                format!(
                    "{}/{} ({})",
                    o.namespace().unwrap_or_default(),
                    o.name_any(),
                    K::kind(&())
                )
            })
            .collect()
    }

    fn listed(&self) -> bool {
        futures::FutureExt::now_or_never(self.store.wait_until_ready()).is_some_and(|r| r.is_ok())
    }

    fn wake(&self, key: &ConfigKey) -> usize {
        let mut n = 0;
        for o in self.store.state() {
            if ConfigKey::of(o.as_ref()) == *key {
                n += 1;
                let _ = self.wake.unbounded_send(ObjectRef::from_obj(o.as_ref()));
            }
        }
        n
    }
}

/// The VMs of each config, from the VM controller's cache (and its
/// containers, from the container controller's).
#[derive(Clone)]
pub struct Users {
    store: Store<Guarded>,
    containers: Option<Containers>,
    images: Option<Images>,
    others: Vec<Arc<dyn KindUsers>>,
    listed: Arc<AtomicBool>,
    wake: UnboundedSender<ObjectRef<Guarded>>,
}

impl Users {
    /// Users from `store`, filled by the watch [`Tap`] sees; `wake` asks the
    /// VM controller for passes.
    pub fn new(store: Store<Guarded>, wake: UnboundedSender<ObjectRef<Guarded>>) -> Self {
        Self {
            store,
            containers: None,
            images: None,
            others: vec![],
            listed: Arc::new(AtomicBool::new(false)),
            wake,
        }
    }

    /// Counts the ProxmoxContainers of `store` as users too (a config they
    /// use is not released while one is left) and wakes them with the
    /// config's VMs through `wake`.
    pub fn with_containers(
        mut self,
        store: Store<DeserializeGuard<ProxmoxContainer>>,
        wake: UnboundedSender<CtRef>,
    ) -> Self {
        self.containers = Some(Containers { store, wake });
        self
    }

    /// Counts the ProxmoxImages of `store` as users too (an image deletes
    /// its files through its config, so the config is not released while
    /// one is left) and wakes them with the config's VMs through `wake`.
    pub fn with_images(
        mut self,
        store: Store<ProxmoxImage>,
        wake: UnboundedSender<ObjectRef<ProxmoxImage>>,
    ) -> Self {
        self.images = Some(Images { store, wake });
        self
    }

    /// Counts the objects of `store` (a kind of its own cache) as users
    /// too, and wakes them with the config's VMs through `wake`.
    pub fn with_kind<K>(mut self, store: Store<K>, wake: UnboundedSender<ObjectRef<K>>) -> Self
    where
        K: kube::Resource<DynamicType = ()> + ConfigUser + Clone + Send + Sync + 'static,
    {
        self.others.push(Arc::new(CacheUsers { store, wake }));
        self
    }

    /// The images referring to `key`, as `namespace/name (ProxmoxImage)`.
    fn images_of(&self, key: &ConfigKey) -> Vec<String> {
        let Some(images) = &self.images else {
            return vec![];
        };
        images
            .store
            .state()
            .iter()
            .filter(|image| ConfigKey::of(image.as_ref()) == *key)
            .map(|image| {
                format!(
                    "{}/{} (ProxmoxImage)",
                    image.namespace().unwrap_or_default(),
                    image.name_any()
                )
            })
            .collect()
    }

    /// The containers referring to `key`, with their `namespace/name`.
    fn containers_of(&self, key: &ConfigKey) -> Vec<(String, CtRef)> {
        let Some(containers) = &self.containers else {
            return vec![];
        };
        containers
            .store
            .state()
            .iter()
            .filter_map(|g| match &g.0 {
                Ok(ct) if ConfigKey::of(ct) == *key => Some((
                    format!(
                        "{}/{} (ProxmoxContainer)",
                        ct.namespace().unwrap_or_default(),
                        ct.name_any()
                    ),
                    ObjectRef::from_obj(g.as_ref()),
                )),
                Ok(_) | Err(_) => None,
            })
            .collect()
    }

    /// Whether the caches hold every VM and image (counts before that are
    /// wrong).
    pub fn listed(&self) -> bool {
        // An image or pool cache not filled yet would count none.
        let images = self.images.as_ref().is_none_or(|images| {
            futures::FutureExt::now_or_never(images.store.wait_until_ready())
                .is_some_and(|r| r.is_ok())
        });
        let others = self.others.iter().all(|o| o.listed());
        images && others && self.listed.load(Ordering::SeqCst)
    }

    /// The VMs referring to `key`.
    pub fn of(&self, key: &ConfigKey) -> Vec<ObjectRef<Guarded>> {
        self.store
            .state()
            .iter()
            .filter(|g| matches!(&g.0, Ok(vm) if ConfigKey::of(vm) == *key))
            .map(|g| ObjectRef::from_obj(g.as_ref()))
            .collect()
    }

    /// The VMs (and containers and images) referring to `key` as
    /// `namespace/name`, sorted.
    pub fn names(&self, key: &ConfigKey) -> Vec<String> {
        let mut names: Vec<String> = self
            .of(key)
            .into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
            .collect();
        names.extend(self.containers_of(key).into_iter().map(|(name, _)| name));
        names.extend(self.images_of(key));
        names.extend(self.others.iter().flat_map(|o| o.names(key)));
        names.sort();
        names
    }

    /// Asks for a pass of every VM, container and image referring to
    /// `key`; returns how many.
    pub fn wake(&self, key: &ConfigKey) -> usize {
        let refs = self.of(key);
        for r in &refs {
            // Closed only when the VM controller stopped: nothing to wake.
            let _ = self.wake.unbounded_send(r.clone());
        }
        let containers = self.containers_of(key);
        if let Some(c) = &self.containers {
            for (_, r) in &containers {
                let _ = c.wake.unbounded_send(r.clone());
            }
        }
        // Images too: a config gained, created or fixed is the change an
        // image waiting on it waits for (see `managed::envelope`).
        let mut images = 0;
        if let Some(i) = &self.images {
            for image in i.store.state() {
                if ConfigKey::of(image.as_ref()) == *key {
                    images += 1;
                    let _ = i.wake.unbounded_send(ObjectRef::from_obj(image.as_ref()));
                }
            }
        }
        let others: usize = self.others.iter().map(|o| o.wake(key)).sum();
        refs.len() + containers.len() + images + others
    }
}

/// Watches the VM watch go by; see the module documentation.
pub struct Tap {
    triggers: Triggers,
    listed: Arc<AtomicBool>,
    readiness: Arc<Readiness>,
    /// The config of every VM in the cache, by UID.
    configs: HashMap<String, ConfigKey>,
    /// The same, while a (re-)list is under way.
    relisting: HashMap<String, ConfigKey>,
}

impl Tap {
    /// A tap feeding `users`' counts and `triggers`; it reports the cache
    /// filled to `readiness`.
    pub fn new(users: &Users, triggers: Triggers, readiness: Arc<Readiness>) -> Self {
        Self {
            triggers,
            listed: Arc::clone(&users.listed),
            readiness,
            configs: HashMap::new(),
            relisting: HashMap::new(),
        }
    }

    /// Sees one event of the VM watch (after the cache applied it).
    pub fn see(&mut self, event: &Result<watcher::Event<Guarded>, watcher::Error>) {
        let Ok(event) = event else { return };
        match event {
            watcher::Event::Apply(vm) => {
                if let Some((uid, key)) = identify(vm) {
                    match self.configs.insert(uid, key.clone()) {
                        Some(old) if old == key => {}
                        Some(old) => {
                            self.triggers.send(&old);
                            self.triggers.send(&key);
                        }
                        None => self.triggers.send(&key),
                    }
                }
            }
            watcher::Event::Delete(vm) => {
                if let Some(key) = vm.uid().and_then(|uid| self.configs.remove(&uid)) {
                    self.triggers.send(&key);
                }
            }
            watcher::Event::Init => self.relisting.clear(),
            watcher::Event::InitApply(vm) => {
                if let Some((uid, key)) = identify(vm) {
                    self.relisting.insert(uid, key);
                }
            }
            watcher::Event::InitDone => {
                let before = std::mem::take(&mut self.configs);
                self.configs = std::mem::take(&mut self.relisting);
                // Every config that had or has users: a list after a lost
                // watch may have missed creations and deletions.
                let keys: HashSet<&ConfigKey> =
                    before.values().chain(self.configs.values()).collect();
                for key in keys {
                    self.triggers.send(key);
                }
                if !self.listed.swap(true, Ordering::SeqCst) {
                    tracing::info!("ProxmoxVM cache filled");
                }
                self.readiness.set_synced(true);
            }
        }
    }
}

/// UID and config of a VM that could be read.
fn identify(vm: &Guarded) -> Option<(String, ConfigKey)> {
    let vm = vm.0.as_ref().ok()?;
    Some((vm.uid()?, ConfigKey::of(vm)))
}
