//! Carrying out the plan's one step: a Kubernetes write or a Proxmox call.
//! A step that starts a Proxmox task returns its UPID; nothing here waits
//! for a task.

mod kube_write;
mod pve;

pub use pve::step_name;

use k8s_openapi::jiff::Timestamp;

use super::error::is_conflict;
use super::plan::{ActFailure, Step};
use crate::api::ProxmoxVM;

/// What a step did.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// Nothing to do beyond writing the status.
    Nothing,
    /// The resource's metadata was written.
    Written,
    /// A Proxmox task was started.
    Started(String),
}

/// Carries out `step` for `vm` (as read at the start of the pass: metadata
/// writes carry its resourceVersion and fail with 409 if it is stale).
pub async fn act(
    kube: &kube::Client,
    pve: Option<&pve_client::Client>,
    vm: &ProxmoxVM,
    step: &Step,
    now: Timestamp,
) -> Result<Done, ActFailure> {
    if let Some(write) = kube_write::for_step(step) {
        let write = match write {
            kube_write::Write::Allocate => {
                let client = pve.ok_or_else(no_client)?;
                let vmid = client.next_vmid().await.map_err(proxmox_failure)?;
                kube_write::Write::Record {
                    vmid,
                    create_pending: true,
                }
            }
            other => other,
        };
        return kube_write::apply(kube, vm, &write, now)
            .await
            .map(|()| Done::Written)
            .map_err(kube_failure);
    }
    if step.action().is_none() {
        return Ok(Done::Nothing);
    }
    let client = pve.ok_or_else(no_client)?;
    pve::start(client, step)
        .await
        .map(|upid| Done::Started(upid.as_str().to_owned()))
        .map_err(proxmox_failure)
}

fn no_client() -> ActFailure {
    ActFailure::Failed("no usable provider config".into())
}

fn kube_failure(e: kube::Error) -> ActFailure {
    if is_conflict(&e) {
        ActFailure::Conflict
    } else {
        ActFailure::Failed(e.to_string())
    }
}

fn proxmox_failure(e: pve_client::Error) -> ActFailure {
    match e {
        pve_client::Error::Locked { .. } => ActFailure::Locked(e.to_string()),
        // The digest sent with a config update is stale: someone changed the
        // VM meanwhile. Look again and recompute, at once.
        pve_client::Error::Conflict { .. } => ActFailure::Conflict,
        other => ActFailure::Failed(other.to_string()),
    }
}
