//! One pass of a CRUD kind, whatever the kind: the envelope (hold,
//! admission, cancellation), the finalizer, the management policies, the
//! connection, then [`super::run`] and the conditions, events and requeue
//! its decision means. A kind supplies only a [`Kind`]: what it wants,
//! its calls, who still uses it, and its status.
//!
//! Requeues: after a call, at once (the next pass observes what it did;
//! the plan converges, and a re-apply sends nothing); after a refusal, an
//! unreadable Proxmox or a deletion Proxmox would refuse (`InUse`), with
//! the resource's failure backoff (never a hot loop); after a refusal the
//! kind recognizes as naming a spec field ([`Kind::refusal`]), at the
//! resync interval (the same request is refused until the spec changes);
//! up to date, at the config's resync interval; an invalid spec waits for
//! a change.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use kube::core::object::HasStatus;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::task;
use super::{Call, Decision, Diff, External, Observed};
use crate::api::condition::{Condition, ConditionStatus, ConditionType, Reason};
use crate::api::managed::{ManagedSpec, ManagedStatus};
use crate::api::meta::ConfigUser;
use crate::api::set_condition;
use crate::api::task::{EndedTask, TaskRecord};
use crate::reconcile::common::event::Event;
use crate::reconcile::common::finalizer;
use crate::reconcile::context::Context;
use crate::reconcile::error::{Error, is_not_found};
use crate::reconcile::managed::envelope::{self, run_held};
use crate::reconcile::managed::{fresh, status};
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::runtime::shards::Hold;

/// How long a deletion waits before looking at its users again.
pub const IN_USE_RECHECK: Duration = Duration::from_secs(5);

/// The object a kind wants; `Err`: why the spec cannot be carried out
/// (naming the field), with what to want anyway for a deletion.
pub type Wanted<K> = Result<Object<K>, (String, Object<K>)>;

/// A kind's object.
pub type Object<K> = <<K as Kind>::External as External>::Object;

/// What a CRUD kind supplies to the pass.
pub trait Kind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + ConfigUser
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// Its calls for one object.
    type External: External;
    /// Its status.
    type Status: Serialize + Send + Sync;
    /// What else its passes read (the caches of the kinds it refers to or
    /// is referred to by).
    type Extra: Send + Sync + 'static;

    /// Its managed fields (`providerConfigRef`, `managementPolicies`).
    fn managed(&self) -> &ManagedSpec;

    /// The object it wants; `Err`: why the spec cannot be carried out
    /// (naming the field), with what to want anyway for a deletion.
    fn want(&self, extra: &Self::Extra) -> Wanted<Self>;

    /// What it waits for before anything is sent, naming the field: an
    /// object it refers to that exists but is not usable yet. Said as
    /// `ReferenceNotReady` with Synced=True (waiting is not failure), and
    /// looked at again when that object wakes it (or at the default resync
    /// interval). `None`: nothing.
    fn waiting_for(&self, _extra: &Self::Extra) -> Option<String> {
        None
    }

    /// Its calls, through `client` (`extra`: what it reads of the kinds it
    /// refers to, a snapshot's guest).
    fn external(&self, client: pve_client::Client, extra: &Self::Extra) -> Self::External;

    /// What still uses it in Kubernetes (its deletion waits for them).
    fn users(&self, extra: &Self::Extra) -> Vec<String>;

    /// Its conditions as last written.
    fn conditions(&self) -> Vec<Condition>;

    /// The status to write: `observed`, what the pass saw on Proxmox
    /// (`None`: Proxmox was not asked this pass).
    fn status(
        &self,
        extra: &Self::Extra,
        conditions: Vec<Condition>,
        observed: Option<&Observed<Object<Self>>>,
    ) -> Self::Status;

    /// The reason to say a refusal `why` with when it names a field of the
    /// spec (a pool's access entry: `AccessRefused`): then the same request
    /// would be refused until the spec changes, so it is tried again at the
    /// resync interval, not with the failure backoff. `None`: a plain
    /// refusal (`ReconcileError`, backoff).
    fn refusal(&self, why: &str) -> Option<Reason> {
        let _ = why;
        None
    }

    /// Its Proxmox object in words (`pool team`), for the conditions that
    /// name it.
    fn object_name(&self) -> String {
        "an object of this name".to_owned()
    }

    /// The tasks its status records, for a kind whose calls may start one
    /// ([`super::Sent::Task`]); `None`: its calls answer at once.
    fn tracking(&self) -> Option<&TaskRecord> {
        None
    }

    /// What else a task of its ending concerns (a rollback's guest, whose
    /// own pass should look at it now): told once, when the pass sees it
    /// end, however it ended.
    fn task_ended(&self, extra: &Self::Extra, ended: &EndedTask) {
        let _ = (extra, ended);
    }

    /// `status` with the task `record` in it (a kind whose calls start
    /// tasks keeps it in its `atProvider`, see [`super::task`]).
    fn track(&self, status: Self::Status, record: TaskRecord) -> Self::Status {
        let _ = record;
        status
    }
}

