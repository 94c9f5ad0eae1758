//! One reconcile pass: read (from the cache) → preflight → connect →
//! observe → schedule → plan → act → write status → publish events and the
//! connection Secret → requeue.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use tracing::Instrument;

use super::act::{Done, act, act_local};
use super::assign;
use super::connection;
use super::context::Context;
use super::error::Error;
use super::observe::{Depth, Failure, Sources, observe};
use super::plan::{
    self, ActFailure, Event, Idle, KubeWrite, Needs, Observation, ObserveError, Plan, PlanInput,
    Preflight, ProviderState, Step,
};
use super::providers::Connection;
use super::status;
use crate::api::ProxmoxVM;

/// The controller's reconcile function. Passes are admitted in arrival
/// order (see [`super::queue`]).
pub async fn reconcile(
    obj: Arc<DeserializeGuard<ProxmoxVM>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let _admitted = ctx.queue.admit(&ctx.metrics).await;
    let started = Instant::now();
    let (name, uid) = identify(&obj);
    let span = tracing::info_span!("reconcile", vm = %name);
    let result = pass(&obj, &ctx).instrument(span).await;
    // A pass that ends with Synced=False (a failed task, a lock, a missing
    // config, ...) failed too, though not as a Kubernetes error: its reason
    // is the kind.
    let kind = match &result {
        Ok(outcome) => outcome.failed.clone(),
        Err(e) => Some(e.metric_label().to_owned()),
    };
    ctx.metrics.reconciled(started.elapsed(), kind.as_deref());
    match &result {
        // A Proxmox that could not be observed keeps its backoff growing.
        Ok(outcome) if !outcome.transient => ctx.failures.succeeded(&uid),
        _ => {}
    }
    result.map(|outcome| outcome.action)
}

/// After a failed pass: retry with per-resource exponential backoff (1 s
/// doubling to 60 s); a resource that cannot even be read waits for a change.
pub fn error_policy(
    obj: Arc<DeserializeGuard<ProxmoxVM>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let (name, uid) = identify(&obj);
    if matches!(error, Error::InvalidObject { .. }) {
        tracing::warn!(vm = %name, %error, "cannot reconcile until the resource changes");
        super::invalid::report::<ProxmoxVM>(&ctx.kube, meta(&obj), super::invalid::VM);
        return Action::await_change();
    }
    let delay = ctx.failures.failed(&uid);
    tracing::warn!(vm = %name, %error, retry_in_ms = delay.as_millis() as u64, "reconcile failed");
    Action::requeue(delay)
}

/// The metadata of a cached object, valid or not.
fn meta(obj: &DeserializeGuard<ProxmoxVM>) -> &kube::api::ObjectMeta {
    match &obj.0 {
        Ok(vm) => &vm.metadata,
        Err(invalid) => &invalid.metadata,
    }
}

/// `namespace/name` and UID of a cached object, valid or not.
fn identify(obj: &DeserializeGuard<ProxmoxVM>) -> (String, String) {
    let meta = meta(obj);
    (
        format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default()
        ),
        meta.uid.clone().unwrap_or_default(),
    )
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

