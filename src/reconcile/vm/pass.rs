//! One reconcile pass, as one straight line:
//!
//! read → preflight → connect → observe and reserve → plan → act → settle →
//! report (status, events, connection Secret) → requeue.
//!
//! Every decision is the pure [`plan`]'s or, for what many resources share
//! (VMIDs, nodes, slots), a reservation the scheduler makes before the plan
//! ([`reserve`]). Nothing is decided after the plan: [`act`] carries out
//! the one step as it is, [`plan::settle`] folds its outcome into the plan,
//! and [`Reserved::settle`] tells the scheduler what became of the
//! reservations.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use tracing::Instrument;

pub mod act;
pub mod observe;
pub mod read;
pub mod reserve;
pub mod status;

use super::plan::{
    self, ActFailure, Done, Forbidden, Idle, KubeWrite, Needs, Observation, ObserveError, Plan,
    PlanInput, Preflight, ProviderState, Step,
};
use crate::api::ProxmoxVM;
use crate::api::vm::VmRef;
use crate::reconcile::context::Context;
use crate::reconcile::error::{Error, forbidden_message};
use crate::reconcile::identity::Identity;
use crate::reconcile::managed::connection_secret;
use crate::reconcile::managed::envelope::{self, run_held};
use crate::reconcile::managed::status::{Moment, due};
use crate::reconcile::providers::{ConfigKey, Connection};
use crate::reconcile::runtime::queue::turns::Turn;
use crate::reconcile::runtime::shards::Hold;
use act::{act, act_local};
use observe::{Failure, Sources, observe, resolved_refusals, rooms};
use read::current;
use reserve::{Reserved, reserve};

/// The controller's reconcile function. Passes are admitted in arrival
/// order (see [`crate::reconcile::runtime::queue`]).
///
/// Only for a config this replica holds (see
/// [`crate::reconcile::runtime::shards`]): a resource of another config
/// waits, and gaining its config wakes it. The pass is cancelled when the
/// config's term ends, and shows its [`Hold`] to the fence before every
/// write.
pub async fn reconcile(
    obj: Arc<DeserializeGuard<ProxmoxVM>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let id = identify(&obj)?;
    let hold = match &obj.0 {
        // The envelope every kind shares: held here, report-only, or wait.
        Ok(vm) => match envelope::hold(&ctx, &ConfigKey::of(vm)) {
            Ok(hold) => Some(hold),
            Err(action) => {
                // Not run here now (another replica holds its config, or the
                // configs are not listed yet): a turn kept for it goes on.
                ctx.queue.forget(&id.uid);
                return Ok(action);
            }
        },
        // Not readable: reported without any config (see `error_policy`).
        Err(_) => None,
    };
    // A template's clones wait for its every step: its passes do not wait
    // behind theirs (templates are few).
    let template =
        matches!(&obj.0, Ok(vm) if vm.spec.for_provider.lifecycle.template == Some(true));
    let _admitted = if template {
        ctx.queue.admit_first(&ctx.metrics).await
    } else {
        // A VM never reconciled (no status yet) queues among the first
        // passes. A pass that must wait ends here; the VM is woken when
        // its turn comes.
        let fresh = matches!(&obj.0, Ok(vm) if vm.status.is_none());
        let vm = VmRef::new(&id.name).within(&id.namespace);
        let waker = ctx.waker.clone();
        let wake = move || waker.wake(vm);
        match ctx.queue.turn(&id.uid, fresh, &ctx.metrics, wake).await {
            Turn::Now(admitted) => admitted,
            Turn::Later => return Ok(Action::await_change()),
        }
    };
    // Boxed: the pass's whole state is about 16 KiB, and the small future
    // above is what waits for a template's lane (docs/scaling.md, "Where
    // the CPU and memory go").
    Box::pin(admitted(obj, id, Arc::clone(&ctx), hold)).await
}

