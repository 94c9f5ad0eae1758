//! The task watcher: wakes a resource of any kind as soon as its Proxmox
//! task ended.
//!
//! It looks at every node with tasks of ProxmoxVMs or ProxmoxContainers in
//! flight, through the node's task list that the config's client already
//! fetches for task observation (one request per node per list interval, a
//! second by default, shared, with the exit statuses of the tasks that
//! ended), and wakes each resource whose task the list shows ended (or does
//! not show at all). So the next step follows a task's end within about a
//! second, and a resource waiting on its task needs no pass of its own
//! meanwhile. A resource that is never woken (the list could not be read)
//! still has its timer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use pve_client::{ListedTask, Upid};

use crate::api::task::InFlightTask;
use crate::reconcile::context::Context;
use crate::reconcile::identity::Identity;
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::runtime::wake::{CtRef, VmRef};

/// How often the watcher looks. The task lists it reads are refetched at
/// most once per list interval, whatever this is.
const TICK: Duration = Duration::from_millis(250);
/// A task younger than this may not be in a list fetched before it started.
const JUST_STARTED: Duration = Duration::from_secs(2);

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

/// Who to wake.
enum Who {
    Vm(VmRef),
    Container(CtRef),
}

/// A resource whose recorded task may still run.
struct InFlight {
    who: Who,
    uid: String,
    upid: Upid,
}

/// The UPID and start of a recorded task, whatever the kind's actions.
fn started<A>(task: &InFlightTask<A>) -> (&str, &Time) {
    (&task.upid, &task.started_at)
}

/// One look: wakes the resources whose task ended.
async fn look(ctx: &Context, woken: &mut HashMap<String, Upid>) {
    let now = Timestamp::now();
    // (config, node) → the resources with a task there
    let mut in_flight: HashMap<(ConfigKey, String), Vec<InFlight>> = HashMap::new();
    let mut live = HashMap::new();
    let mut see = |meta: &ObjectMeta,
                   key: ConfigKey,
                   task: Option<(&str, &Time)>,
                   who: fn(&Identity) -> Who| {
        let Some((upid, started_at)) = task else {
            return;
        };
        // A recorded UPID that does not parse is the pass's to report.
        let (Some(id), Ok(upid)) = (Identity::of(meta), Upid::parse(upid)) else {
            return;
        };
        live.insert(id.uid.clone(), upid.clone());
        let young = Duration::try_from(now.duration_since(started_at.0))
            .is_ok_and(|age| age < JUST_STARTED);
        if young || woken.get(&id.uid) == Some(&upid) {
            return;
        }
        in_flight
            .entry((key, upid.node().to_owned()))
            .or_default()
            .push(InFlight {
                who: who(&id),
                uid: id.uid,
                upid,
            });
    };
    for obj in ctx.store.state() {
        let Ok(vm) = &obj.0 else { continue };
        let task = vm
            .status
            .as_ref()
            .and_then(|s| s.at_provider.task.as_ref())
            .map(started);
        see(&vm.metadata, ConfigKey::of(vm), task, |id| {
            Who::Vm(id.object_ref())
        });
    }
    for obj in ctx.containers.state() {
        let Ok(ct) = &obj.0 else { continue };
        let task = ct
            .status
            .as_ref()
            .and_then(|s| s.at_provider.task.as_ref())
            .map(started);
        see(&ct.metadata, ConfigKey::of(ct), task, |id| {
            Who::Container(ObjectRef::new(&id.name).within(&id.namespace))
        });
    }
    // Forget resources whose task is no longer recorded.
    woken.retain(|uid, upid| live.get(uid) == Some(upid));
    for ((key, _node), tasks) in in_flight {
        // Another replica's config: its holder watches its tasks.
        if !ctx.shards.holds(&key) {
            continue;
        }
        let Some(client) = ctx.providers.client_of(&key) else {
            continue;
        };
        // All of them into the node's next list, before it is fetched.
        client.follow_tasks(tasks.iter().map(|t| &t.upid));
        for InFlight { who, uid, upid } in tasks {
            match client.listed_task(&upid).await {
                Ok(ListedTask::Running) => {}
                Ok(ListedTask::Finished | ListedTask::NotListed) => {
                    woken.insert(uid, upid);
                    match who {
                        Who::Vm(vm) => ctx.waker.wake(vm),
                        Who::Container(ct) => ctx.container_waker.wake(ct),
                    }
                }
                // The list could not be read: the resource's timer stays.
                Err(_) => break,
            }
        }
    }
}