async fn pass(obj: &DeserializeGuard<ProxmoxVM>, ctx: &Context) -> Result<Outcome, Error> {
    let Some(vm) = current(obj, ctx).await? else {
        return Ok(Outcome {
            action: Action::await_change(),
            failed: None,
            transient: false,
        });
    };
    let now = Timestamp::now();
    let needs = match plan::preflight(&vm, now) {
        Preflight::Decided(plan) => {
            let input = PlanInput::unresolved(&vm, now);
            let done = act_local(&ctx.kube, &vm, &plan.step, now).await;
            return finish(ctx, &input, (*plan).into(), done).await;
        }
        Preflight::Observe(needs) => needs,
    };
    let connection = match ctx.providers.connect(&vm).await? {
        Ok(connection) => connection,
        Err(state) => {
            let input = input(&vm, state, Observation::default(), now);
            let plan = plan::plan(&input);
            let done = match &plan.step {
                Step::Idle(_) => Ok(Done::Nothing),
                // Without a usable config the plan only waits.
                other => Err(ActFailure::Failed(format!(
                    "{} needs a usable provider config",
                    other.name()
                ))),
            };
            return finish(ctx, &input, plan, done).await;
        }
    };
    let from = Sources {
        kube: &ctx.kube,
        client: &connection.client,
        inventory: &ctx.inventory,
        key: &connection.key,
        max_age: connection.timing.poll_interval,
    };
    let node_hint = vm
        .status
        .as_ref()
        .and_then(|s| s.at_provider.node.clone())
        .or_else(|| vm.spec.for_provider.node.clone());
    let uid = vm.uid().unwrap_or_default();
    let mut depth = ctx.full_looks.depth(&uid, needs.idle);
    let (input, plan, taken) = loop {
        let (input, taken) = look(
            ctx,
            from,
            &connection,
            &vm,
            &needs,
            node_hint.as_deref(),
            depth,
            now,
        )
        .await?;
        let plan = plan::plan(&input);
        // A cheap look may only conclude that nothing is to be done: any
        // action is decided from a full look at the VM.
        if depth == Depth::Idle
            && plan.step != Step::Idle(Idle::UpToDate)
            && input.observe_error.is_none()
        {
            depth = Depth::Full;
            continue;
        }
        if depth == Depth::Full && input.observe_error.is_none() {
            ctx.full_looks.done(&uid);
        }
        break (input, plan, taken);
    };
    let done = match assign::resolve(ctx, from, &connection, &vm, &plan.step).await {
        Ok(step) => act(&ctx.kube, &connection.client, &vm, &step, now).await,
        Err(why) => Err(ActFailure::Failed(why)),
    };
    let started = match &done {
        Ok(Done::Started(upid)) => Some(upid.clone()),
        _ => None,
    };
    assign::after_act(
        ctx,
        &connection,
        &vm,
        &plan,
        taken.as_ref(),
        started.as_deref(),
        done.is_ok(),
    );
    finish(ctx, &input, plan, done).await
}

/// Observes Proxmox as `needs` asks, at `depth`, and takes what the
/// scheduler decides (placement, slot): the plan's input, and the slot
/// taken, if any.
#[allow(clippy::too_many_arguments)]
async fn look<'a>(
    ctx: &Context,
    from: Sources<'_>,
    connection: &Connection,
    vm: &'a ProxmoxVM,
    needs: &Needs,
    node_hint: Option<&str>,
    depth: Depth,
    now: Timestamp,
) -> Result<(PlanInput<'a>, Option<assign::Taken>), Error> {
    let mut taken = None;
    let observed = match observe(from, vm, needs, node_hint, depth).await {
        Ok(mut observed) => {
            match assign::before_plan(ctx, from, connection, vm, needs, &mut observed).await {
                Ok(slot) => {
                    taken = slot;
                    Ok(observed)
                }
                Err(e) => Err(Failure::Proxmox(e)),
            }
        }
        Err(e) => Err(e),
    };
    let mut input = input(vm, connection.state(), Observation::default(), now);
    match observed {
        Ok(observed) => input.observed = observed,
        Err(Failure::Proxmox(e)) if config_problem(&e) => {
            // Credentials or TLS: the config is what is wrong (its own
            // status says so too).
            let message = format!("{}: {e}", connection.key);
            input.provider = Some(ProviderState::Unusable { message });
        }
        Err(Failure::Proxmox(e)) => {
            let uid = vm.uid().unwrap_or_default();
            input.observe_error = Some(ObserveError {
                message: e.to_string(),
                retry_in: ctx.failures.failed(&uid),
            });
        }
        Err(Failure::Kube(e)) => return Err(e),
    }
    Ok((input, taken))
}