/// The pass of `id`, once admitted.
async fn admitted(
    obj: Arc<DeserializeGuard<ProxmoxVM>>,
    id: Identity,
    ctx: Arc<Context>,
    hold: Option<Hold>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let span = tracing::info_span!("reconcile", vm = %id);
    let result = match (&hold, &obj.0) {
        (Some(hold), Ok(vm)) => {
            let ran = run_held(hold, pass(&obj, &id, &ctx, hold).instrument(span)).await;
            // A pass ran: a reconcile request is answered.
            match ran {
                Ok(outcome) => answer(vm, &id, &ctx, hold).await.map(|()| outcome),
                failed => failed,
            }
        }
        (Some(hold), Err(_)) => run_held(hold, pass(&obj, &id, &ctx, hold).instrument(span)).await,
        (None, _) => current(&obj, &id, &ctx).await.map(|_| Outcome {
            action: Action::await_change(),
            failed: None,
            transient: false,
        }),
    };
    // A pass that ends with Synced=False (a failed task, a lock, a missing
    // config, ...) failed too, though not as a Kubernetes error: its reason
    // is the kind.
    let kind = match &result {
        Ok(outcome) => outcome.failed.clone(),
        Err(e) => Some(e.metric_label().to_owned()),
    };
    ctx.metrics.reconciled(started.elapsed(), kind.as_deref());
    // A Proxmox that could not be observed keeps its backoff growing.
    if let Ok(outcome) = &result
        && !outcome.transient
    {
        ctx.memory.succeeded(&id.uid);
    }
    result.map(|outcome| outcome.action)
}

/// Echoes a `crossplane.io/reconcile-requested-at` request once a pass ran.
async fn answer(vm: &ProxmoxVM, id: &Identity, ctx: &Context, hold: &Hold) -> Result<(), Error> {
    ctx.shards.fence(hold)?;
    let api = kube::Api::<ProxmoxVM>::namespaced(ctx.kube.clone(), &id.namespace);
    crate::reconcile::managed::status::echo_request(&api, vm).await
}

/// After a failed pass: retry with per-resource exponential backoff (1 s
/// doubling to 60 s); a resource that cannot even be read waits for a change.
pub fn error_policy(
    obj: Arc<DeserializeGuard<ProxmoxVM>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let meta = meta(&obj);
    let Some(id) = Identity::of(meta) else {
        tracing::warn!(%error, "cannot reconcile an object without a name or UID");
        return Action::await_change();
    };
    if let Error::Fenced { config } = error {
        // Its config's new holder (maybe this replica again) takes over.
        tracing::debug!(vm = %id, %config, "pass stopped: the config's Lease is not held");
        return Action::await_change();
    }
    if matches!(error, Error::InvalidObject { .. }) {
        tracing::warn!(vm = %id, %error, "cannot reconcile until the resource changes");
        crate::reconcile::invalid::report::<ProxmoxVM>(
            &ctx.kube,
            meta,
            crate::reconcile::invalid::VM,
        );
        return Action::await_change();
    }
    let delay = ctx.memory.failed(&id.uid);
    tracing::warn!(vm = %id, %error, retry_in_ms = delay.as_millis() as u64, "reconcile failed");
    Action::requeue(delay)
}

/// The metadata of a cached object, valid or not.
fn meta(obj: &DeserializeGuard<ProxmoxVM>) -> &kube::api::ObjectMeta {
    match &obj.0 {
        Ok(vm) => &vm.metadata,
        Err(invalid) => &invalid.metadata,
    }
}

/// The identity of a cached object, valid or not: resolved once, here.
fn identify(obj: &DeserializeGuard<ProxmoxVM>) -> Result<Identity, Error> {
    let meta = meta(obj);
    Identity::of(meta).ok_or_else(|| Error::InvalidObject {
        name: meta.name.clone().unwrap_or_else(|| "(unnamed)".into()),
        message: "the object has no namespace, name or UID".into(),
    })
}

/// What a pass ends with.
struct Outcome {
    /// When to look again.
    action: Action,
    /// The Synced=False reason it reported, if any.
    failed: Option<String>,
    /// Proxmox could not be observed (the backoff keeps growing).
    transient: bool,
}

