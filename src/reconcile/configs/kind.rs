//! The two provider config kinds, seen alike: what the reconciler needs to
//! know of a `ProviderConfig` or a `ClusterProviderConfig`.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future;

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::api::provider_config::ProviderConfigStatus;
use crate::api::{ClusterProviderConfig, ProviderConfig, ProviderSettings};
use crate::reconcile::providers::ConfigKey;

/// A provider config of either kind.
pub trait ConfigObject:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// Its key.
    fn key(&self) -> ConfigKey;
    /// Its settings.
    fn settings(&self) -> &ProviderSettings;
    /// Its status, if any.
    fn status(&self) -> Option<&ProviderConfigStatus>;
    /// The API its status is written through.
    fn api(kube: &kube::Client, key: &ConfigKey) -> Api<Self>;
}

impl ConfigObject for ProviderConfig {
    fn key(&self) -> ConfigKey {
        ConfigKey::provider_config(self)
    }

    fn settings(&self) -> &ProviderSettings {
        &self.spec.settings
    }

    fn status(&self) -> Option<&ProviderConfigStatus> {
        self.status.as_ref()
    }

    fn api(kube: &kube::Client, key: &ConfigKey) -> Api<Self> {
        Api::namespaced(kube.clone(), &key.namespace)
    }
}

impl ConfigObject for ClusterProviderConfig {
    fn key(&self) -> ConfigKey {
        ConfigKey::cluster_provider_config(self)
    }

    fn settings(&self) -> &ProviderSettings {
        &self.spec.settings
    }

    fn status(&self) -> Option<&ProviderConfigStatus> {
        self.status.as_ref()
    }

    fn api(kube: &kube::Client, _key: &ConfigKey) -> Api<Self> {
        Api::all(kube.clone())
    }
}

/// The objects of a watch that appeared, changed their spec (generation),
/// were marked for deletion or were deleted. Status and other metadata
/// updates are dropped: the reconciler's own status and finalizer writes
/// must not wake it (or the VMs) again. (`predicates::generation` would
/// drop deletions too.)
pub fn spec_changes<K: Resource>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
) -> impl Stream<Item = Result<K, watcher::Error>> {
    let mut seen: HashMap<String, (i64, bool)> = HashMap::new();
    events.filter_map(move |event| {
        let passed = match event {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                let version = (
                    obj.meta().generation.unwrap_or_default(),
                    obj.meta().deletion_timestamp.is_some(),
                );
                let changed = match obj.uid() {
                    Some(uid) => seen.insert(uid, version) != Some(version),
                    None => true,
                };
                changed.then_some(Ok(obj))
            }
            Ok(watcher::Event::Delete(obj)) => {
                if let Some(uid) = obj.uid() {
                    seen.remove(&uid);
                }
                Some(Ok(obj))
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        };
        future::ready(passed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    fn config(uid: &str, generation: i64, rv: &str) -> ProviderConfig {
        let mut pc: ProviderConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProviderConfig",
            "metadata": {"name": "pve", "namespace": "ns"},
            "spec": {"endpoint": "https://pve:8006", "credentials": {"secretRef": {"name": "s"}}},
        }))
        .unwrap();
        pc.metadata.uid = Some(uid.into());
        pc.metadata.generation = Some(generation);
        pc.metadata.resource_version = Some(rv.into());
        pc
    }

    #[test]
    fn only_new_spec_changed_and_deleted_objects_pass() {
        let mut marked = config("a", 2, "5");
        marked.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let mut released = marked.clone();
        released.metadata.resource_version = Some("6".into());
        let events = vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(config("a", 1, "1"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(config("a", 1, "2"))), // status write
            Ok(watcher::Event::Apply(config("a", 2, "3"))), // spec change
            Ok(watcher::Event::Apply(config("a", 2, "4"))), // finalizer added
            Ok(watcher::Event::Apply(marked)),              // deletion requested
            Ok(watcher::Event::Apply(released)),            // finalizer removed
            Ok(watcher::Event::Delete(config("a", 2, "7"))),
            Ok(watcher::Event::Apply(config("b", 1, "8"))), // re-created
        ];
        let passed: Vec<String> = block_on(
            spec_changes(futures::stream::iter(events))
                .map(|r| r.unwrap().resource_version().unwrap())
                .collect(),
        );
        assert_eq!(passed, ["1", "3", "5", "7", "8"]);
    }
}
