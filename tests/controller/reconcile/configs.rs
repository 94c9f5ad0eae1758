//! Provider config status, read the way a user would.

use kube::Api;
use provider_proxmox::api::provider_config::ProviderConfigStatus;
use provider_proxmox::api::{ClusterProviderConfig, ProviderConfig, condition::Condition};

use super::{DEADLINE, Env};
use crate::support;

/// The finalizer of provider configs in use.
pub const IN_USE: &str = "in-use.crossplane.io";

/// The `Ready` condition of a status.
pub fn ready(status: &ProviderConfigStatus) -> Option<&Condition> {
    status.conditions.iter().find(|c| c.type_ == "Ready")
}

/// A status in one line, for failure messages.
pub fn brief(status: Option<&ProviderConfigStatus>) -> String {
    let Some(status) = status else {
        return "(none)".into();
    };
    let ready = ready(status).map(|c| {
        format!(
            "Ready={:?}/{}: {}",
            c.status,
            c.reason,
            c.message.as_deref().unwrap_or_default()
        )
    });
    format!(
        "{} users {:?} version {:?} observedGeneration {:?}",
        ready.unwrap_or_default(),
        status.users,
        status.version,
        status.observed_generation
    )
}

/// Waits until `check` accepts the `Ready` condition's reason and the
/// status; returns the status.
async fn wait_status(
    what: &str,
    get: impl AsyncFn() -> Result<Option<ProviderConfigStatus>, String>,
    check: impl Fn(&ProviderConfigStatus) -> bool,
) -> ProviderConfigStatus {
    support::poll(what, DEADLINE, || async {
        let status = get().await?;
        match status {
            Some(s) if check(&s) => Ok(s),
            other => Err(brief(other.as_ref())),
        }
    })
    .await
}

impl Env {
    /// Waits for the namespace's ProviderConfig `name` to have a status
    /// `check` accepts.
    pub async fn wait_config(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ProviderConfigStatus) -> bool,
    ) -> ProviderConfigStatus {
        let api: Api<ProviderConfig> = Api::namespaced(support::client(), self.ns.name());
        let get = || async {
            let pc = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
            Ok(pc.status)
        };
        wait_status(&format!("ProviderConfig {name}: {what}"), get, check).await
    }

    /// The same for a ClusterProviderConfig.
    pub async fn wait_cluster_config(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ProviderConfigStatus) -> bool,
    ) -> ProviderConfigStatus {
        let api: Api<ClusterProviderConfig> = Api::all(support::client());
        let get = || async {
            let pc = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
            Ok(pc.status)
        };
        wait_status(&format!("ClusterProviderConfig {name}: {what}"), get, check).await
    }
}

/// Whether the status says Ready with `reason`.
pub fn has_reason(status: &ProviderConfigStatus, reason: &str) -> bool {
    ready(status).is_some_and(|c| c.reason == reason)
}

/// Waits until `name` is gone from `api` (its finalizers removed).
pub async fn wait_deleted<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    support::poll(&format!("{name} to be gone"), DEADLINE, || async {
        match api.get_opt(name).await {
            Ok(None) => Ok(()),
            Ok(Some(obj)) => Err(format!(
                "still there, finalizers {:?}",
                obj.meta().finalizers
            )),
            Err(e) => Err(format!("GET: {e}")),
        }
    })
    .await
}

/// Waits until `name` in `api` carries the in-use finalizer.
pub async fn wait_protected<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    support::poll(&format!("{name} to be marked in use"), DEADLINE, || async {
        let obj = api.get(name).await.map_err(|e| format!("GET: {e}"))?;
        let finalizers = obj.meta().finalizers.clone().unwrap_or_default();
        if finalizers.iter().any(|f| f == IN_USE) {
            Ok(())
        } else {
            Err(format!("finalizers {finalizers:?}"))
        }
    })
    .await
}
