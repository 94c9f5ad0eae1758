//! Carrying out the plan's one step: a Kubernetes write or a Proxmox call.
//! A step that starts a Proxmox task returns its UPID; nothing here waits
//! for a task.

mod ha;
mod kube_write;
mod motion;
mod pve;
mod seed;

use k8s_openapi::jiff::Timestamp;

use super::error::is_conflict;
use super::plan::{ActFailure, KubeWrite, LocalStep, PveCall, Step};
use crate::api::ProxmoxVM;

/// What a step did.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    /// Nothing to do beyond writing the status.
    Nothing,
    /// The resource's metadata was written, giving this resourceVersion.
    Written(Option<String>),
    /// A Proxmox task was started.
    Started(String),
}

/// Carries out `step` for `vm` (as read at the start of the pass: metadata
/// writes carry its resourceVersion and fail with 409 if it is stale).
pub async fn act(
    kube: &kube::Client,
    pve: &pve_client::Client,
    vm: &ProxmoxVM,
    step: &Step,
    now: Timestamp,
) -> Result<Done, ActFailure> {
    match step {
        // The caller resolves an allocation into the record of a VMID the
        // scheduler gave (see `assign::resolve`).
        Step::Kube(KubeWrite::AllocateVmid) => Err(ActFailure::Failed(
            "a VMID allocation must be resolved before it is carried out".into(),
        )),
        Step::Kube(write) => write_metadata(kube, vm, write, now).await,
        Step::Pve(PveCall::Ha { call, .. }) => ha::write(pve, call)
            .await
            .map(|()| Done::Nothing)
            .map_err(proxmox_failure),
        Step::Pve(PveCall::UploadSeed {
            node,
            storage,
            filename,
            files,
        }) => seed::upload(pve, node, storage, filename, files).await,
        Step::Pve(call) => pve::start(pve, call)
            .await
            .map(|upid| Done::Started(upid.as_str().to_owned()))
            .map_err(|e| match (e, call) {
                (
                    e @ pve_client::Error::AlreadyExists { .. },
                    PveCall::CreateVm { .. } | PveCall::CloneVm { .. },
                ) => ActFailure::Taken(e.to_string()),
                (e, _) => proxmox_failure(e),
            }),
        Step::Idle(_) => Ok(Done::Nothing),
    }
}

/// Carries out a step decided before Proxmox was contacted.
pub async fn act_local(
    kube: &kube::Client,
    vm: &ProxmoxVM,
    step: &LocalStep,
    now: Timestamp,
) -> Result<Done, ActFailure> {
    match step {
        LocalStep::Kube(write) => write_metadata(kube, vm, write, now).await,
        LocalStep::Idle(_) => Ok(Done::Nothing),
    }
}

async fn write_metadata(
    kube: &kube::Client,
    vm: &ProxmoxVM,
    write: &KubeWrite,
    now: Timestamp,
) -> Result<Done, ActFailure> {
    kube_write::apply(kube, vm, write, now)
        .await
        .map(Done::Written)
        .map_err(kube_failure)
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