async fn pass(
    obj: &DeserializeGuard<ProxmoxVM>,
    id: &Identity,
    ctx: &Context,
    hold: &Hold,
) -> Result<Outcome, Error> {
    let Some(vm) = current(obj, id, ctx).await? else {
        return Ok(Outcome {
            action: Action::await_change(),
            failed: None,
            transient: false,
        });
    };
    // A fresh read may show the resource moved to another config.
    let moved;
    let hold = match ConfigKey::of(&vm) {
        key if key == *hold.key() => hold,
        key => match ctx.shards.hold(&key) {
            Some(other) => {
                moved = other;
                &moved
            }
            None => {
                return Ok(Outcome {
                    action: Action::await_change(),
                    failed: None,
                    transient: false,
                });
            }
        },
    };
    let now = Timestamp::now();
    let needs = match plan::preflight(&vm, now) {
        Preflight::Decided(plan) => {
            let input = PlanInput::unresolved(&vm, now);
            ctx.shards.fence(hold)?;
            let outcome = act_local(ctx, (&vm, id), &plan.step, now).await;
            let plan = plan::settle(&input, (*plan).into(), outcome.clone());
            return report(ctx, (id, hold), &input, plan, &outcome).await;
        }
        Preflight::Observe(needs) => needs,
    };
    // Connecting may mark the config in use (a write to it).
    ctx.shards.fence(hold)?;
    let connection = match ctx.providers.connect(&vm).await {
        // The config exists after all: its holder takes over.
        Ok(Ok(_)) if hold.report_only() => {
            return Ok(Outcome {
                action: Action::await_change(),
                failed: None,
                transient: false,
            });
        }
        Ok(Ok(connection)) => connection,
        Ok(Err(state)) => return without_config(ctx, (id, hold), &vm, Ok(state), now).await,
        // The config or its Secrets may not be read: said on the resource.
        Err(e) => match forbidden(ctx, id, &e, None) {
            Some(forbidden) => {
                return without_config(ctx, (id, hold), &vm, Err(forbidden), now).await;
            }
            None => return Err(e),
        },
    };
    let (input, reserved) = observe_and_reserve(ctx, &connection, (&vm, id), &needs, now).await?;
    let plan = plan::plan(&input);
    if !matches!(plan.step, Step::Idle(_))
        && let Err(fenced) = ctx.shards.fence(hold)
    {
        let not_sent = Err(ActFailure::Failed(fenced.to_string()));
        reserved.settle(ctx, &connection, (&vm, id), &plan, &not_sent);
        return Err(fenced);
    }
    let outcome = act(ctx, &connection.client, (&vm, id), &plan.step, now).await;
    if plan.step.reaches_proxmox() {
        // Sent, or maybe sent: the last look no longer tells what the VM is.
        ctx.memory.touched(&id.uid);
    }
    reserved.settle(ctx, &connection, (&vm, id), &plan, &outcome);
    let plan = plan::settle(&input, plan, outcome.clone());
    report(ctx, (id, hold), &input, plan, &outcome).await
}

/// A pass whose provider config cannot be used (or, `Err`, may not be
/// read): the plan only waits.
async fn without_config(
    ctx: &Context,
    (id, hold): (&Identity, &Hold),
    vm: &ProxmoxVM,
    state: Result<ProviderState, Forbidden>,
    now: Timestamp,
) -> Result<Outcome, Error> {
    let input = match state {
        Ok(state) => input(vm, state, Observation::default(), now),
        Err(forbidden) => PlanInput {
            forbidden: Some(forbidden),
            ..PlanInput::unresolved(vm, now)
        },
    };
    let plan = plan::plan(&input);
    let outcome = match &plan.step {
        Step::Idle(_) => Ok(Done::Nothing),
        other
        @ (Step::Kube(_) | Step::Pve(_) | Step::Ha(_) | Step::Firewall(_) | Step::Pool(_)) => Err(
            ActFailure::Failed(format!("{} needs a usable provider config", other.name())),
        ),
    };
    let plan = plan::settle(&input, plan, outcome.clone());
    report(ctx, (id, hold), &input, plan, &outcome).await
}

