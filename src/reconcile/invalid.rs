//! Objects that cannot be read as the types this provider knows: written
//! around the API server's validation (with an older or looser CRD
//! installed, or fields the CRD cannot check). No pass can run on them, so
//! this says so on the object itself — a ProxmoxVM gets Synced=False with
//! reason InvalidSpec, a provider config Ready=False with InvalidConfig —
//! naming the field and the error, by a merge patch of its status (a
//! server-side apply would need the whole status, which cannot be read).
//!
//! The API server validates the whole object on a status write, so an
//! object with a value of the wrong type cannot take a status at all: it
//! gets a Warning event with the same reason and message instead.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::error::Error;
use crate::api::managed::ManagedSpec;
use crate::api::{Condition, ConditionStatus, ConditionType, ProviderSettings, Reason, kinds};
use crate::reconcile::runtime::settings::{COMPONENT, FIELD_MANAGER};

/// The condition that says an object cannot be read.
#[derive(Clone, Copy, Debug)]
pub struct Verdict {
    /// `Synced` for a ProxmoxVM, `Ready` for a provider config.
    pub type_: ConditionType,
    /// `InvalidSpec`, `InvalidConfig`.
    pub reason: &'static str,
}

/// What a ProxmoxVM that cannot be read says.
pub const VM: Verdict = Verdict {
    type_: ConditionType::Synced,
    reason: "InvalidSpec",
};

/// What a provider config that cannot be read says.
pub const CONFIG: Verdict = Verdict {
    type_: ConditionType::Ready,
    reason: "InvalidConfig",
};

/// Reports the unreadable `K` that `meta` names, in the background (a
/// controller's error policy cannot wait). Failures are logged: the next
/// change of the object tries again.
pub fn report<K>(kube: &kube::Client, meta: &ObjectMeta, verdict: Verdict)
where
    K: Resource<DynamicType = ()> + DeserializeOwned + 'static,
{
    let Some(name) = meta.name.clone() else {
        return;
    };
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match &meta.namespace {
        Some(ns) => Api::namespaced_with(kube.clone(), ns, &resource),
        None => Api::all_with(kube.clone(), &resource),
    };
    let what = format!(
        "{} {}/{name}",
        K::kind(&()),
        meta.namespace.as_deref().unwrap_or_default()
    );
    tokio::spawn(async move {
        if let Err(error) = write::<K>(&api, &name, verdict).await {
            tracing::warn!(object = %what, %error, "cannot report the unreadable resource");
        }
    });
}

async fn write<K>(api: &Api<DynamicObject>, name: &str, verdict: Verdict) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let Some(object) = api.get_opt(name).await? else {
        return Ok(());
    };
    let raw = serde_json::to_value(&object).map_err(|source| Error::Serialize {
        what: "the resource",
        source,
    })?;
    let Some(why) = why_unreadable::<K>(raw.clone()) else {
        return Ok(()); // readable again: a pass will run
    };
    let message = format!("the resource cannot be read: {why}");
    let conditions = raw["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(conditions) = with_condition(conditions, verdict, &message, object.meta().generation)
    else {
        return Ok(()); // already says so: writing again would wake nobody
    };
    let patch = json!({"status": {"conditions": conditions}});
    match api
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(&patch),
        )
        .await
    {
        Err(kube::Error::Api(refused)) if refused.code == 422 => {
            let types = object.types.clone().unwrap_or_default();
            let about = (
                types.api_version.as_str(),
                types.kind.as_str(),
                object.meta(),
            );
            warn(api.clone().into_client(), about, verdict.reason, &message).await
        }
        Err(e) => Err(e.into()),
        Ok(_) => Ok(()),
    }
}

/// A Warning event about an object (API version, kind, metadata), for
/// when its status cannot be written.
pub async fn warn(
    kube: kube::Client,
    (api_version, kind, meta): (&str, &str, &ObjectMeta),
    reason: &str,
    message: &str,
) -> Result<(), Error> {
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
    let name = meta.name.clone().unwrap_or_default();
    let now = Time(Timestamp::now());
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
            name: Some(name),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            field_path: None,
        },
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        type_: Some("Warning".to_owned()),
        source: Some(EventSource {
            component: Some(COMPONENT.to_owned()),
            host: None,
        }),
        reporting_component: Some(COMPONENT.to_owned()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Event::default()
    };
    Api::<Event>::namespaced(kube, &namespace)
        .create(&PostParams::default(), &event)
        .await?;
    Ok(())
}

