//! One reconcile pass: read → preflight → connect → observe → plan → act →
//! write status → publish events and the connection Secret → requeue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::Instrument;

use super::act::{Done, act};
use super::connection;
use super::context::Context;
use super::error::Error;
use super::observe::{Failure, observe};
use super::plan::{self, Event, Observation, Plan, PlanInput, Preflight, ProviderState, TaskState};
use super::providers::Connection;
use super::status;
use crate::api::{
    ProxmoxVM,
    provider_config::{Limits, Timing},
};
use pve_client::ExitStatus;

/// The controller's reconcile function.
pub async fn reconcile(
    obj: Arc<DeserializeGuard<ProxmoxVM>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let (name, uid) = identify(&obj);
    let span = tracing::info_span!("reconcile", vm = %name);
    let result = pass(&obj, &ctx).instrument(span).await;
    // A pass that ends with Synced=False (a failed task, a lock, a missing
    // config, ...) failed too, though not as a Kubernetes error: its reason
    // is the kind.
    let kind = match &result {
        Ok((_, failed)) => failed.clone(),
        Err(e) => Some(e.metric_label().to_owned()),
    };
    ctx.metrics.reconciled(started.elapsed(), kind.as_deref());
    if result.is_ok() {
        ctx.failures.succeeded(&uid);
    }
    result.map(|(action, _)| action)
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

/// What a pass ends with: when to look again, and the Synced=False reason
/// it reported, if any.
type Outcome = (Action, Option<String>);

async fn pass(obj: &DeserializeGuard<ProxmoxVM>, ctx: &Context) -> Result<Outcome, Error> {
    let cached = obj.0.as_ref().map_err(|invalid| Error::InvalidObject {
        name: identify(obj).0,
        message: invalid.error.clone(),
    })?;
    // Read afresh: the cache may not show this controller's own last write
    // yet, and every decision below must start from the newest object.
    let api: Api<ProxmoxVM> =
        Api::namespaced(ctx.kube.clone(), &cached.namespace().unwrap_or_default());
    let vm = match api.get_opt(&cached.name_any()).await {
        Ok(Some(vm)) => vm,
        Ok(None) => return Ok((Action::await_change(), None)),
        Err(kube::Error::SerdeError(e)) => {
            return Err(Error::InvalidObject {
                name: identify(obj).0,
                message: e.to_string(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let now = Timestamp::now();
    let needs = match plan::preflight(&vm, now) {
        Preflight::Decided(plan) => {
            let input = input(&vm, default_provider(), Observation::default(), now);
            return finish(ctx, &vm, &input, *plan, None).await;
        }
        Preflight::Observe(needs) => needs,
    };
    let connection = match ctx.providers.connect(&vm).await? {
        Ok(connection) => connection,
        Err(state) => {
            let input = input(&vm, state, Observation::default(), now);
            let plan = plan::plan(&input);
            return finish(ctx, &vm, &input, plan, None).await;
        }
    };
    // Passes that may start an import or clone on a node take its slot
    // lock until their status is written.
    let _slot = match &needs.load_on {
        Some(node) => Some(ctx.capacity.lock(&connection.key, node).await),
        None => None,
    };
    let node_hint = vm
        .status
        .as_ref()
        .and_then(|s| s.at_provider.node.clone())
        .or_else(|| vm.spec.for_provider.node.clone());
    let observed = observe(
        &ctx.kube,
        &connection.client,
        &vm,
        &needs,
        node_hint.as_deref(),
    )
    .await;
    let (provider, observed) = match observed {
        Ok(mut observed) => {
            if let Some(node) = &needs.load_on {
                observed.load = ctx.capacity.load(&ctx.store, &connection.key, node, &vm);
            }
            (connection.state(), observed)
        }
        Err(Failure::Proxmox(e)) => {
            let message = format!("{}: {e}", connection.key);
            (ProviderState::Unusable { message }, Observation::default())
        }
        Err(Failure::Kube(e)) => return Err(e),
    };
    let input = input(&vm, provider, observed, now);
    count_finished_task(ctx, &input);
    let plan = plan::plan(&input);
    finish(ctx, &vm, &input, plan, Some(&connection)).await
}

fn input(
    vm: &ProxmoxVM,
    provider: ProviderState,
    observed: Observation,
    now: Timestamp,
) -> PlanInput<'_> {
    PlanInput {
        vm,
        provider,
        observed,
        now,
    }
}

/// What `preflight` assumes: decisions it makes need no provider config.
fn default_provider() -> ProviderState {
    ProviderState::Ready {
        timing: Timing::default(),
        limits: Limits::default(),
    }
}

/// Acts on the plan, writes the status, publishes events and the
/// connection Secret, and says when to look again.
async fn finish(
    ctx: &Context,
    vm: &ProxmoxVM,
    input: &PlanInput<'_>,
    mut plan: Plan,
    connection: Option<&Connection>,
) -> Result<Outcome, Error> {
    let step = super::act::step_name(&plan.step);
    let mut events: Vec<Event> = vec![];
    match act(
        &ctx.kube,
        connection.map(|c| &c.client),
        vm,
        &plan.step,
        input.now,
    )
    .await
    {
        Ok(Done::Started(upid)) => {
            let note = match plan.step.action() {
                Some(a) => format!("started {} ({}): {upid}", a.pve_type(), a.describe()),
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
        Ok(_) => events.append(&mut plan.events),
        Err(failure) => {
            tracing::info!(%step, ?failure, "the step failed");
            events.append(&mut plan.events);
            plan = plan::act_failed(input, &plan, failure);
            events.append(&mut plan.events);
        }
    }
    if let Some(c) = connection {
        ctx.capacity.record(&c.key, vm, &plan.status);
    }
    log_synced_change(vm, &plan);
    let written = status::write(&ctx.kube, vm, &plan.status).await;
    for event in &events {
        ctx.events.publish(vm, event).await;
    }
    let written = written?;
    if let Some(data) = &plan.connection
        && vm.metadata.deletion_timestamp.is_none()
    {
        connection::publish(&ctx.kube, vm, data).await?;
    }
    tracing::debug!(%step, status_written = written, requeue = ?plan.requeue_after, "pass done");
    let action = match plan.requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    };
    Ok((action, failed_reason(&plan)))
}

/// The Synced reason when Synced is False (a pause is not a failure).
fn failed_reason(plan: &Plan) -> Option<String> {
    crate::api::condition::find(&plan.status.conditions, crate::api::ConditionType::Synced)
        .filter(|c| c.status == crate::api::ConditionStatus::False)
        .filter(|c| c.reason != crate::api::Reason::ReconcilePaused.as_str())
        .map(|c| c.reason.clone())
}

/// Counts the task this pass found finished, with its duration from the
/// start recorded in the status.
fn count_finished_task(ctx: &Context, input: &PlanInput<'_>) {
    let Some(task) = input
        .vm
        .status
        .as_ref()
        .and_then(|s| s.at_provider.task.as_ref())
    else {
        return;
    };
    if let Some(TaskState::Finished { exit_status, .. }) = &input.observed.task {
        let success = !matches!(ExitStatus::parse(exit_status), ExitStatus::Error(_));
        let elapsed: Duration = input
            .now
            .duration_since(task.started_at.0)
            .try_into()
            .unwrap_or_default();
        ctx.metrics.task_finished(&task.type_, success, elapsed);
    }
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
        tracing::info!(%reason, %message, "synced");
    }
}
