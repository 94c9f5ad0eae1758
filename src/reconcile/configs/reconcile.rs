//! One pass over a provider config: keep the in-use finalizer (see
//! [`super::in_use`]), resolve the config (the shared client of
//! `providers`), check it (at most one `GET /version` per resync
//! interval), count its users, write the status when it changed, and wake
//! its VMs when it got fixed. A config being deleted loses its finalizer
//! once it has no users, and says why it stays until then.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::kind::ConfigObject;
use super::probe::Probes;
use super::report;
use super::users::Users;
use crate::api::ProviderConfigKind;
use crate::reconcile::common::event::Event;
use crate::reconcile::error::Error;
use crate::reconcile::events::Events;
use crate::reconcile::invalid;
use crate::reconcile::managed::status;
use crate::reconcile::providers::in_use;
use crate::reconcile::providers::{ConfigKey, Providers};
use crate::reconcile::runtime::memory::Memory;
use crate::reconcile::runtime::shards::{Hold, Shards};

/// How long a pass waits for the VM cache to be filled (users are counted
/// from it).
const UNTIL_LISTED: Duration = Duration::from_secs(1);

/// What the provider config passes share.
pub struct Ctx {
    /// The Kubernetes client.
    pub kube: kube::Client,
    /// The VM controller's clients, one per config.
    pub providers: Arc<Providers>,
    /// The VMs of each config.
    pub users: Users,
    /// The last check of each config.
    pub probes: Probes,
    /// Event publisher (shared with the VM controller).
    pub events: Events,
    /// Consecutive failed passes, for backoff.
    pub failures: Memory<()>,
    /// The namespace a test controller is limited to (see
    /// `Settings::namespace`).
    pub scope: Option<String>,
    /// The configs this replica holds.
    pub shards: Arc<Shards>,
}

impl Ctx {
    /// Whether this controller reports on the config. A controller limited
    /// to one namespace reports on the ClusterProviderConfigs whose
    /// credentials Secret lives there, so controllers of several
    /// namespaces never write one status in turn.
    fn in_scope<K: ConfigObject>(&self, config: &K, key: &ConfigKey) -> bool {
        match (&self.scope, key.kind) {
            (None, _) | (Some(_), ProviderConfigKind::ProviderConfig) => true,
            (Some(ns), ProviderConfigKind::ClusterProviderConfig) => key
                .credentials_secret(config.settings())
                .is_some_and(|s| &s.namespace == ns),
        }
    }

    /// Forgets a config that is gone.
    pub fn forget(&self, key: &ConfigKey) {
        self.probes.forget(key);
        self.providers.forget(key);
    }
}

/// The reconcile function of both config controllers.
pub async fn reconcile<K: ConfigObject>(config: Arc<K>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let key = config.key();
    if !ctx.in_scope(config.as_ref(), &key) {
        return Ok(Action::await_change());
    }
    // Another replica's (its holder runs the pass); gaining it triggers one.
    let Some(hold) = ctx.shards.hold(&key) else {
        return Ok(Action::await_change());
    };
    tokio::select! {
        result = pass(&config, &key, &ctx, &hold) => result,
        () = hold.lost() => Err(Error::Fenced { config: key.to_string() }),
    }
}

