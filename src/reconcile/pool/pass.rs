//! One pass of a ProxmoxPool: the envelope's hold, the gate (policies,
//! pause, config), the finalizer, then [`managed::crud::run`] with the
//! pool's calls, and the status its [`plan::report`] writes.
//!
//! What it asks Proxmox, per pass: `GET /pools/{poolid}` (comment and
//! members; "does not exist" is `NotFound`), and only for a pool carrying
//! this resource's marker `GET /access/acl` (the entries on
//! `/pool/<poolId>`): a pool that is not ours is not looked at further.
//! Then at most one call: the create (`POST /pools`, then one
//! `PUT /access/acl` per entry: each refusal names its entry), the
//! correction (`PUT /pools/{poolid}` for the comment, one
//! `PUT /access/acl` per entry added or revoked) or the delete
//! (`DELETE /pools/{poolid}`, never while Proxmox lists members; it takes
//! the pool's ACL entries with it).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use pve_client::{AclEntry, Client};

use super::plan::{self, Again, Gate, Grant, Owner, PoolObject};
use crate::api::ProxmoxPool;
use crate::api::pool::PoolAccess;
use crate::reconcile::common::finalizer;
use crate::reconcile::context::Context;
use crate::reconcile::error::{Error, is_not_found};
use crate::reconcile::managed::crud::{self, Call, External, Observed};
use crate::reconcile::managed::envelope::{self, run_held};
use crate::reconcile::managed::status::apply_on;
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::runtime::shards::Hold;

/// The pool controller's reconcile function: only for a config this
/// replica holds (see [`envelope::hold`]).
pub async fn reconcile(pool: Arc<ProxmoxPool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let hold = match envelope::hold(&ctx, &ConfigKey::of(pool.as_ref())) {
        Ok(hold) => hold,
        Err(action) => return Ok(action),
    };
    let _admitted = ctx.queue.admit(&ctx.metrics).await;
    let span = tracing::info_span!("pool", pool = %format!("{}/{}", pool.namespace().unwrap_or_default(), pool.name_any()));
    let pass = tracing::Instrument::instrument(pass(&pool, &ctx, &hold), span);
    run_held(&hold, pass).await
}

/// After a failed pass: retried with the resource's backoff.
pub fn error_policy(pool: Arc<ProxmoxPool>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Error::Fenced { .. } = error {
        return Action::await_change();
    }
    let delay = ctx.memory.failed(&pool.uid().unwrap_or_default());
    tracing::warn!(pool = %pool.name_any(), %error, retry_in_ms = delay.as_millis() as u64, "pool reconcile failed");
    Action::requeue(delay)
}

async fn pass(pool: &ProxmoxPool, ctx: &Context, hold: &Hold) -> Result<Action, Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let uid = pool.uid().unwrap_or_default();
    let api: Api<ProxmoxPool> = Api::namespaced(ctx.kube.clone(), &namespace);
    let previous = pool.status.clone().unwrap_or_default();
    let generation = pool.metadata.generation;
    let now = Time(Timestamp::now());
    let deleting = pool.metadata.deletion_timestamp.is_some();
    let has_finalizer = finalizer::has_finalizer(&pool.metadata);
    if deleting && !has_finalizer {
        return Ok(Action::await_change());
    }
    let caps = match plan::gate(&pool.spec.managed, &pool.metadata) {
        Gate::Go(caps) => caps,
        Gate::Stop { reason, message } => {
            let status = plan::said(&previous, reason, &message, generation, now);
            write_status(ctx, hold, &api, pool, &status).await?;
            return Ok(Action::await_change());
        }
    };
    let key = ConfigKey::of(pool);
    let started = deleting || previous.at_provider.pool_id.is_some();
    let connection = match ctx.providers.connect_to(&key, started).await? {
        Ok(connection) => connection,
        Err(state) => {
            let (reason, message) = state.problem().unwrap_or((
                crate::api::Reason::ReconcileError,
                "the provider config is not usable".into(),
            ));
            let status = plan::said(&previous, reason, &message, generation, now);
            write_status(ctx, hold, &api, pool, &status).await?;
            // A config created, fixed or gained wakes the resource.
            return Ok(Action::requeue(ctx.providers.default_resync()));
        }
    };
    if hold.report_only() {
        return Ok(Action::await_change());
    }
    if !deleting && !has_finalizer {
        ctx.shards.fence(hold)?;
        match set_finalizer(&api, pool, true).await {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
        // The write wakes the resource (finalizers are watched).
        return Ok(Action::await_change());
    }
    let spec = &pool.spec.for_provider;
    let owner = Owner {
        namespace: &namespace,
        name: &name,
        uid: &uid,
    };
    let want = plan::want(
        owner,
        spec.comment.as_deref(),
        &spec.access,
        &previous.at_provider.access,
    );
    let external = Proxmox {
        client: &connection.client,
        poolid: &spec.pool_id,
        uid: &uid,
        access: &spec.access,
    };
    let done = crud::run(&external, &want, caps, deleting, || ctx.shards.fence(hold)).await?;
    let report = plan::report(&spec.pool_id, &want, &done, &previous, generation, now);
    for event in &report.events {
        ctx.shards.fence(hold)?;
        ctx.events.publish(pool, event).await;
    }
    if report.release {
        return release_finalizer(ctx, hold, &api, pool).await;
    }
    write_status(ctx, hold, &api, pool, &report.status).await?;
    Ok(match report.again {
        Again::Now => Action::requeue(Duration::ZERO),
        Again::Backoff => Action::requeue(ctx.memory.failed(&uid)),
        Again::Resync => {
            ctx.memory.succeeded(&uid);
            Action::requeue(connection.timing.resync_interval)
        }
        Again::Never => Action::await_change(),
    })
}

