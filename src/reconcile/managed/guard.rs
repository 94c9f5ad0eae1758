//! A watch of a kind whose objects may not decode, decoded once.
//!
//! kube's `DeserializeGuard<K>` keeps one malformed object from stalling a
//! watch: it reads the object into a generic tree, clones the tree, and
//! decodes `K` from the clone (the metadata from the original when that
//! fails). Every watch event of a ProxmoxVM, each status write's echo among
//! them, was built three times over, its managed fields with it (every
//! writer's field sets, often larger than the spec, which the cache then
//! drops unread): 8.6% of the provider's CPU over a 1,000-VM run
//! (`make profile`, docs/scaling.md). [`Guarded`] reads the tree once,
//! leaves the managed fields out, decodes the metadata, then the rest of
//! `K` by moving out of the tree; when the rest does not decode, the
//! metadata is already there for the `InvalidObject`. What reaches the
//! cache and the passes is the same `DeserializeGuard<K>`, without
//! `managedFields`.

use std::borrow::Cow;
use std::fmt::Debug;

use futures::{Stream, TryStreamExt};
use kube::Resource;
use kube::api::ObjectMeta;
use kube::core::error_boundary::InvalidObject;
use kube::core::{DeserializeGuard, NamespaceResourceScope};
use kube::runtime::watcher;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use super::watch::scoped;

/// `DeserializeGuard<K>` as the watch decodes it (see the module).
#[derive(Clone, Debug)]
pub struct Guarded<K>(DeserializeGuard<K>);

impl<'de, K> Deserialize<'de> for Guarded<K>
where
    K: DeserializeOwned + Resource,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut object = Value::deserialize(deserializer)?;
        let metadata = match object.get_mut("metadata") {
            Some(Value::Object(metadata)) => {
                metadata.remove("managedFields");
                // Decoded once, moved out: `K` is decoded with an empty one.
                std::mem::replace(metadata, Map::new())
            }
            _ => Map::new(),
        };
        let metadata =
            ObjectMeta::deserialize(Value::Object(metadata)).map_err(D::Error::custom)?;
        let guarded = match K::deserialize(object) {
            Ok(mut decoded) => {
                *decoded.meta_mut() = metadata;
                Ok(decoded)
            }
            Err(error) => Err(InvalidObject {
                error: error.to_string(),
                metadata,
            }),
        };
        Ok(Self(DeserializeGuard(guarded)))
    }
}

impl<K> Guarded<K> {
    /// The object as the cache and the passes take it.
    pub fn into_inner(self) -> DeserializeGuard<K> {
        self.0
    }
}

impl<K: Resource> Resource for Guarded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// A watch of `K` in all namespaces or only `namespace`, its objects
/// decoded through [`Guarded`], handed on as `DeserializeGuard<K>`.
pub fn watch<K>(
    kube: &kube::Client,
    namespace: Option<&str>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<DeserializeGuard<K>>>> + Send + use<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + Sync
        + 'static,
{
    watcher(scoped::<Guarded<K>>(kube, namespace), config).map_ok(unguard)
}

/// The event with its objects as `DeserializeGuard<K>` (moved, not copied).
fn unguard<K>(event: watcher::Event<Guarded<K>>) -> watcher::Event<DeserializeGuard<K>> {
    use watcher::Event;
    match event {
        Event::Apply(object) => Event::Apply(object.into_inner()),
        Event::Delete(object) => Event::Delete(object.into_inner()),
        Event::Init => Event::Init,
        Event::InitApply(object) => Event::InitApply(object.into_inner()),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::ResourceExt;
    use kube::core::{ObjectList, WatchEvent};
    use serde_json::json;

    use super::*;

    /// A ConfigMap as the API server sends it; `data` malformed unless
    /// its values are strings.
    fn map(name: &str, data: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                         "resourceVersion": "7", "labels": {"app": "x"},
                         "managedFields": [{"manager": "kubectl", "operation": "Apply",
                                            "fieldsV1": {"f:data": {"f:a": {}}}}]},
            "data": data,
        })
    }

    #[test]
    fn a_watch_event_decodes_as_kubes_guard_does_less_its_managed_fields() {
        for object in [map("good", json!({"a": "1"})), map("bad", json!({"a": 1}))] {
            // As kube's client reads a watch: one JSON line per event.
            let line = json!({"type": "MODIFIED", "object": object}).to_string();
            let WatchEvent::Modified(ours) =
                serde_json::from_str::<WatchEvent<Guarded<ConfigMap>>>(&line).unwrap()
            else {
                panic!("a MODIFIED event");
            };
            let ours = ours.into_inner();
            let mut theirs: DeserializeGuard<ConfigMap> = serde_json::from_value(object).unwrap();
            assert!(theirs.meta().managed_fields.is_some());
            theirs.meta_mut().managed_fields = None;
            assert_eq!(
                ours.meta(),
                theirs.meta(),
                "the same metadata, less managedFields"
            );
            match (&ours.0, &theirs.0) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(a), Err(_)) => assert!(a.error.contains("invalid type"), "{}", a.error),
                _ => panic!("decoded alike, or refused alike: {ours:?} against {theirs:?}"),
            }
        }
    }

    #[test]
    fn a_malformed_object_in_a_list_keeps_its_metadata_and_the_others() {
        let list = json!({
            "apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9"},
            "items": [map("a", json!({"k": "v"})), map("b", json!(["not", "a", "map"])),
                      map("c", json!({}))],
        })
        .to_string();
        let list: ObjectList<Guarded<ConfigMap>> = serde_json::from_str(&list).unwrap();
        let items: Vec<DeserializeGuard<ConfigMap>> =
            list.items.into_iter().map(Guarded::into_inner).collect();
        let seen: Vec<(String, bool)> = items.iter().map(|g| (g.name_any(), g.0.is_ok())).collect();
        assert_eq!(
            seen,
            [("a".into(), true), ("b".into(), false), ("c".into(), true)]
        );
        let Err(invalid) = &items[1].0 else {
            panic!("b is malformed");
        };
        assert_eq!(invalid.metadata.uid.as_deref(), Some("uid-b"));
        assert_eq!(invalid.metadata.labels.as_ref().unwrap()["app"], "x");
        assert!(invalid.metadata.managed_fields.is_none());
    }
}
