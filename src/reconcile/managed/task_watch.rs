//! The task watcher: wakes a resource of any kind as soon as its Proxmox
//! task ended.
//!
//! It looks at every node with tasks in flight of the kinds registered
//! with it ([`Followed`]: ProxmoxVMs and ProxmoxContainers as [`Of`], the
//! CRUD kinds whose calls start tasks as [`Plain`], by `controllers.rs`), through the node's task list that the config's
//! client already fetches for task observation (one request per node per
//! list interval, a second by default, shared, with the exit statuses of
//! the tasks that ended), and wakes each resource whose task the list
//! shows ended (at any age: a linked clone ends within the second it
//! started) or does not show at all (only once the task is old enough for
//! its absence to mean something). So the next step follows a task's end
//! within about a second, and a resource waiting on its task needs no pass
//! of its own meanwhile. An ended task's import or clone slot is given
//! back here too, and the next waiter for it woken, without waiting for
//! the pass of the resource that started it. A resource that is never
//! woken (the list could not be read) still has its timer.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use pve_client::{ListedTask, Upid};
use serde::de::DeserializeOwned;

use crate::api::meta::ConfigUser;
use crate::api::task::RecordsTask;
use crate::reconcile::context::Context;
use crate::reconcile::identity::Identity;
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::runtime::changes::Changes;
use crate::reconcile::runtime::wake::Waker;

/// What a [`Followed`] kind shows of each resource that records a task:
/// its metadata, its config and the task (UPID, start).
pub type See<'s> = dyn FnMut(&ObjectMeta, ConfigKey, (&str, &Time)) + 's;

/// What the watcher needs of a kind that runs tasks: its resources with
/// what their status records, and a way to wake one.
pub trait Followed: Send + Sync {
    /// Shows `see` each cached resource whose status records a task: its
    /// metadata, its config and the task (UPID, start); once per task for
    /// a resource that records several. Only those: the watcher looks four
    /// times a second, and most resources (every settled one) record none,
    /// so nothing is made for them (a config key is two strings).
    fn each(&self, see: &mut See<'_>);
    /// Asks for a pass of `namespace/name`.
    fn wake(&self, namespace: &str, name: &str);
    /// The count of its cache's changes, when its watch keeps one: the
    /// watcher calls [`Followed::each`] again only once it moved. `None`:
    /// at every look (a kind with few resources).
    fn changes(&self) -> Option<u64> {
        None
    }
}

/// The resources of kind `K`: its controller's cache, the count of the
/// changes its watch put into it, and its waker.
pub struct Of<
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug + Send + Sync + 'static,
> {
    pub store: Store<DeserializeGuard<K>>,
    pub changes: Changes,
    pub waker: Waker<DeserializeGuard<K>>,
}

impl<K> Followed for Of<K>
where
    K: RecordsTask
        + ConfigUser
        + Resource<DynamicType = ()>
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn each(&self, see: &mut See<'_>) {
        for obj in self.store.state() {
            let Ok(k) = &obj.0 else { continue };
            if let Some(task) = k.recorded_task() {
                see(ConfigUser::meta(k), ConfigKey::of(k), task);
            }
        }
    }

    fn wake(&self, namespace: &str, name: &str) {
        self.waker.wake(ObjectRef::new(name).within(namespace));
    }

    fn changes(&self) -> Option<u64> {
        Some(self.changes.count())
    }
}

/// The resources of a CRUD kind `K` whose calls start tasks
/// (`managed::crud::task`): its controller's cache (plain, not guarded)
/// and the channel of its wake-ups.
pub struct Plain<K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static> {
    pub store: Store<K>,
    pub wake: UnboundedSender<ObjectRef<K>>,
}

impl<K> Followed for Plain<K>
where
    K: RecordsTask
        + ConfigUser
        + Resource<DynamicType = ()>
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn each(&self, see: &mut See<'_>) {
        for k in self.store.state() {
            if let Some(task) = k.recorded_task() {
                see(
                    ConfigUser::meta(k.as_ref()),
                    ConfigKey::of(k.as_ref()),
                    task,
                );
            }
        }
    }

    fn wake(&self, namespace: &str, name: &str) {
        // Closed only when the controller stopped.
        let _ = self
            .wake
            .unbounded_send(ObjectRef::new(name).within(namespace));
    }
}

/// How often the watcher looks. The task lists it reads are refetched at
/// most once per list interval, whatever this is.
const TICK: Duration = Duration::from_millis(250);
/// A task younger than this may not be in a list fetched before it started
/// (by another replica, before a restart): its absence from the list says
/// nothing yet. A list that shows it ended says so at any age (a linked
/// clone ends in a fraction of a second).
const JUST_STARTED: Duration = Duration::from_secs(2);