/// The pool's calls on Proxmox.
struct Proxmox<'a> {
    client: &'a Client,
    poolid: &'a str,
    uid: &'a str,
    /// The spec's entries, to name the one Proxmox refuses.
    access: &'a [PoolAccess],
}

impl Proxmox<'_> {
    fn entry(&self, grant: &Grant) -> AclEntry {
        AclEntry {
            path: plan::acl_path(self.poolid),
            subject: grant.subject.clone(),
            role: grant.role.clone(),
            propagate: grant.propagate,
        }
    }

    /// Adds `grant`; a refusal names the spec's entry.
    async fn grant(&self, grant: &Grant) -> Result<(), String> {
        self.client.grant(&self.entry(grant)).await.map_err(|e| {
            let index = self
                .access
                .iter()
                .position(|a| Grant::of(a).as_ref() == Some(grant))
                .unwrap_or_default();
            format!("{}{index}] ({}): {e}", plan::ACCESS_FIELD, grant.describe())
        })
    }
}

impl External for Proxmox<'_> {
    type Object = PoolObject;

    async fn observe(&self) -> Observed<PoolObject> {
        let pool = match self.client.pool(self.poolid).await {
            Ok(Some(pool)) => pool,
            Ok(None) => return Observed::NotFound,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        let comment = pool.comment.clone().unwrap_or_default();
        let members = plan::guests(&pool.members);
        if !plan::ours(&comment, self.uid) {
            // Never touched: its ACL is not this resource's to read.
            let object = PoolObject {
                comment,
                members,
                ..PoolObject::default()
            };
            return Observed::Found {
                object,
                ours: false,
            };
        }
        let acl = match self.client.acl().await {
            Ok(acl) => acl,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        Observed::Found {
            object: PoolObject {
                comment,
                access: plan::on_path(&acl, &plan::acl_path(self.poolid)),
                members,
                applied: Default::default(),
            },
            ours: true,
        }
    }

    async fn call(&self, call: &Call<PoolObject>) -> Result<(), String> {
        match call {
            Call::Create(pool) => {
                self.client
                    .create_pool(self.poolid, &pool.comment)
                    .await
                    .map_err(|e| e.to_string())?;
                for grant in &pool.access {
                    self.grant(grant).await?;
                }
                Ok(())
            }
            Call::Update(patch) => {
                if let Some(comment) = &patch.comment {
                    self.client
                        .set_pool_comment(self.poolid, comment)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                for grant in &patch.grant {
                    self.grant(grant).await?;
                }
                for gone in &patch.revoke {
                    self.client
                        .revoke(&self.entry(gone))
                        .await
                        .map_err(|e| format!("revoking {}: {e}", gone.describe()))?;
                }
                Ok(())
            }
            Call::Delete => self
                .client
                .delete_pool(self.poolid)
                .await
                .map_err(|e| e.to_string()),
        }
    }
}

async fn release_finalizer(
    ctx: &Context,
    hold: &Hold,
    api: &Api<ProxmoxPool>,
    pool: &ProxmoxPool,
) -> Result<Action, Error> {
    ctx.shards.fence(hold)?;
    match set_finalizer(api, pool, false).await {
        Ok(()) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    ctx.memory.forget(&pool.uid().unwrap_or_default());
    Ok(Action::await_change())
}

/// Adds or removes the finalizer (see [`finalizer::patch`]).
async fn set_finalizer(
    api: &Api<ProxmoxPool>,
    pool: &ProxmoxPool,
    present: bool,
) -> Result<(), kube::Error> {
    let patch = finalizer::patch(&pool.metadata, present);
    api.patch(
        &pool.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

/// Writes the status when it changed, on the version the pass read.
async fn write_status(
    ctx: &Context,
    hold: &Hold,
    api: &Api<ProxmoxPool>,
    pool: &ProxmoxPool,
    status: &crate::api::ProxmoxPoolStatus,
) -> Result<(), Error> {
    if pool.status.as_ref() == Some(status) {
        return Ok(());
    }
    ctx.shards.fence(hold)?;
    apply_on(
        api,
        &pool.name_any(),
        status,
        pool.metadata.resource_version.as_deref(),
    )
    .await?;
    Ok(())
}
