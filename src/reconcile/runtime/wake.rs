//! Waking a resource as soon as what it waits for happened, rather than at
//! its next timer.
//!
//! * **A task ended.** The task watcher looks at every node with tasks of
//!   ProxmoxVMs in flight, through the node's active-task list that the
//!   config's client already fetches for task observation (one request per
//!   node per poll interval, shared), and wakes each resource whose task the
//!   list no longer shows running. So the next step follows a task's end
//!   within about half a poll interval on average, and a resource waiting
//!   on its task does not need a pass of its own every poll interval.
//! * **A slot freed.** The scheduler hands a node's freed import or clone
//!   slot to the resource that has waited longest for one (see
//!   `schedule::slots`); the pass that freed it wakes that resource.
//!
//! Every wake-up is an ordinary trigger of the controller: a pass of that
//! resource, which decides from what it then observes. A resource that is
//! never woken (the list could not be read) still has its timer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::jiff::Timestamp;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;

use pve_client::Upid;

use super::context::Context;
use crate::api::ProxmoxVM;
use crate::reconcile::identity::Identity;
use crate::reconcile::providers::ConfigKey;

/// A reference to a ProxmoxVM, as the controller's triggers take it.
pub type VmRef = ObjectRef<DeserializeGuard<ProxmoxVM>>;

/// How often the watcher looks. The active lists it reads are refetched at
/// most once per poll interval, whatever this is.
const TICK: Duration = Duration::from_millis(500);
/// A task younger than this may not be in a list fetched before it started.
const JUST_STARTED: Duration = Duration::from_secs(2);

/// Asks the controller for passes.
#[derive(Clone, Debug)]
pub struct Waker {
    sender: Option<UnboundedSender<VmRef>>,
}

impl Waker {
    /// Wakes through `sender` (the controller's extra trigger stream).
    pub fn new(sender: UnboundedSender<VmRef>) -> Self {
        Self {
            sender: Some(sender),
        }
    }

    /// A waker that wakes nothing (no controller runs).
    pub fn none() -> Self {
        Self { sender: None }
    }

    /// Asks for a pass of `vm`.
    pub fn wake(&self, vm: VmRef) {
        if let Some(sender) = &self.sender {
            // Closed only when the controller stopped: nothing to wake.
            let _ = sender.unbounded_send(vm);
        }
    }
}

/// Runs the task watcher until `stop` resolves.
pub async fn watch_tasks(ctx: Arc<Context>, stop: impl Future<Output = ()>) {
    let mut woken: HashMap<String, Upid> = HashMap::new();
    let run = async {
        loop {
            tokio::time::sleep(TICK).await;
            look(&ctx, &mut woken).await;
        }
    };
    tokio::select! {
        () = run => {}
        () = stop => {}
    }
}

/// A resource whose recorded task may still run.
struct InFlight {
    vm: VmRef,
    uid: String,
    upid: Upid,
}

/// One look: wakes the resources whose task ended.
async fn look(ctx: &Context, woken: &mut HashMap<String, Upid>) {
    let now = Timestamp::now();
    // (config, node) → the resources with a task there
    let mut in_flight: HashMap<(ConfigKey, String), Vec<InFlight>> = HashMap::new();
    let mut live = HashMap::new();
    for obj in ctx.store.state() {
        let Ok(vm) = &obj.0 else { continue };
        let Some(task) = vm.status.as_ref().and_then(|s| s.at_provider.task.as_ref()) else {
            continue;
        };
        // A recorded UPID that does not parse is the pass's to report.
        let (Some(id), Ok(upid)) = (Identity::of(&vm.metadata), Upid::parse(&task.upid)) else {
            continue;
        };
        live.insert(id.uid.clone(), upid.clone());
        let young = Duration::try_from(now.duration_since(task.started_at.0))
            .is_ok_and(|age| age < JUST_STARTED);
        if young || woken.get(&id.uid) == Some(&upid) {
            continue;
        }
        in_flight
            .entry((ConfigKey::of(vm), upid.node().to_owned()))
            .or_default()
            .push(InFlight {
                vm: id.object_ref(),
                uid: id.uid,
                upid,
            });
    }
    // Forget resources whose task is no longer recorded.
    woken.retain(|uid, upid| live.get(uid) == Some(upid));
    for ((key, node), tasks) in in_flight {
        let Some(client) = ctx.providers.client_of(&key) else {
            continue;
        };
        let Ok(listed) = client.active_tasks(&node).await else {
            continue;
        };
        for InFlight { vm, uid, upid } in tasks {
            let running = listed
                .iter()
                .any(|e| e.is_running() && e.parsed_upid().as_ref() == Some(&upid));
            if !running {
                woken.insert(uid, upid);
                ctx.waker.wake(vm);
            }
        }
    }
}
