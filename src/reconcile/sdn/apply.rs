//! The applier: one `PUT /cluster/sdn` per provider config for the
//! pending changes of all its zones and VNets.
//!
//! Each zone or VNet pass tells the applier what it saw ([`Applier::record`]:
//! a change pending on Proxmox or not, and whether the resource is still
//! on its way at its generation). A loop beside the controllers then, for
//! each provider config this replica holds, decides with
//! [`plan::step`]: when a change is pending, no apply is in flight and
//! every SDN resource of the config has settled, it sends one apply and
//! records its UPID; on later turns it observes that task with
//! [`task_state`] (never waiting for it) and, once it ended, wakes the
//! resources so their status says Applied or ApplyFailed.
//!
//! Never twice: the apply is sent only when no task is recorded, and PVE
//! commits the pending configuration within the request, so a change is
//! no longer pending once its apply was accepted. After a restart the
//! record is gone, but so is the pending state of what was applied: the
//! passes read it again from Proxmox and only a change still pending is
//! applied (the reload that was running finishes on its own).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Notify;

use super::Extra;
use super::plan::{self, Step};
use crate::api::sdn::ApplyState;
use crate::api::{ProxmoxSDNZone, ProxmoxVNet};
use crate::reconcile::common::tasks::TaskState;
use crate::reconcile::context::Context;
use crate::reconcile::managed::tasks::task_state;
use crate::reconcile::providers::ConfigKey;

/// How often the loop looks again while a change waits or an apply runs.
const TICK: Duration = Duration::from_secs(1);
/// The first wait after Proxmox refused an apply; doubles up to
/// [`RETRY_MAX`].
const RETRY: Duration = Duration::from_secs(5);
const RETRY_MAX: Duration = Duration::from_secs(60);
/// How long a pending change waits for the config's other SDN resources
/// to settle before it is applied anyway (one that never settles must not
/// hold the others' changes).
const SETTLE_MAX: Duration = Duration::from_secs(10);

/// What a pass saw of one resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub config: ConfigKey,
    pub generation: Option<i64>,
    /// A change of it is written and not applied.
    pub pending: bool,
    /// Nothing more will be written for it at this generation until
    /// something changes (up to date, refused, paused, being deleted).
    pub settled: bool,
}

/// An apply in flight: its task and the resources pending when it was
/// sent.
#[derive(Clone, Debug)]
struct InFlight {
    upid: pve_client::Upid,
    uids: BTreeSet<String>,
}

/// The last apply that failed: its task (none when Proxmox refused the
/// request), why, and the resources it carried.
#[derive(Clone, Debug)]
struct Failed {
    upid: Option<String>,
    why: String,
    uids: BTreeSet<String>,
}

#[derive(Default)]
struct State {
    seen: HashMap<String, Seen>,
    in_flight: HashMap<ConfigKey, InFlight>,
    failed: HashMap<ConfigKey, Failed>,
    /// A refused apply: how many in a row, and when to try again.
    retry: HashMap<ConfigKey, (u32, Instant)>,
    /// Since when a change of the config has been pending.
    pending_since: HashMap<ConfigKey, Instant>,
}

/// The applier's memory, shared by the zone and VNet passes and its loop.
#[derive(Default)]
pub struct Applier {
    state: Mutex<State>,
    notify: Notify,
}

/// An object's apply state for its status: the state, the UPID to show
/// and why the last apply failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub state: ApplyState,
    pub task: Option<String>,
    pub failure: Option<String>,
}

impl State {
    /// An apply of `uids`' changes was accepted as task `upid`. PVE
    /// committed the pending configuration within the request, so what
    /// their passes last saw pending no longer is: without forgetting it,
    /// a turn after the task ended and before their next passes would
    /// send a second apply for the same changes.
    fn dispatched(&mut self, key: &ConfigKey, upid: pve_client::Upid, uids: &BTreeSet<String>) {
        self.retry.remove(key);
        self.pending_since.remove(key);
        for uid in uids {
            if let Some(seen) = self.seen.get_mut(uid) {
                seen.pending = false;
            }
        }
        self.in_flight.insert(
            key.clone(),
            InFlight {
                upid,
                uids: uids.clone(),
            },
        );
    }
}

