//! Carrying out the plan's one step: a Kubernetes write or a Proxmox call.
//! A step that starts a Proxmox task returns its UPID; nothing here waits
//! for a task.

mod firewall;
mod ha;
mod kube_write;
mod motion;
mod pve;
mod seed;

use k8s_openapi::jiff::Timestamp;
use pve_client::ErrorClass;

use super::forbidden;
use crate::api::ProxmoxVM;
use crate::reconcile::context::Context;
use crate::reconcile::error::is_conflict;
use crate::reconcile::identity::Identity;
use crate::reconcile::vm::plan::{ActFailure, Done, KubeWrite, LocalStep, Step};

/// Carries out `step` for `vm` (as read at the start of the pass: metadata
/// writes carry its resourceVersion and fail with 409 if it is stale).
pub async fn act(
    ctx: &Context,
    pve: &pve_client::Client,
    of: (&ProxmoxVM, &Identity),
    step: &Step,
    now: Timestamp,
) -> Result<Done, ActFailure> {
    match step {
        Step::Kube(write) => write_metadata(ctx, of, write, now).await,
        Step::Pve(call) => pve::start(pve, call).await.map(Done::Started),
        Step::Ha(call) => ha::write(pve, call)
            .await
            .map(|()| Done::Nothing)
            .map_err(proxmox_failure),
        Step::Firewall(write) => firewall::write(pve, write)
            .await
            .map(|()| Done::Nothing)
            .map_err(proxmox_failure),
        Step::Pool(pool) => pve
            .add_to_pool(&pool.pool, pool.vmid, pool.allow_move)
            .await
            .map(|()| Done::Nothing)
            .map_err(proxmox_failure),
        Step::Idle(_) => Ok(Done::Nothing),
    }
}

/// Carries out a step decided before Proxmox was contacted.
pub async fn act_local(
    ctx: &Context,
    of: (&ProxmoxVM, &Identity),
    step: &LocalStep,
    now: Timestamp,
) -> Result<Done, ActFailure> {
    match step {
        LocalStep::Kube(write) => write_metadata(ctx, of, write, now).await,
        LocalStep::Idle(_) => Ok(Done::Nothing),
    }
}

async fn write_metadata(
    ctx: &Context,
    of: (&ProxmoxVM, &Identity),
    write: &KubeWrite,
    now: Timestamp,
) -> Result<Done, ActFailure> {
    kube_write::apply(&ctx.kube, of, write, now)
        .await
        .map(Done::Written)
        .map_err(|e| kube_failure(ctx, of.1, write, e))
}

/// A refused metadata write: a conflict (looked at again at once), the
/// RBAC's refusal (`Forbidden` on the resource) or another failure.
fn kube_failure(ctx: &Context, id: &Identity, write: &KubeWrite, e: kube::Error) -> ActFailure {
    if is_conflict(&e) {
        return ActFailure::Conflict;
    }
    let message = e.to_string();
    let doing = format!("patching ProxmoxVM {id} to {}", write.describe());
    match forbidden(ctx, id, &e.into(), Some(&doing)) {
        Some(refused) => ActFailure::Forbidden(refused),
        None => ActFailure::Failed(message),
    }
}

fn proxmox_failure(e: pve_client::Error) -> ActFailure {
    match e.class() {
        ErrorClass::Locked => ActFailure::Locked(e.to_string()),
        // The digest sent with a config update is stale: someone changed the
        // VM meanwhile. Look again and recompute, at once.
        ErrorClass::Conflict => ActFailure::Conflict,
        ErrorClass::Credentials
        | ErrorClass::Tls
        | ErrorClass::Config
        | ErrorClass::Unreachable
        | ErrorClass::NotFound
        | ErrorClass::AlreadyExists
        | ErrorClass::Refused => ActFailure::Failed(e.to_string()),
    }
}