/// A call Proxmox refused: why, and the reason the kind says it with when
/// it names a spec field ([`Kind::refusal`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub why: String,
    pub field: Option<Reason>,
}

/// What a CRUD kind's passes share: the context every kind shares, and
/// the kind's own.
pub struct Ctx<X> {
    pub ctx: Arc<Context>,
    pub extra: X,
    /// The last correction each resource (by UID) sent and Proxmox
    /// accepted: the same one decided again right after means Proxmox
    /// keeps the object differing from what it accepted, and is not sent
    /// a third time in a row (see [`repeated`]).
    sent: Sent,
}

/// The last accepted correction per resource UID.
type Sent = std::sync::Mutex<std::collections::HashMap<String, String>>;

impl<X> Ctx<X> {
    pub fn new(ctx: Arc<Context>, extra: X) -> Self {
        Self {
            ctx,
            extra,
            sent: Default::default(),
        }
    }
}

/// Whether `call` repeats the correction `last` that Proxmox accepted:
/// then a plan that does not converge would write in a loop, so the pass
/// says so and backs off instead.
pub fn repeated(last: Option<&String>, call: &str) -> bool {
    last.is_some_and(|l| l == call)
}

/// The reconcile function of a CRUD kind's controller.
pub async fn reconcile<K, A>(obj: Arc<K>, shared: Arc<Ctx<K::Extra>>) -> Result<Action, Error>
where
    K: Kind + HasStatus<Status = ManagedStatus<A>>,
    A: Default,
{
    let ctx = &shared.ctx;
    let api = Api::<K>::namespaced(ctx.kube.clone(), &obj.namespace().unwrap_or_default());
    // As this replica last wrote it (the cache may lag that write).
    let Some(obj) = fresh::current(obj.as_ref(), &api, &ctx.memory).await? else {
        return Ok(Action::await_change());
    };
    let hold = match envelope::hold(ctx, &ConfigKey::of(&obj)) {
        Ok(hold) => hold,
        Err(action) => return Ok(action),
    };
    let _admitted = ctx.queue.admit(&ctx.metrics).await;
    let action = run_held(&hold, pass(&obj, &shared, &hold)).await?;
    // A pass ran: a reconcile request is answered.
    ctx.shards.fence(&hold)?;
    status::echo_request(&api, &obj).await?;
    Ok(action)
}

/// After a failed pass: retried with the resource's backoff.
pub fn error_policy<K: Kind>(obj: Arc<K>, error: &Error, shared: Arc<Ctx<K::Extra>>) -> Action {
    let ctx = &shared.ctx;
    if let Error::Fenced { .. } = error {
        return Action::await_change();
    }
    let delay = ctx.memory.failed(&obj.uid().unwrap_or_default());
    tracing::warn!(kind = K::kind(&()).as_ref(), name = %obj.name_any(), %error, retry_in_ms = delay.as_millis() as u64, "reconcile failed");
    Action::requeue(delay)
}

/// What a pass ends with, before the status write.
#[derive(Debug)]
pub struct Outcome {
    pub ready: Condition,
    pub synced: Condition,
    pub event: Option<Event>,
    /// The event says a standing state (not owned, held by what it holds):
    /// published when Synced turns to it, not again on every look.
    pub standing: bool,
    pub action: Action,
    pub release: bool,
}