/// The resource as this pass must see it: the controller's cache when it
/// shows our own last write (no request), else a fresh read. `None`: gone.
async fn current(
    obj: &DeserializeGuard<ProxmoxVM>,
    ctx: &Context,
) -> Result<Option<ProxmoxVM>, Error> {
    let (name, uid) = identify(obj);
    let cached = match &obj.0 {
        Ok(vm) => {
            let key = ObjectRef::new(&vm.name_any()).within(&vm.namespace().unwrap_or_default());
            ctx.store
                .get(&key)
                .and_then(|latest| latest.0.as_ref().ok().cloned())
                .unwrap_or_else(|| vm.clone())
        }
        Err(invalid) => {
            return Err(Error::InvalidObject {
                name,
                message: invalid.error.clone(),
            });
        }
    };
    if ctx
        .writes
        .cache_is_current(&uid, cached.resource_version().as_deref())
    {
        return Ok(Some(cached));
    }
    let api: Api<ProxmoxVM> =
        Api::namespaced(ctx.kube.clone(), &cached.namespace().unwrap_or_default());
    match api.get_opt(&cached.name_any()).await {
        Ok(Some(vm)) => {
            ctx.writes.saw(&uid, vm.resource_version());
            Ok(Some(vm))
        }
        Ok(None) => {
            ctx.writes.forget(&uid);
            Ok(None)
        }
        Err(kube::Error::SerdeError(e)) => Err(Error::InvalidObject {
            name,
            message: e.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Errors that say the provider config (credentials, TLS) is wrong, as
/// opposed to Proxmox not answering this time.
fn config_problem(e: &pve_client::Error) -> bool {
    matches!(
        e,
        pve_client::Error::Unauthorized { .. }
            | pve_client::Error::Forbidden { .. }
            | pve_client::Error::Tls { .. }
            | pve_client::Error::Config { .. }
    )
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
    }
}

/// After the step: the status, events and the connection Secret, and when
/// to look again.
async fn finish(
    ctx: &Context,
    input: &PlanInput<'_>,
    mut plan: Plan,
    done: Result<Done, ActFailure>,
) -> Result<Outcome, Error> {
    let vm = input.vm;
    let uid = vm.uid().unwrap_or_default();
    let step = plan.step.name();
    let mut events: Vec<Event> = vec![];
    match done {
        Ok(Done::Started(upid)) => {
            let note = match plan.step.pve() {
                Some(call) => format!(
                    "started {} ({}): {upid}",
                    call.action().pve_type(),
                    call.action().describe()
                ),
                None => format!("started {upid}"),
            };
            plan.task_started(&upid);
            events.append(&mut plan.events);
            events.push(Event {
                warning: false,
                reason: "TaskStarted",
                note,
            });
        }
        Ok(Done::Written(version)) => {
            if plan.step == Step::Kube(KubeWrite::RemoveFinalizer) {
                // The resource may be gone any moment now.
                ctx.writes.forget(&uid);
                ctx.full_looks.forget(&uid);
            } else {
                ctx.writes.saw(&uid, version);
            }
            events.append(&mut plan.events);
        }
        Ok(Done::Nothing) => events.append(&mut plan.events),
        Err(failure) => {
            tracing::info!(%step, ?failure, "the step failed");
            events.append(&mut plan.events);
            plan = plan::act_failed(input, &plan, failure);
            events.append(&mut plan.events);
        }
    }
    if let Some(task) = &plan.finished_task {
        ctx.metrics
            .task_finished(&task.type_, task.succeeded, task.elapsed);
    }
    // The connection Secret before the status, which says when it is not
    // this resource's to write.
    let published = match &plan.connection {
        Some(data) if vm.metadata.deletion_timestamp.is_none() => {
            connection::publish(&ctx.kube, vm, data).await
        }
        _ => Ok(None),
    };
    if let Ok(Some(why)) = &published {
        plan::connection_refused(&mut plan, vm, input.now, why);
    }
    log_synced_change(vm, &plan);
    // After a metadata write the status goes onto the new version.
    let written = status::write(&ctx.kube, vm, &plan.status).await;
    for event in &events {
        ctx.events.publish(vm, event).await;
    }
    if let Ok(Some(version)) = &written {
        ctx.writes.saw(&uid, Some(version.clone()));
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
        transient: input.observe_error.is_some(),
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