impl Applier {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records what a pass of the resource `uid` saw, and says what its
    /// status shows.
    pub fn record(&self, uid: &str, seen: Seen) -> Shown {
        let mut state = self.lock();
        let key = seen.config.clone();
        let pending = seen.pending;
        let wake = pending || state.seen.get(uid) != Some(&seen);
        state.seen.insert(uid.to_owned(), seen);
        let flight = state.in_flight.get(&key);
        let failed = state.failed.get(&key).filter(|f| f.uids.contains(uid));
        let applying = flight.is_some_and(|f| f.uids.contains(uid));
        let shown = Shown {
            state: plan::apply_state(pending, applying, failed.is_some()),
            task: flight
                .filter(|_| applying)
                .map(|f| f.upid.to_string())
                .or_else(|| failed.and_then(|f| f.upid.clone())),
            failure: failed.map(|f| f.why.clone()),
        };
        drop(state);
        if wake {
            self.notify.notify_one();
        }
        shown
    }

    /// The resources `uids` will be looked at again before anything they
    /// last said counts as settled (a VNet that waited for its zone, once
    /// the zone is written).
    pub fn unsettle<'a>(&self, uids: impl IntoIterator<Item = &'a str>) {
        let mut state = self.lock();
        for uid in uids {
            if let Some(seen) = state.seen.get_mut(uid) {
                seen.settled = false;
            }
        }
    }

    fn busy(&self) -> bool {
        let state = self.lock();
        !state.in_flight.is_empty() || state.seen.values().any(|s| s.pending)
    }

    /// The configs with something to do: an apply in flight or a change
    /// pending.
    fn configs(&self) -> Vec<ConfigKey> {
        let state = self.lock();
        let mut keys: Vec<ConfigKey> = state.in_flight.keys().cloned().collect();
        for s in state.seen.values().filter(|s| s.pending) {
            if !keys.contains(&s.config) {
                keys.push(s.config.clone());
            }
        }
        keys
    }
}

/// The SDN resources of `key` in the caches: UID and generation.
fn resources(extra: &Extra, key: &ConfigKey) -> Vec<(String, Option<i64>)> {
    let zones = extra
        .zones
        .state()
        .into_iter()
        .filter(|z| ConfigKey::of(z.as_ref()) == *key);
    let zones = zones.map(|z| (z.uid().unwrap_or_default(), z.metadata.generation));
    let vnets = extra
        .vnets
        .state()
        .into_iter()
        .filter(|v| ConfigKey::of(v.as_ref()) == *key);
    let vnets = vnets.map(|v| (v.uid().unwrap_or_default(), v.metadata.generation));
    zones.chain(vnets).collect()
}

/// How to wake the resources whose status the applier changes.
#[derive(Clone)]
pub struct Wake {
    pub zones: UnboundedSender<ObjectRef<ProxmoxSDNZone>>,
    pub vnets: UnboundedSender<ObjectRef<ProxmoxVNet>>,
}

impl Wake {
    fn resources(&self, extra: &Extra, uids: &BTreeSet<String>) {
        let of = |uid: Option<String>| uid.is_some_and(|u| uids.contains(&u));
        for z in extra.zones.state().iter().filter(|z| of(z.uid())) {
            let _ = self.zones.unbounded_send(ObjectRef::from_obj(z.as_ref()));
        }
        for v in extra.vnets.state().iter().filter(|v| of(v.uid())) {
            let _ = self.vnets.unbounded_send(ObjectRef::from_obj(v.as_ref()));
        }
    }
}

/// Runs the applier until `stop` resolves.
pub async fn run(
    ctx: Arc<Context>,
    extra: Arc<Extra>,
    wake: Wake,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let applier = &extra.applier;
    loop {
        let busy = applier.busy();
        tokio::select! {
            () = stop.clone() => return,
            () = applier.notify.notified() => {}
            () = tokio::time::sleep(TICK), if busy => {}
        }
        for key in applier.configs() {
            turn(&ctx, &extra, &wake, &key).await;
        }
    }
}