async fn pass<K: Kind>(obj: &K, shared: &Ctx<K::Extra>, hold: &Hold) -> Result<Action, Error> {
    let (ctx, extra) = (shared.ctx.as_ref(), &shared.extra);
    let now = Time(Timestamp::now());
    let namespace = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.kube.clone(), &namespace);
    let deleting = Resource::meta(obj).deletion_timestamp.is_some();
    let has_finalizer = finalizer::has_finalizer(Resource::meta(obj));
    if deleting && !has_finalizer {
        return Ok(Action::await_change());
    }
    // Paused (a deletion waits too, as for every kind) or refused policies:
    // said, nothing else.
    let caps = match obj.managed().capabilities(Resource::meta(obj)) {
        Ok(caps) => caps,
        Err((reason, message)) => {
            let synced = Condition::new(
                ConditionType::Synced,
                ConditionStatus::False,
                reason,
                message,
                now.clone(),
            );
            return report(
                obj,
                (ctx, extra),
                (hold, &api),
                None,
                synced,
                (None, None),
                Action::await_change(),
            )
            .await;
        }
    };
    if !deleting && !has_finalizer {
        ctx.shards.fence(hold)?;
        let patch = finalizer::patch(Resource::meta(obj), true);
        return match api
            .patch(
                &obj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(written) => {
                fresh::wrote(&ctx.memory, obj, &written);
                Ok(Action::await_change())
            }
            Err(e) if is_not_found(&e) => Ok(Action::await_change()),
            Err(e) => Err(e.into()),
        };
    }
    let (want, bad) = match obj.want(extra) {
        Ok(want) => (want, None),
        Err((why, want)) => (want, Some(why)),
    };
    if let (Some(why), false) = (&bad, deleting) {
        let synced = invalid(why.clone(), now.clone());
        return report(
            obj,
            (ctx, extra),
            (hold, &api),
            None,
            synced,
            (None, None),
            Action::await_change(),
        )
        .await;
    }
    if let (Some(why), false) = (obj.waiting_for(extra), deleting) {
        let synced = Condition::new(
            ConditionType::Synced,
            ConditionStatus::True,
            Reason::ReferenceNotReady,
            why,
            now,
        );
        return report(
            obj,
            (ctx, extra),
            (hold, &api),
            None,
            synced,
            (None, None),
            Action::requeue(ctx.providers.default_resync()),
        )
        .await;
    }
    let users = obj.users(extra);
    if deleting && !users.is_empty() {
        let ready = Condition::deleting(format!("still used by {}", users.join(", ")), now.clone());
        let synced = Condition::reconcile_success("waiting for its users to go", now);
        return report(
            obj,
            (ctx, extra),
            (hold, &api),
            Some(ready),
            synced,
            (None, None),
            Action::requeue(IN_USE_RECHECK),
        )
        .await;
    }
    let connection = match ctx.providers.connect_to(&ConfigKey::of(obj), true).await? {
        Ok(connection) => connection,
        Err(state) => {
            let (reason, message) = state.problem().unwrap_or((
                Reason::ReconcileError,
                "the provider config is not usable".into(),
            ));
            let synced = Condition::new(
                ConditionType::Synced,
                ConditionStatus::False,
                reason,
                message,
                now,
            );
            return report(
                obj,
                (ctx, extra),
                (hold, &api),
                None,
                synced,
                (None, None),
                Action::await_change(),
            )
            .await;
        }
    };
    if hold.report_only() {
        return Ok(Action::await_change());
    }
    let timing = &connection.timing;
    let record = obj.tracking().cloned();
    // A task in flight: observed, never waited for; nothing else is sent
    // while it runs, nor before a failure's backoff has passed.
    if let Some(record) = &record
        && let Some((outcome, next)) = task::watch(
            &connection.client,
            record,
            now.clone(),
            timing.resync_interval,
        )
        .await
    {
        if let (None, Some(ended)) = (&next.task, &next.last_task) {
            obj.task_ended(extra, ended);
        }
        return finish(obj, (shared, hold, &api), outcome, None, Some(next)).await;
    }
    // A failed task holds the next call back for its backoff.
    if let Some((left, synced)) = record.as_ref().and_then(|r| task::gate(r, &now)) {
        let outcome = Outcome {
            ready: Condition::unavailable("the last task failed", now.clone()),
            synced,
            event: None,
            standing: false,
            action: Action::requeue(left),
            release: false,
        };
        return finish(obj, (shared, hold, &api), outcome, None, None).await;
    }
    let external = obj.external(connection.client.clone(), extra);
    let done = super::run(&external, &want, caps, deleting, || ctx.shards.fence(hold)).await?;
    if let Some(d) = &done.started {
        let record = task::started(
            &record.unwrap_or_default(),
            (&d.task, d.action),
            &now,
            timing.task_timeout,
        );
        let outcome = task::dispatched(&record, d.adopted, now.clone(), timing.resync_interval);
        return finish(
            obj,
            (shared, hold, &api),
            outcome,
            Some(&done.observed),
            Some(record),
        )
        .await;
    }
    let super::Done {
        decision,
        refused,
        observed,
        started: _,
    } = done;
    let uid = obj.uid().unwrap_or_default();
    let refused = refused
        .or_else(|| again(&shared.sent, &uid, &decision))
        .map(|why| Refusal {
            field: obj.refusal(&why),
            why,
        });
    let outcome = outcome(
        &decision,
        refused,
        &obj.object_name(),
        now,
        connection.timing.resync_interval,
        || ctx.memory.failed(&uid),
    );
    finish(obj, (shared, hold, &api), outcome, Some(&observed), None).await
}