/// What the watcher does about one followed task, from what the node's
/// list says of it and whether it is younger than [`JUST_STARTED`]. Pure,
/// so every case is table-tested; a wake-up is a hint, the pass decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// It ended (listed with an exit status, or known ended): wake now.
    Ended,
    /// Not in a list that should show it: wake, the pass looks into it.
    Missing,
    /// Running, or too young for its absence to mean anything: look again.
    Wait,
}

fn verdict(listed: ListedTask, young: bool) -> Verdict {
    match listed {
        ListedTask::Finished => Verdict::Ended,
        ListedTask::NotListed if !young => Verdict::Missing,
        ListedTask::NotListed | ListedTask::Running => Verdict::Wait,
    }
}

/// Runs the task watcher over the kinds of `followed` until `stop`
/// resolves.
pub async fn watch_tasks(
    ctx: Arc<Context>,
    followed: Vec<Box<dyn Followed>>,
    stop: impl Future<Output = ()>,
) {
    let mut woken: HashSet<(String, Upid)> = HashSet::new();
    let mut recorded = Recorded::new(followed.len());
    let run = async {
        loop {
            tokio::time::sleep(TICK).await;
            look(&ctx, &followed, &mut recorded, &mut woken).await;
        }
    };
    tokio::select! {
        () = run => {}
        () = stop => {}
    }
}

/// A task a resource's status records.
struct Task {
    /// Its resource's kind (an index into the followed kinds), namespace
    /// and name.
    who: (usize, String, String),
    uid: String,
    key: ConfigKey,
    upid: Upid,
    started_at: Timestamp,
}

/// The tasks each followed kind's resources record, as last read from its
/// cache, with the count of the cache's changes they were read at: read
/// again only once the count moved (or at every look, for a kind without
/// one). At 1,000 VMs reading the cache four times a second was 3% of
/// the provider's CPU while creating them, and went on at rest, where
/// nothing changes; while they are created the cache changes about as
/// often as it is read, and is read as before.
struct Recorded {
    kinds: Vec<(Option<u64>, Vec<Task>)>,
}

impl Recorded {
    fn new(kinds: usize) -> Self {
        Self {
            kinds: (0..kinds).map(|_| (None, Vec::new())).collect(),
        }
    }

    /// The tasks of kind `kind`, read from `source` if its cache changed.
    fn of(&mut self, kind: usize, source: &dyn Followed) -> &[Task] {
        let Some((read_at, tasks)) = self.kinds.get_mut(kind) else {
            return &[];
        };
        // The count before the cache: a change while it is read is read
        // again at the next look.
        let count = source.changes();
        if count.is_none() || count != *read_at {
            tasks.clear();
            source.each(&mut |meta, key, (upid, started_at)| {
                // A recorded UPID that does not parse is the pass's to
                // report.
                let (Some(id), Ok(upid)) = (Identity::of(meta), Upid::parse(upid)) else {
                    return;
                };
                tasks.push(Task {
                    who: (kind, id.namespace, id.name),
                    uid: id.uid,
                    key,
                    upid,
                    started_at: started_at.0,
                });
            });
            *read_at = count;
        }
        tasks
    }
}

/// A resource whose recorded task may still run.
struct InFlight {
    /// Its kind (an index into the followed kinds), namespace and name.
    who: (usize, String, String),
    uid: String,
    upid: Upid,
    /// Younger than [`JUST_STARTED`].
    young: bool,
}