async fn pass<K: ConfigObject>(
    config: &Arc<K>,
    key: &ConfigKey,
    ctx: &Ctx,
    hold: &Hold,
) -> Result<Action, Error> {
    let key = key.clone();
    let meta = config.meta();
    let deleting = in_use::deleting(meta);
    // Protecting needs no user count: done first, before any VM may come
    // to depend on the config. A failure is retried with backoff once the
    // status is written.
    let protected = if deleting || in_use::protected(meta) {
        Ok(())
    } else {
        ctx.shards.fence(hold)?;
        in_use::set(&ctx.kube, &key, meta, true).await
    };
    if !ctx.users.listed() {
        return Ok(Action::requeue(UNTIL_LISTED));
    }
    let users = ctx.users.names(&key);
    if deleting && users.is_empty() {
        if in_use::protected(meta) {
            ctx.shards.fence(hold)?;
            in_use::set(&ctx.kube, &key, meta, false).await?;
            tracing::info!(config = %key, "provider config deleted: no ProxmoxVM uses it");
        }
        return Ok(Action::await_change());
    }
    let blocked = deleting.then(|| in_use::blocked_message(&users));
    // The config as the watch delivered it: a newer spec triggers another
    // pass, so reading it again here would only cost a request.
    let resolved = ctx
        .providers
        .resolve_config(&key, config.settings(), meta)
        .await?;
    let check = ctx
        .probes
        .check(&key, resolved, ctx.providers.default_resync())
        .await;
    let old = config.status();
    let new = report::status(
        old,
        &check.outcome,
        users.len(),
        blocked.as_deref(),
        (meta.generation, report::insecure(config.settings())),
        Time(Timestamp::now()),
        ctx.shards.identity(),
    );
    if old != Some(&new) {
        ctx.shards.fence(hold)?;
        let written = status::apply(&K::api(&ctx.kube, &key), &key.name, &new).await;
        if let (Err(Error::Kube(kube::Error::Api(refused))), Err(problem)) =
            (&written, &check.outcome)
            && refused.code == 422
        {
            // The API server takes no status on a config its schema refuses
            // (one written around it): say what is wrong in an event.
            let about = (&*K::api_version(&()), &*K::kind(&()), config.meta());
            let reason = problem.reason.as_str();
            invalid::warn(ctx.kube.clone(), about, reason, &problem.message).await?;
            return Ok(Action::requeue(check.next));
        }
        written?;
        if report::reason(old) != report::reason(Some(&new)) {
            let ready = report::is_ready(Some(&new));
            let message = match &check.outcome {
                Ok(version) => format!("Proxmox VE {version}"),
                Err(problem) => problem.message.clone(),
            };
            let reason = report::reason(Some(&new)).unwrap_or_default();
            tracing::info!(config = %key, ready, %reason, %message, "provider config checked");
        }
    }
    if let Some(why) = &blocked
        && report::message(old) != Some(why)
    {
        tracing::info!(config = %key, %why, "provider config deletion waits for its ProxmoxVMs");
        let event = Event {
            warning: true,
            reason: "InUse",
            note: why.clone(),
        };
        ctx.shards.fence(hold)?;
        ctx.events.publish(config.as_ref(), &event).await;
    }
    // VMs waiting on a broken config retry after 30 s; tell them now.
    let fixed = !report::is_ready(old) && report::is_ready(Some(&new));
    if check.inputs_changed || fixed {
        let woken = ctx.users.wake(&key);
        if woken > 0 {
            tracing::info!(
                config = %key, vms = woken, changed = check.inputs_changed, ready = fixed,
                "requeueing the ProxmoxVMs of the provider config"
            );
        }
    }
    protected?;
    if let Some(uid) = config.uid() {
        ctx.failures.succeeded(&uid);
    }
    Ok(Action::requeue(check.next))
}

/// After a failed pass (Kubernetes refused or did not answer): retry with
/// backoff.
pub fn error_policy<K: ConfigObject>(config: Arc<K>, error: &Error, ctx: Arc<Ctx>) -> Action {
    if let Error::Fenced { config } = error {
        tracing::debug!(%config, "provider config pass stopped: its Lease is not held");
        return Action::await_change();
    }
    let Some(uid) = config.uid() else {
        // No stored object lacks a UID; nothing to count a failure against.
        return Action::await_change();
    };
    let delay = ctx.failures.failed(&uid);
    tracing::warn!(config = %config.key(), %error, retry_in_ms = delay.as_millis() as u64, "provider config pass failed");
    Action::requeue(delay)
}
