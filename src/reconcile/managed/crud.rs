//! The synchronous CRUD path, beside the task path: for kinds whose Proxmox
//! objects are created, changed and deleted by plain calls that answer at
//! once (pools, firewall groups, IP sets, backup jobs), the decision as a
//! pure function — what the resource wants and what Proxmox showed in, at
//! most one call out — and the pass around it as one line: observe →
//! [`plan`] → fence → call.
//!
//! The rules every such kind gets without writing them again:
//!
//! * an object found without this resource's ownership is never changed or
//!   deleted (`NotOwned`), whatever the management policies say;
//! * drift is corrected only with `Update`, an absent object created only
//!   with `Create`, and a deletion destroys only with `Delete` (else it
//!   orphans the object);
//! * what cannot be observed decides nothing (`Unknown`: looked at again);
//! * one call per pass: the next pass observes what the call did.
//!
//! A kind supplies the object's value type, implementing [`Diff`] (the
//! managed fields compared, and the patch that corrects them), and an
//! [`External`] client for its calls. The task-based kinds (VMs,
//! containers, images) do not go through here: they share the envelope,
//! not the decision.
//!
//! A call may also start a Proxmox task (a snapshot taken, rolled back or
//! deleted): the kind's [`External::start`] answers [`Sent::Task`], the
//! pass records the task in the status ([`task`]) and observes it on
//! later passes, never waiting for it, and sends nothing else while it
//! runs. Before such a call the kind says whether Proxmox holds the object
//! under a lock ([`External::busy`]: a wait, not a failure) and whether a
//! task of its own already does what the call would
//! ([`External::adopt`]: a lost status write), so a task is never
//! dispatched twice.

pub mod controller;
pub mod pass;
pub mod task;

use std::fmt::Debug;
use std::future::Future;

use pve_client::Upid;

use crate::api::meta::Capabilities;
use crate::api::task::CallAction;
use crate::reconcile::error::Error;

/// The managed fields of a kind's Proxmox object.
pub trait Diff: Clone + Debug + PartialEq + Send + Sync {
    /// What corrects drift: only the fields that differ.
    type Patch: Clone + Debug + PartialEq + Send + Sync;

    /// The patch that makes `observed` what `self` wants; `None` when
    /// nothing managed differs. Fields the spec leaves out are not managed.
    fn diff(&self, observed: &Self) -> Option<Self::Patch>;

    /// What keeps the observed object from being deleted now (a pool's
    /// members, a group still referred to), said to people; `None`: it
    /// may go. Proxmox would refuse the delete, so none is sent: the
    /// deletion waits (`InUse`) and is looked at again.
    fn in_use(&self) -> Option<String> {
        None
    }

    /// Why the wanted object cannot exist on Proxmox now (a backup job
    /// that selects no guest: Proxmox needs one), said to people; `None`:
    /// it can. Such a want is never created; one that exists is only
    /// corrected by [`Diff::diff`] (the kind decides what it keeps).
    fn absent(&self) -> Option<String> {
        None
    }
}

/// What Proxmox showed of the object.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed<T> {
    /// It exists; `ours`: it carries this resource's ownership (its owner
    /// marker, or the name only this resource can produce).
    Found { object: T, ours: bool },
    /// Proxmox answered that it does not exist.
    NotFound,
    /// Proxmox could not be asked (why).
    Unknown(String),
}

impl<T> Observed<T> {
    /// The object, when it was found.
    pub fn found(&self) -> Option<&T> {
        match self {
            Observed::Found { object, .. } => Some(object),
            Observed::NotFound | Observed::Unknown(_) => None,
        }
    }
}

/// The one call a pass makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Call<T: Diff> {
    /// Create the object as wanted.
    Create(T),
    /// Correct its drift.
    Update(T::Patch),
    /// Delete it.
    Delete,
}

/// What a pass decides.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision<T: Diff> {
    /// Send this call, then look again.
    Call(Call<T>),
    /// The object is as wanted.
    UpToDate,
    /// It differs, and the policies do not allow correcting it (the patch
    /// that would): reported, not sent.
    Drifted(T::Patch),
    /// It is absent and the policies do not allow creating it.
    Missing,
    /// It exists without this resource's ownership: never touched.
    NotOwned,
    /// Being deleted, but what it holds keeps it (why): waits, looked at
    /// again with backoff.
    InUse(String),
    /// Being deleted, and nothing is left on Proxmox (or it is left there
    /// on purpose, without `Delete`): the finalizer may go.
    Released {
        /// The object was left on Proxmox (no `Delete` policy, or not
        /// ours).
        orphaned: bool,
    },
    /// Nothing can be decided this pass (why).
    Wait(String),
    /// What the spec wants cannot exist on Proxmox now (why, from
    /// [`Diff::absent`]): nothing is created, and what exists is as
    /// corrected as it can be. Looked at again when woken or at resync.
    Empty(String),
    /// A call is due, but Proxmox holds the object under a lock (why,
    /// from [`External::busy`]): a wait, not a failure; looked at again.
    Busy(String),
}