/// One decision for one provider config, and its one request.
async fn turn(ctx: &Context, extra: &Extra, wake: &Wake, key: &ConfigKey) {
    let Some(hold) = ctx.shards.hold(key) else {
        return;
    };
    if hold.report_only() {
        return;
    }
    let (next, uids) = {
        let mut state = extra.applier.lock();
        let cached = resources(extra, key);
        let present: BTreeSet<&String> = cached.iter().map(|(u, _)| u).collect();
        // Resources that are gone are forgotten.
        state
            .seen
            .retain(|uid, s| s.config != *key || present.contains(uid));
        let pending: BTreeSet<String> = state
            .seen
            .iter()
            .filter(|(uid, s)| s.pending && s.config == *key && present.contains(uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        let settled = cached.iter().all(|(uid, generation)| {
            state
                .seen
                .get(uid)
                .is_some_and(|s| s.settled && s.generation == *generation)
        });
        let due = state
            .retry
            .get(key)
            .is_none_or(|(_, at)| Instant::now() >= *at);
        let in_flight = state.in_flight.contains_key(key);
        let since = if pending.is_empty() {
            state.pending_since.remove(key);
            None
        } else {
            Some(
                *state
                    .pending_since
                    .entry(key.clone())
                    .or_insert_with(Instant::now),
            )
        };
        let settled = settled || since.is_some_and(|at| at.elapsed() >= SETTLE_MAX);
        (
            plan::step(in_flight, !pending.is_empty(), settled, due),
            pending,
        )
    };
    if next == Step::Wait {
        return;
    }
    let connection = match ctx.providers.connect_to(key, true).await {
        Ok(Ok(connection)) => connection,
        Ok(Err(_)) | Err(_) => return,
    };
    let client = &connection.client;
    match next {
        Step::Observe => {
            let Some(flight) = extra.applier.lock().in_flight.get(key).cloned() else {
                return;
            };
            let outcome = match task_state(client, &flight.upid).await {
                TaskState::Finished(outcome) => outcome,
                TaskState::Running { .. } | TaskState::NotFound | TaskState::Unreadable(_) => {
                    return;
                }
            };
            let mut state = extra.applier.lock();
            state.in_flight.remove(key);
            if outcome.is_success() {
                state.failed.remove(key);
                tracing::info!(config = %key, upid = %flight.upid, "SDN configuration applied");
            } else {
                let why = format!("the SDN apply task failed: {outcome:?}");
                tracing::warn!(config = %key, upid = %flight.upid, %why, "SDN apply failed");
                state.failed.insert(
                    key.clone(),
                    Failed {
                        upid: Some(flight.upid.to_string()),
                        why,
                        uids: flight.uids.clone(),
                    },
                );
            }
            drop(state);
            wake.resources(extra, &flight.uids);
        }
        Step::Dispatch => {
            if ctx.shards.fence(&hold).is_err() {
                return;
            }
            let sent = client.apply_sdn().await;
            let mut state = extra.applier.lock();
            match sent {
                Ok(upid) => {
                    tracing::info!(config = %key, %upid, objects = uids.len(), "SDN apply started");
                    state.dispatched(key, upid, &uids);
                }
                Err(e) => {
                    let n = state.retry.get(key).map_or(0, |(n, _)| *n);
                    let wait = RETRY.saturating_mul(1 << n.min(4)).min(RETRY_MAX);
                    state
                        .retry
                        .insert(key.clone(), (n + 1, Instant::now() + wait));
                    tracing::warn!(config = %key, error = %e, retry_in_s = wait.as_secs(), "SDN apply refused");
                    state.failed.insert(
                        key.clone(),
                        Failed {
                            upid: None,
                            why: format!("Proxmox refused the SDN apply: {e}"),
                            uids: uids.clone(),
                        },
                    );
                }
            }
            drop(state);
            wake.resources(extra, &uids);
        }
        Step::Wait => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProviderConfigKind;

    fn key() -> ConfigKey {
        ConfigKey {
            kind: ProviderConfigKind::ProviderConfig,
            namespace: "ns".into(),
            name: "pve".into(),
        }
    }

    #[test]
    fn a_dispatched_apply_leaves_nothing_pending_to_send_again() {
        let applier = Applier::default();
        let seen = Seen {
            config: key(),
            generation: Some(1),
            pending: true,
            settled: true,
        };
        applier.record("zone", seen.clone());
        applier.record("vnet", seen);
        assert_eq!(applier.configs(), [key()]);
        let upid: pve_client::Upid =
            "UPID:pve:00001234:00005678:65000000:reloadnetworkall::root@pam!ci:"
                .parse()
                .unwrap();
        let uids: BTreeSet<String> = ["zone".to_owned(), "vnet".to_owned()].into();
        applier.lock().dispatched(&key(), upid, &uids);
        // The task ends: nothing of these changes is left to apply.
        applier.lock().in_flight.remove(&key());
        assert!(applier.configs().is_empty(), "no second apply");
        assert!(!applier.busy());
        // A change a later pass sees pending is applied again.
        let shown = applier.record(
            "zone",
            Seen {
                config: key(),
                generation: Some(2),
                pending: true,
                settled: true,
            },
        );
        assert_eq!(shown.state, ApplyState::Pending);
        assert_eq!(applier.configs(), [key()]);
    }
}
