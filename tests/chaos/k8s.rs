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

const GROUP: &str = "proxmox.m.crossplane.io";
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

/// The wait a ProxmoxVM announced in its `Synced` condition after a failure
/// ("…; retrying in 80s"), counted from when it was written (no later than
/// now, so now plus this is an upper bound).
pub fn announced_retry(object: &Value) -> Option<std::time::Duration> {
    let message = condition(object, "Synced")?["message"].as_str()?;
    let (_, after) = message.rsplit_once("retrying in ")?;
    let secs = after.strip_suffix('s')?.parse().ok()?;
    Some(std::time::Duration::from_secs(secs))
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::announced_retry;

    fn synced(message: &str) -> serde_json::Value {
        json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "message": "retrying in 5s"},
            {"type": "Synced", "status": "False", "message": message},
        ]}})
    }

    #[test]
    fn the_announced_retry_is_read_from_the_synced_message() {
        let vm = synced(
            "the creation of the VM failed: got timeout (trying to acquire lock...); retrying in 80s",
        );
        assert_eq!(announced_retry(&vm), Some(Duration::from_secs(80)));
        assert_eq!(
            announced_retry(&synced("the creation of the VM failed; retrying")),
            None
        );
        assert_eq!(announced_retry(&synced("waiting for the image")), None);
        assert_eq!(announced_retry(&json!({"status": {}})), None);
    }
}