/// Decides the next call: `want` is the object the spec asks for,
/// `deleting` whether the resource is being deleted.
pub fn plan<T: Diff>(
    want: &T,
    observed: &Observed<T>,
    caps: Capabilities,
    deleting: bool,
) -> Decision<T> {
    match (observed, deleting) {
        (Observed::Unknown(why), _) => Decision::Wait(why.clone()),
        (Observed::NotFound, true) => Decision::Released { orphaned: false },
        (Observed::Found { ours: false, .. }, true) => Decision::Released { orphaned: true },
        (Observed::Found { object, ours: true }, true) if caps.delete => match object.in_use() {
            Some(why) => Decision::InUse(why),
            None => Decision::Call(Call::Delete),
        },
        (Observed::Found { ours: true, .. }, true) => Decision::Released { orphaned: true },
        (Observed::NotFound, false) => match want.absent() {
            Some(why) => Decision::Empty(why),
            None if caps.create => Decision::Call(Call::Create(want.clone())),
            None => Decision::Missing,
        },
        (Observed::Found { ours: false, .. }, false) => Decision::NotOwned,
        (Observed::Found { object, ours: true }, false) => match want.diff(object) {
            None => want.absent().map_or(Decision::UpToDate, Decision::Empty),
            Some(patch) if caps.update => Decision::Call(Call::Update(patch)),
            Some(patch) => Decision::Drifted(patch),
        },
    }
}

/// A kind's Proxmox calls for one object (`Send`: a controller's passes
/// run on any thread).
pub trait External: Send + Sync {
    /// The object's managed fields.
    type Object: Diff;

    /// Reads the object.
    fn observe(&self) -> impl Future<Output = Observed<Self::Object>> + Send;

    /// Sends one call; `Err`: Proxmox refused it (the message).
    fn call(&self, call: &Call<Self::Object>) -> impl Future<Output = Result<(), String>> + Send;

    /// Sends one call that may start a Proxmox task; `Err`: Proxmox
    /// refused it. A kind whose calls answer at once need not say it.
    fn start(
        &self,
        call: &Call<Self::Object>,
    ) -> impl Future<Output = Result<Sent, String>> + Send {
        async move { self.call(call).await.map(|()| Sent::Done) }
    }

    /// Why the call cannot be sent now (Proxmox holds the object, or the
    /// guest it lives in, under a lock: `lock: snapshot`); asked only when
    /// a call is due. `None`: it can.
    fn busy(&self, call: &Call<Self::Object>) -> impl Future<Output = Option<String>> + Send {
        let _ = call;
        async { None }
    }

    /// This kind's own task that already does what `call` would, running
    /// or ended OK since the status last recorded one (a status write lost
    /// after the dispatch): adopted instead of dispatching it again.
    /// `Err`: it could not be told (nothing is sent).
    fn adopt(
        &self,
        call: &Call<Self::Object>,
    ) -> impl Future<Output = Result<Option<Started>, String>> + Send {
        let _ = call;
        async { Ok(None) }
    }
}

/// What a call did.
#[derive(Clone, Debug, PartialEq)]
pub enum Sent {
    /// Answered at once: the next pass observes it.
    Done,
    /// Started a Proxmox task, recorded and observed on later passes.
    Task(Started),
}

/// A task a call started (or adopted).
#[derive(Clone, Debug, PartialEq)]
pub struct Started {
    pub upid: Upid,
    /// What it works on, kept with it in the status (a rollback's request).
    pub target: Option<String>,
}

/// What one CRUD pass did, for the kind's status.
#[derive(Clone, Debug, PartialEq)]
pub struct Done<T: Diff> {
    /// What Proxmox showed before the call (the status reports it).
    pub observed: Observed<T>,
    /// What was decided.
    pub decision: Decision<T>,
    /// The call's refusal, when one was sent and refused.
    pub refused: Option<String>,
    /// The task the call started, or the own task adopted instead.
    pub started: Option<Dispatched>,
}

/// A task a pass's call started, or adopted.
#[derive(Clone, Debug, PartialEq)]
pub struct Dispatched {
    pub task: Started,
    /// What the call was.
    pub action: CallAction,
    /// Found running or ended (a lost status write), not sent now.
    pub adopted: bool,
}

impl<T: Diff> Done<T> {
    /// The object as observed before the call, when it was found.
    pub fn seen(&self) -> Option<&T> {
        self.observed.found()
    }
}

/// One pass: observe, decide, and send the call once `fence` allows the
/// write (the envelope's `Shards::fence`, shown the pass's hold).
pub async fn run<E: External>(
    external: &E,
    want: &E::Object,
    caps: Capabilities,
    deleting: bool,
    fence: impl Fn() -> Result<(), Error>,
) -> Result<Done<E::Object>, Error> {
    let observed = external.observe().await;
    let decision = match plan(want, &observed, caps, deleting) {
        Decision::Call(call) => match external.busy(&call).await {
            Some(why) => Decision::Busy(why),
            None => Decision::Call(call),
        },
        decision => decision,
    };
    let (refused, started) = match &decision {
        Decision::Call(call) => {
            let dispatched = |task, adopted| Dispatched {
                task,
                action: task::action(call),
                adopted,
            };
            match external.adopt(call).await {
                Ok(Some(own)) => (None, Some(dispatched(own, true))),
                Err(why) => (Some(why), None),
                Ok(None) => {
                    fence()?;
                    match external.start(call).await {
                        Ok(Sent::Done) => (None, None),
                        Ok(Sent::Task(started)) => (None, Some(dispatched(started, false))),
                        Err(why) => (Some(why), None),
                    }
                }
            }
        }
        Decision::UpToDate
        | Decision::Drifted(_)
        | Decision::Missing
        | Decision::NotOwned
        | Decision::InUse(_)
        | Decision::Released { .. }
        | Decision::Wait(_)
        | Decision::Empty(_)
        | Decision::Busy(_) => (None, None),
    };
    Ok(Done {
        observed,
        decision,
        refused,
        started,
    })
}

#[cfg(test)]
mod tests;