/// Observes Proxmox as `needs` asks and takes what the scheduler reserves
/// (VMID, placement, slot): the plan's input, and the reservations to
/// settle after the step.
async fn observe_and_reserve<'a>(
    ctx: &Context,
    connection: &Connection,
    (vm, id): (&'a ProxmoxVM, &Identity),
    needs: &Needs,
    now: Timestamp,
) -> Result<(PlanInput<'a>, Reserved), Error> {
    let from = Sources {
        kube: &ctx.kube,
        client: &connection.client,
        inventory: &ctx.inventory,
        key: &connection.key,
        max_age: connection.timing.poll_interval,
        store: &ctx.store,
        memory: &ctx.memory,
        images: &ctx.images,
    };
    let node_hint = vm
        .status
        .as_ref()
        .and_then(|s| s.at_provider.node.clone())
        .or_else(|| vm.spec.for_provider.node.clone());
    let depth = ctx
        .memory
        .depth(&id.uid, needs.idle, connection.timing.full_look_interval);
    let mut input = input(vm, connection.state(), Observation::default(), now);
    let observed = match observe(from, (vm, id), needs, node_hint.as_deref(), depth).await {
        Ok(mut observed) => match reserve(ctx, from, connection, id, needs, &mut observed).await {
            Ok(reserved) => Ok((observed, reserved)),
            Err(e) => Err(Failure::Proxmox(e)),
        },
        Err(e) => Err(e),
    };
    let reserved = match observed {
        Ok((observed, reserved)) => {
            input.observed = observed;
            let downloading = input.observed.images.values().any(|present| !present);
            input.observed.resolved_refusals =
                resolved_refusals(vm, connection, downloading, &ctx.metrics).await;
            input.observed.rooms = rooms(vm, &from, needs, &input.observed, now).await;
            reserved
        }
        Err(Failure::Proxmox(e)) => {
            if e.class().config_is_wrong() {
                // Credentials or TLS: the config is what is wrong (its own
                // status says so too).
                let message = format!("{}: {e}", connection.key);
                input.provider = Some(ProviderState::Unusable { message });
            } else {
                input.observe_error = Some(ObserveError {
                    message: e.to_string(),
                    retry_in: ctx.memory.failed(&id.uid),
                });
            }
            Reserved::none()
        }
        // A Secret or ConfigMap the spec names may not be read.
        Err(Failure::Kube(e)) => match forbidden(ctx, id, &e, None) {
            Some(refused) => {
                input.forbidden = Some(refused);
                Reserved::none()
            }
            None => return Err(e),
        },
    };
    Ok((input, reserved))
}

/// What the resource says of a request the API server refused (403): the
/// API server's words (who, which verb, which resource, where) after what
/// the pass was `doing`, and when to try again: this resource's backoff,
/// which keeps growing while it is refused (see [`report`]). `None` for any
/// other error. Every [`Forbidden`] of a pass is made here, its step's
/// metadata write's too ([`act`]).
fn forbidden(
    ctx: &Context,
    id: &Identity,
    error: &Error,
    doing: Option<&str>,
) -> Option<Forbidden> {
    let refused = forbidden_message(error)?;
    Some(Forbidden {
        message: match doing {
            Some(doing) => format!("{doing}: {refused}"),
            None => refused,
        },
        retry_in: ctx.memory.failed(&id.uid),
    })
}

fn input(
    vm: &ProxmoxVM,
    provider: ProviderState,
    observed: Observation,
    now: Timestamp,
) -> PlanInput<'_> {
    PlanInput {
        vm,
        provider: Some(provider),
        observed,
        now,
        observe_error: None,
        forbidden: None,
    }
}

