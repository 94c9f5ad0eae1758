//! The suite's own Kubernetes calls, retried through the apiserver restart
//! (a harness request must not fail the run), and reading ProxmoxVMs and
//! provider configs as plain JSON (the suite checks what the API says, not
//! what the provider's types make of it).

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Api, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::support;

const GROUP: &str = "proxmox.crossplane.io";
const VERSION: &str = "v1alpha1";
/// The Lease of the provider config `name` of namespace `ns` (one per
/// config: see src/reconcile/runtime/shards.rs).
pub fn config_lease(ns: &str, name: &str) -> String {
    format!("crossplane-provider-proxmox.pc.{ns}.{name}")
}

/// Calls `call` until it succeeds (two minutes at most).
pub async fn retry<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    support::poll(what, Duration::from_secs(120), || {
        let attempt = call();
        async move { attempt.await.map_err(|e| e.to_string()) }
    })
    .await
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), plural)
}

/// ProxmoxVMs of `ns`.
pub fn vms(ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(support::client(), ns, &resource("ProxmoxVM", "proxmoxvms"))
}

/// ProxmoxContainers of `ns`.
pub fn containers(ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        support::client(),
        ns,
        &resource("ProxmoxContainer", "proxmoxcontainers"),
    )
}

/// ProviderConfigs of `ns`.
pub fn configs(ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        support::client(),
        ns,
        &resource("ProviderConfig", "providerconfigs"),
    )
}

/// Server-side applies `object` (JSON) through `api`.
pub async fn apply<K>(api: &Api<K>, object: &Value)
where
    K: Clone + DeserializeOwned + Debug,
{
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let params = PatchParams::apply(support::FIELD_MANAGER).force();
    retry(&format!("applying {name}"), || async {
        api.patch(&name, &params, &Patch::Apply(object)).await
    })
    .await;
}

/// Every object of `api` as JSON.
pub async fn list<K>(api: &Api<K>) -> Vec<Value>
where
    K: Clone + DeserializeOwned + Debug + Serialize,
{
    let listed = retry("listing", || async {
        api.list(&ListParams::default()).await
    })
    .await;
    listed
        .items
        .iter()
        .map(|o| serde_json::to_value(o).unwrap_or_default())
        .collect()
}

/// Deletes every object of `api` (already gone is fine).
pub async fn delete_all(api: &Api<DynamicObject>) {
    for object in retry("listing", || async {
        api.list(&ListParams::default()).await
    })
    .await
    .items
    {
        let name = object.name_any();
        retry(&format!("deleting {name}"), || async {
            match api.delete(&name, &DeleteParams::default()).await {
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                other => other.map(drop),
            }
        })
        .await;
    }
}

/// Who holds the Lease of the first provider config (`token`) in `ns`:
/// the "leader" of the kill plan (`None` if nobody, or if the apiserver
/// does not answer right now).
pub async fn lease_holder(ns: &str) -> Option<String> {
    Api::<Lease>::namespaced(support::client(), ns)
        .get_opt(&config_lease(ns, super::fleet::CONFIGS[0]))
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

/// The condition `type_` of an object's status.
pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether `Ready` is `True`.
pub fn is_ready(object: &Value) -> bool {
    condition(object, "Ready").is_some_and(|c| c["status"] == "True")
}

/// `metadata.name`.
pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// A ProxmoxVM's status in one line, for reports.
pub fn brief(object: &Value) -> String {
    let at = &object["status"]["atProvider"];
    let conditions: Vec<String> = object["status"]["conditions"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    format!(
                        "{}={}/{}: {}",
                        c["type"].as_str().unwrap_or_default(),
                        c["status"].as_str().unwrap_or_default(),
                        c["reason"].as_str().unwrap_or_default(),
                        c["message"].as_str().unwrap_or_default()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "vmid {} node {} task {} | {}",
        at["vmid"],
        at["node"],
        at["task"]["summary"],
        conditions.join(" | ")
    )
}