/// One look: wakes the resources whose task ended.
async fn look(
    ctx: &Context,
    followed: &[Box<dyn Followed>],
    recorded: &mut Recorded,
    woken: &mut HashSet<(String, Upid)>,
) {
    let now = Timestamp::now();
    // (config, node) → the resources with a task there
    let mut in_flight: HashMap<(ConfigKey, String), Vec<InFlight>> = HashMap::new();
    // (resource UID, UPID): a resource may follow several tasks (an
    // image's downloads, one per node).
    let mut live = HashSet::new();
    for (kind, source) in followed.iter().enumerate() {
        for task in recorded.of(kind, source.as_ref()) {
            let id = (task.uid.clone(), task.upid.clone());
            let ended_seen = woken.contains(&id);
            live.insert(id);
            if ended_seen {
                continue;
            }
            let young = Duration::try_from(now.duration_since(task.started_at))
                .is_ok_and(|age| age < JUST_STARTED);
            in_flight
                .entry((task.key.clone(), task.upid.node().to_owned()))
                .or_default()
                .push(InFlight {
                    who: task.who.clone(),
                    uid: task.uid.clone(),
                    upid: task.upid.clone(),
                    young,
                });
        }
    }
    // Forget the tasks no longer recorded.
    woken.retain(|task| live.contains(task));
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
        for InFlight {
            who,
            uid,
            upid,
            young,
        } in tasks
        {
            let listed = match client.listed_task(&upid).await {
                Ok(listed) => listed,
                // The list could not be read: the resource's timer stays.
                Err(_) => break,
            };
            let verdict = verdict(listed, young);
            if verdict == Verdict::Wait {
                continue;
            }
            if verdict == Verdict::Ended {
                // Its slot (an import or clone) is free now: the next
                // waiter is woken from here, not after this resource's own
                // pass has waited for its turn.
                for vm in ctx.scheduler.task_ended(&key, &upid) {
                    ctx.waker.wake(vm);
                }
            }
            woken.insert((uid, upid));
            let (kind, namespace, name) = who;
            if let Some(source) = followed.get(kind) {
                source.wake(&namespace, &name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::api::meta::ProviderConfigKind;

    /// A kind whose cache holds the tasks in `tasks` (name, UPID), counting
    /// how often it was read.
    struct Fake {
        tasks: Mutex<Vec<(&'static str, &'static str)>>,
        changes: Option<Changes>,
        reads: AtomicUsize,
    }

    impl Fake {
        fn new(changes: Option<Changes>) -> Self {
            Self {
                tasks: Mutex::new(vec![("vm-1", UPID_1)]),
                changes,
                reads: AtomicUsize::new(0),
            }
        }
    }

    const UPID_1: &str = "UPID:pve:00001234:00005678:6B49D200:qmcreate:100:root@pam:";
    const UPID_2: &str = "UPID:pve2:00001235:00005679:6B49D201:qmstart:101:root@pam:";

    impl Followed for Fake {
        fn each(&self, see: &mut See<'_>) {
            self.reads.fetch_add(1, Ordering::SeqCst);
            let key = ConfigKey {
                kind: ProviderConfigKind::ClusterProviderConfig,
                namespace: String::new(),
                name: "pve".into(),
            };
            for (name, upid) in self.tasks.lock().unwrap().iter() {
                let meta = ObjectMeta {
                    name: Some((*name).into()),
                    namespace: Some("ns".into()),
                    uid: Some(format!("uid-{name}")),
                    ..ObjectMeta::default()
                };
                see(&meta, key.clone(), (upid, &Time(Timestamp::UNIX_EPOCH)));
            }
        }

        fn wake(&self, _: &str, _: &str) {}

        fn changes(&self) -> Option<u64> {
            self.changes.as_ref().map(Changes::count)
        }
    }

    fn upids(tasks: &[Task]) -> Vec<String> {
        tasks.iter().map(|t| t.upid.to_string()).collect()
    }

    #[test]
    fn a_counted_cache_is_read_again_only_once_it_changed() {
        let changes = Changes::default();
        let fake = Fake::new(Some(changes.clone()));
        let mut recorded = Recorded::new(1);
        assert_eq!(upids(recorded.of(0, &fake)), [UPID_1]);
        assert_eq!(upids(recorded.of(0, &fake)), [UPID_1]);
        assert_eq!(fake.reads.load(Ordering::SeqCst), 1, "unchanged: not read");
        // A change the count has not told of yet is not seen...
        fake.tasks.lock().unwrap().push(("vm-2", UPID_2));
        assert_eq!(upids(recorded.of(0, &fake)), [UPID_1]);
        // ...and is once it did.
        changes.bump();
        assert_eq!(upids(recorded.of(0, &fake)), [UPID_1, UPID_2]);
        assert_eq!(fake.reads.load(Ordering::SeqCst), 2);
        let task = &recorded.of(0, &fake)[1];
        assert_eq!(task.who, (0, "ns".to_owned(), "vm-2".to_owned()));
        assert_eq!(task.uid, "uid-vm-2");
    }

    #[test]
    fn a_cache_without_a_count_is_read_at_every_look() {
        let fake = Fake::new(None);
        let mut recorded = Recorded::new(1);
        recorded.of(0, &fake);
        fake.tasks.lock().unwrap().clear();
        assert!(recorded.of(0, &fake).is_empty(), "read again: gone");
        assert_eq!(fake.reads.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_end_the_list_shows_wakes_at_any_age_an_absence_only_when_old() {
        use ListedTask::*;
        let table = [
            (Finished, false, Verdict::Ended),
            (Finished, true, Verdict::Ended),
            (NotListed, false, Verdict::Missing),
            (NotListed, true, Verdict::Wait),
            (Running, false, Verdict::Wait),
            (Running, true, Verdict::Wait),
        ];
        for (listed, young, expected) in table {
            assert_eq!(
                verdict(listed, young),
                expected,
                "{listed:?}, young {young}"
            );
        }
    }
}