/// Ends a pass as `outcome` says: the finalizer removed when released,
/// else the status written (with what was `observed`, and the task
/// `record` when it changed) and the event published.
async fn finish<K: Kind>(
    obj: &K,
    (shared, hold, api): (&Ctx<K::Extra>, &Hold, &Api<K>),
    outcome: Outcome,
    observed: Option<&Observed<Object<K>>>,
    record: Option<TaskRecord>,
) -> Result<Action, Error> {
    let (ctx, extra) = (shared.ctx.as_ref(), &shared.extra);
    let uid = obj.uid().unwrap_or_default();
    if outcome.release {
        ctx.shards.fence(hold)?;
        let patch = finalizer::patch(Resource::meta(obj), false);
        match api
            .patch(
                &obj.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
        ctx.memory.forget(&uid);
        if let Some(event) = &outcome.event {
            ctx.events.publish(obj, event).await;
        }
        return Ok(Action::await_change());
    }
    let after = report(
        obj,
        (ctx, extra),
        (hold, api),
        Some(outcome.ready),
        outcome.synced,
        (observed, record),
        outcome.action,
    )
    .await?;
    let news = !outcome.standing || standing_changed(&obj.conditions(), outcome.event.as_ref());
    if let (Some(event), true) = (&outcome.event, news) {
        ctx.shards.fence(hold)?;
        ctx.events.publish(obj, event).await;
    }
    Ok(after)
}

/// Remembers the correction a pass sent and Proxmox accepted; a repeat of
/// it right after is said as a refusal (with the backoff), not sent again
/// and again.
fn again<T: Diff>(sent: &Sent, uid: &str, decision: &Decision<T>) -> Option<String> {
    let Ok(mut sent) = sent.lock() else {
        return None;
    };
    match decision {
        Decision::Call(Call::Update(patch)) => {
            let call = format!("{patch:?}");
            if repeated(sent.get(uid), &call) {
                sent.remove(uid);
                return Some(format!(
                    "Proxmox accepted this correction twice and still shows the object differing: {call}"
                ));
            }
            sent.insert(uid.to_owned(), call);
            None
        }
        Decision::Call(Call::Create(_) | Call::Delete)
        | Decision::UpToDate
        | Decision::Drifted(_)
        | Decision::Missing
        | Decision::NotOwned
        | Decision::InUse(_)
        | Decision::Released { .. }
        | Decision::Wait(_)
        | Decision::Empty(_)
        | Decision::Busy(_) => {
            sent.remove(uid);
            None
        }
    }
}

/// Whether a standing state's event is news: Synced said something else
/// before (`conditions`, as read).
pub fn standing_changed(conditions: &[Condition], event: Option<&Event>) -> bool {
    let before = conditions.iter().find(|c| c.type_ == "Synced");
    match (before, event) {
        (Some(c), Some(e)) => c.reason != e.reason,
        (None, _) | (_, None) => true,
    }
}

fn invalid(why: String, now: Time) -> Condition {
    Condition::new(
        ConditionType::Synced,
        ConditionStatus::False,
        Reason::InvalidSpec,
        why,
        now,
    )
}

/// What a decision means for the conditions, the event and the requeue.
pub fn outcome<T: Diff>(
    decision: &Decision<T>,
    refused: Option<Refusal>,
    what: &str,
    now: Time,
    resync: Duration,
    backoff: impl FnOnce() -> Duration,
) -> Outcome {
    let done = |ready, synced, event, action| Outcome {
        ready,
        synced,
        event,
        standing: false,
        action,
        release: false,
    };
    let ok = |msg: &str| Condition::reconcile_success(msg, now.clone());
    if let Some(Refusal {
        why,
        field: Some(reason),
    }) = &refused
    {
        let note = format!("Proxmox refused the change: {why}");
        return done(
            Condition::unavailable("not as the spec asks", now.clone()),
            Condition::new(
                ConditionType::Synced,
                ConditionStatus::False,
                *reason,
                note.clone(),
                now,
            ),
            Some(Event {
                warning: true,
                reason: reason.as_str(),
                note,
            }),
            Action::requeue(resync),
        );
    }
    if let Some(Refusal { why, field: None }) = refused {
        let note = format!("Proxmox refused the change: {why}");
        return done(
            Condition::unavailable("not as the spec asks", now.clone()),
            Condition::reconcile_error(note.clone(), now),
            Some(Event {
                warning: true,
                reason: "ChangeRefused",
                note,
            }),
            Action::requeue(backoff()),
        );
    }
    match decision {
        Decision::Call(call) => {
            let (ready, reason, note) = match call {
                Call::Create(_) => (
                    Condition::creating("created", now.clone()),
                    "Created",
                    "created on Proxmox",
                ),
                Call::Update(_) => (
                    Condition::unavailable("being corrected", now.clone()),
                    "Corrected",
                    "corrected drift on Proxmox",
                ),
                Call::Delete => (
                    Condition::deleting("deleted", now.clone()),
                    "Deleted",
                    "deleted on Proxmox",
                ),
            };
            let event = (!matches!(call, Call::Update(_))).then(|| Event {
                warning: false,
                reason,
                note: note.into(),
            });
            done(ready, ok(note), event, Action::requeue(Duration::ZERO))
        }
        Decision::UpToDate => done(
            Condition::available(now.clone()),
            ok("up to date"),
            None,
            Action::requeue(resync),
        ),
        Decision::Drifted(patch) => done(
            Condition::unavailable(
                format!("differs from the spec and Update is not allowed: {patch:?}"),
                now.clone(),
            ),
            ok("drift reported, not corrected"),
            None,
            Action::requeue(resync),
        ),
        Decision::Missing => done(
            Condition::unavailable("absent on Proxmox and Create is not allowed", now.clone()),
            ok("absent"),
            None,
            Action::requeue(resync),
        ),
        Decision::NotOwned => {
            let note = format!(
                "{what} exists without this resource's owner marker on Proxmox: it is never changed or deleted"
            );
            standing(
                done(
                    Condition::unavailable(
                        "exists on Proxmox without this resource's owner marker",
                        now.clone(),
                    ),
                    Condition::new(
                        ConditionType::Synced,
                        ConditionStatus::False,
                        Reason::NotOwned,
                        note.clone(),
                        now,
                    ),
                    None,
                    Action::requeue(resync),
                ),
                Reason::NotOwned,
                &note,
            )
        }
        // What it holds on Proxmox keeps it (a pool's guests): Proxmox
        // would refuse the delete, so none is sent; looked at again with
        // the backoff (each look asks Proxmox; a change of its holders
        // seen in Kubernetes wakes it sooner).
        Decision::InUse(why) => {
            let note = format!("cannot be deleted yet: {why}");
            standing(
                done(
                    Condition::new(
                        ConditionType::Ready,
                        ConditionStatus::False,
                        Reason::InUse,
                        note.clone(),
                        now.clone(),
                    ),
                    Condition::new(
                        ConditionType::Synced,
                        ConditionStatus::False,
                        Reason::InUse,
                        note.clone(),
                        now,
                    ),
                    None,
                    Action::requeue(backoff()),
                ),
                Reason::InUse,
                &note,
            )
        }
        Decision::Released { orphaned } => Outcome {
            ready: Condition::deleting("released", now.clone()),
            synced: ok("released"),
            event: orphaned.then(|| Event {
                warning: false,
                reason: "Orphaned",
                note: "left on Proxmox (no Delete policy, or not this resource's)".into(),
            }),
            standing: false,
            action: Action::await_change(),
            release: true,
        },
        // Nothing to have on Proxmox yet (a job selecting no guest): not a
        // failure; a wake-up or the resync looks again.
        Decision::Empty(why) => done(
            Condition::unavailable(why.clone(), now.clone()),
            ok("nothing to create on Proxmox"),
            None,
            Action::requeue(resync),
        ),
        // A lock Proxmox holds (a guest being snapshotted or backed up):
        // it comes off by itself, so a wait (Synced True), looked at again
        // shortly; a call is sent only once it is gone.
        Decision::Busy(why) => done(
            Condition::unavailable(format!("waiting: {why}"), now.clone()),
            Condition::new(
                ConditionType::Synced,
                ConditionStatus::True,
                Reason::VmLocked,
                format!("waiting for the lock to go: {why}"),
                now,
            ),
            None,
            Action::requeue(IN_USE_RECHECK),
        ),
        Decision::Wait(why) => done(
            Condition::unavailable("cannot be read", now.clone()),
            Condition::reconcile_error(format!("cannot read it on Proxmox: {why}"), now),
            None,
            Action::requeue(backoff()),
        ),
    }
}

/// `outcome` with a warning event saying its standing state (its Synced
/// reason) once.
fn standing(outcome: Outcome, reason: Reason, note: &str) -> Outcome {
    Outcome {
        event: Some(Event {
            warning: true,
            reason: reason.as_str(),
            note: note.to_owned(),
        }),
        standing: true,
        ..outcome
    }
}

/// Writes the conditions (and what was observed, and the task record when
/// one is given) when they changed.
async fn report<K: Kind>(
    obj: &K,
    (ctx, extra): (&Context, &K::Extra),
    (hold, api): (&Hold, &Api<K>),
    ready: Option<Condition>,
    synced: Condition,
    (seen, record): (Option<&Observed<Object<K>>>, Option<TaskRecord>),
    action: Action,
) -> Result<Action, Error> {
    let mut conditions = obj.conditions();
    let generation = Resource::meta(obj).generation;
    if let Some(mut ready) = ready {
        ready.observed_generation = generation;
        set_condition(&mut conditions, ready);
    }
    let failed = synced.status == ConditionStatus::False;
    let mut synced = synced;
    synced.observed_generation = generation;
    set_condition(&mut conditions, synced);
    let status = obj.status(extra, conditions, seen);
    let status = match record.or_else(|| obj.tracking().cloned()) {
        Some(record) => obj.track(status, record),
        None => status,
    };
    // On the version this pass read: a fresher status (of another holder)
    // is never overwritten.
    let uid = obj.uid().unwrap_or_default();
    let base = fresh::base(&ctx.memory, obj);
    ctx.shards.fence(hold)?;
    if let Some(version) = status::apply_on(api, &obj.name_any(), &status, base.as_deref()).await? {
        ctx.memory.saw(&uid, Some(version));
    }
    if !failed {
        ctx.memory.succeeded(&uid);
    }
    Ok(action)
}

#[cfg(test)]
mod tests;