/// Why `raw` is not a `K`, naming the field; `None` when it is one.
pub fn why_unreadable<K>(raw: Value) -> Option<String>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let (mut path, mut error) = first_error::<K>(raw.clone())?;
    // What a spec flattens (a managed kind's `ManagedSpec`, a provider
    // config's settings) hides the path below it: read that part alone.
    if path == "spec" {
        let managed = kinds::managed().iter().any(|k| k.kind == K::kind(&()));
        let inner = if managed {
            first_error::<ManagedSpec>(raw["spec"].clone())
        } else {
            first_error::<ProviderSettings>(raw["spec"].clone())
        };
        if let Some((inner, e)) = inner {
            (path, error) = (format!("spec.{inner}"), e);
        }
    }
    Some(format!(
        "it does not match the {} schema at {path}: {error}; it was written around the API server's validation (an older CRD?): correct {path} and apply it again",
        K::kind(&())
    ))
}

fn first_error<T: DeserializeOwned>(raw: Value) -> Option<(String, String)> {
    let error = serde_path_to_error::deserialize::<_, T>(raw).err()?;
    Some((error.path().to_string(), error.inner().to_string()))
}

/// `conditions` with the verdict's condition False saying `message`;
/// `None` when it says that already.
fn with_condition(
    conditions: Vec<Value>,
    verdict: Verdict,
    message: &str,
    generation: Option<i64>,
) -> Option<Vec<Value>> {
    let is_ours = |c: &Value| c["type"] == verdict.type_.as_str();
    if conditions.iter().any(|c| {
        is_ours(c)
            && c["status"] == "False"
            && c["reason"] == verdict.reason
            && c["message"] == message
    }) {
        return None;
    }
    let mut condition = Condition::new(
        verdict.type_,
        ConditionStatus::False,
        Reason::InvalidSpec,
        message,
        Time(Timestamp::now()),
    );
    condition.reason = verdict.reason.to_owned();
    condition.observed_generation = generation;
    let mut out: Vec<Value> = conditions.into_iter().filter(|c| !is_ours(c)).collect();
    out.push(serde_json::to_value(condition).ok()?);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ProviderConfig, ProxmoxVM};

    fn vm(for_provider: Value) -> Value {
        json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"forProvider": for_provider},
        })
    }

    #[test]
    fn names_the_field_and_the_error() {
        let message = why_unreadable::<ProxmoxVM>(vm(json!({"memory": 4096}))).unwrap();
        assert!(
            message.contains(
                "ProxmoxVM schema at spec.forProvider.memory: invalid type: integer `4096`, expected a string"
            ),
            "{message}"
        );
        let message =
            why_unreadable::<ProxmoxVM>(vm(json!({"powerState": "Hibernating"}))).unwrap();
        assert!(
            message.contains("spec.forProvider.powerState: unknown variant `Hibernating`"),
            "{message}"
        );
        assert_eq!(
            why_unreadable::<ProxmoxVM>(vm(json!({"memory": "2Gi"}))),
            None
        );
        // The managed fields every kind flattens into its spec.
        let mut other = vm(json!({"memory": "2Gi"}));
        other["spec"]["providerConfigRef"] = json!({"kind": "Other", "name": "x"});
        let message = why_unreadable::<ProxmoxVM>(other).unwrap();
        assert!(
            message.contains("spec.providerConfigRef.kind: unknown variant `Other`"),
            "{message}"
        );
        let config = json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProviderConfig",
            "metadata": {"name": "pve", "namespace": "default"},
            "spec": {"endpoint": 8006, "credentials": {"secretRef": {"name": "pve"}}},
        });
        let message = why_unreadable::<ProviderConfig>(config).unwrap();
        assert!(
            message
                .contains("ProviderConfig schema at spec.endpoint: invalid type: integer `8006`"),
            "{message}"
        );
    }

    #[test]
    fn replaces_the_condition_once() {
        let ready = json!({"type": "Ready", "status": "False", "reason": "Creating", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        let first = with_condition(vec![ready.clone()], VM, "broken", Some(3)).unwrap();
        assert_eq!(first.len(), 2);
        assert_eq!(first[0], ready, "other conditions are kept");
        assert_eq!(first[1]["reason"], "InvalidSpec");
        assert_eq!(first[1]["observedGeneration"], 3);
        assert_eq!(
            with_condition(first.clone(), VM, "broken", Some(3)),
            None,
            "no second write"
        );
        assert!(with_condition(first.clone(), VM, "broken differently", Some(4)).is_some());
        let config = with_condition(first, CONFIG, "broken", None).unwrap();
        assert_eq!(config.len(), 2, "Ready replaced");
        assert_eq!(config[1]["reason"], "InvalidConfig");
    }
}