/// After the step: what the controller remembers, the status, events and
/// the connection Secret, and when to look again. Each write is fenced.
async fn report(
    ctx: &Context,
    (id, hold): (&Identity, &Hold),
    input: &PlanInput<'_>,
    mut plan: Plan,
    outcome: &Result<Done, ActFailure>,
) -> Result<Outcome, Error> {
    let vm = input.vm;
    let step = plan.step.name();
    // Our finalizer removed: the resource goes (or waits for others' work,
    // which our status does not describe). A status written after it would
    // find it gone: one request per VM deleted, for nothing.
    let released = matches!(outcome, Ok(Done::Written(_)))
        && plan.step == Step::Kube(KubeWrite::RemoveFinalizer);
    match outcome {
        Ok(Done::Written(_)) if released => {
            // The resource may be gone any moment now.
            ctx.memory.forget(&id.uid);
        }
        Ok(Done::Written(version)) => {
            ctx.memory.saw(&id.uid, version.clone());
            ctx.memory.wrote_metadata(&id.uid);
        }
        Ok(Done::Started(_) | Done::Nothing) => {}
        Err(failure) => tracing::info!(%step, ?failure, "the step failed"),
    }
    // Coarse looks may follow only a full look that found the VM as asked:
    // after anything else (a write, a wait, a failure) the next look is a
    // full one, which sees what the coarse one could not (the firewall,
    // the rest of the config).
    match (&plan.step, input.observed.depth) {
        (Step::Idle(Idle::UpToDate), plan::Depth::Full) if input.observe_error.is_none() => {
            ctx.memory.looked_in_full(&id.uid);
        }
        (Step::Idle(Idle::UpToDate), _) => {}
        (_, _) => ctx.memory.look_closer(&id.uid),
    }
    if let Some(task) = &plan.finished_task {
        ctx.metrics
            .task_finished(&task.type_, task.succeeded, task.elapsed);
    }
    // The connection Secret before the status, which says when it is not
    // this resource's to write.
    let published = match &plan.connection {
        Some(data) if vm.metadata.deletion_timestamp.is_none() => {
            ctx.shards.fence(hold)?;
            connection_secret::publish(&ctx.kube, (vm, id), data).await
        }
        Some(_) | None => Ok(None),
    };
    if let Ok(Some(why)) = &published {
        plan::connection_refused(&mut plan, vm, input.now, why);
    }
    // Not allowed to write it: said on the resource, tried again later.
    let mut refused = false;
    let published = match published.map_err(Error::Kube) {
        Err(e) => {
            let name = vm
                .spec
                .write_connection_secret_to_ref
                .as_ref()
                .map(|r| r.name.as_str())
                .unwrap_or_default();
            let doing = format!(
                "writing the connection Secret {}/{name} (writeConnectionSecretToRef)",
                id.namespace
            );
            match forbidden(ctx, id, &e, Some(&doing)) {
                Some(forbidden) => {
                    plan::write_refused(&mut plan, vm, input.now, &forbidden);
                    refused = true;
                    Ok(None)
                }
                None => Err(e),
            }
        }
        ok => ok,
    };
    log_synced_change(vm, &plan);
    // After a metadata write the status goes onto the new version: the
    // write is conditional on the version this pass read or wrote, so it
    // cannot overwrite a fresher status of another holder.
    let base = match outcome {
        Ok(Done::Written(version)) => version.clone(),
        Ok(Done::Started(_) | Done::Nothing) | Err(_) => vm.metadata.resource_version.clone(),
    };
    // Written when what changed is worth a write (`managed::status::due`):
    // a task recorded or its end consumed always, here; what a pass that
    // wrote metadata found is left to the pass that follows at once, which
    // finds it again; a rewording or progress at most every 15 s.
    let moment = Moment {
        since_written: ctx.memory.since_status_written(&id.uid),
        next_pass_at_once: matches!(outcome, Ok(Done::Written(_)))
            && plan.requeue_after == Some(Duration::ZERO),
        passes_again: plan.requeue_after.is_some(),
    };
    let change = status::change(vm.status.as_ref(), &plan.status);
    let written = if !released && due(change, &moment) {
        ctx.shards.fence(hold)?;
        status::write(&ctx.kube, id, &plan.status, base.as_deref()).await
    } else {
        Ok(None)
    };
    for event in &plan.events {
        ctx.shards.fence(hold)?;
        ctx.events.publish(vm, event).await;
    }
    for event in &plan.announced {
        ctx.shards.fence(hold)?;
        ctx.events.publish_once(vm, event).await;
    }
    if let Ok(Some(version)) = &written {
        ctx.memory.saw(&id.uid, Some(version.clone()));
        ctx.memory.wrote_status(&id.uid);
    }
    let written = written?.is_some();
    published?;
    tracing::debug!(%step, status_written = written, requeue = ?plan.requeue_after, "pass done");
    let action = match plan.requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    };
    Ok(Outcome {
        action,
        failed: failed_reason(&plan),
        // Its backoff keeps growing while Proxmox cannot be observed or
        // the API server refuses what the resource needs.
        transient: input.observe_error.is_some()
            || input.forbidden.is_some()
            || refused
            || matches!(outcome, Err(ActFailure::Forbidden(_))),
    })
}

/// The Synced reason when Synced is False (a pause is not a failure).
fn failed_reason(plan: &Plan) -> Option<String> {
    crate::api::condition::find(&plan.status.conditions, crate::api::ConditionType::Synced)
        .filter(|c| c.status == crate::api::ConditionStatus::False)
        .filter(|c| c.reason != crate::api::Reason::ReconcilePaused.as_str())
        .map(|c| c.reason.clone())
}

/// Logs what the resource now says it is doing, when that changed.
fn log_synced_change(vm: &ProxmoxVM, plan: &Plan) {
    let synced = |conditions: &[crate::api::Condition]| {
        crate::api::condition::find(conditions, crate::api::ConditionType::Synced)
            .map(|c| (c.reason.clone(), c.message.clone().unwrap_or_default()))
    };
    let before = vm.status.as_ref().and_then(|s| synced(&s.conditions));
    let after = synced(&plan.status.conditions);
    if let Some((reason, message)) = after
        && before.as_ref().map(|(r, _)| r) != Some(&reason)
    {
        if reason == crate::api::Reason::CapacityStalled.as_str() {
            tracing::warn!(%reason, %message, "synced");
        } else {
            tracing::info!(%reason, %message, "synced");
        }
    }
}
