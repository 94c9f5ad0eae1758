//! Observing many tasks cheaply.
//!
//! The reconciler never waits for a task: it stores the UPID and asks
//! "what is known now?" on every reconcile. With hundreds of tasks in flight
//! that question must not cost one request per task per poll. So, in
//! [`ObserveMode::Batched`] (the default):
//!
//! * one `GET /nodes/{node}/tasks?source=all&since=T` per node per list
//!   interval (a second by default) answers for every task on that node, running or finished,
//!   where `T` is the start of the oldest task observed there whose end is
//!   not known yet: the active part lists it as `RUNNING` while it runs (a
//!   task that just stopped stays listed as `RUNNING` until PVE's archival
//!   pass, usually at once and at most pvestatd's 10 s cycle), and the
//!   archive part lists it with its exit status once it ended. With no such
//!   task the list is `source=active` (what runs there: for adoption and
//!   the task watcher). The list is fetched by one caller while the others
//!   wait for it (single flight per node) and then reused until the
//!   interval has passed; it is asked for only while tasks are observed or
//!   followed there; once more at the expected end of a long task started
//!   here (as long as the last tasks of its type took on that node:
//!   [`ends`]), so that its end is known within a fraction of the interval;
//! * only a task missing from the list (newer than the list, or started
//!   before the `since` it was fetched with) costs a `GET .../status` of
//!   its own; a failed task costs one more request for its log tail;
//! * a finished task's outcome is cached, so observing it again is free.
//!
//! The request rate therefore grows with the number of nodes and of tasks
//! that *finish*, not with the number of tasks in flight.
//! [`ObserveMode::PerTask`] asks `status` for every observation and exists
//! for comparison and as a fallback.

mod ends;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::client::Client;
use crate::config::ObserveMode;
use crate::error::{Error, Result};
use crate::task::{
    TaskListEntry, TaskListFilter, TaskObservation, TaskOutcome, is_no_such_task, last_progress,
};
use crate::upid::Upid;

/// Active-list size asked for. PVE's default is 50 (and current PVE lists
/// nothing for `limit=0`);
/// if a node ever lists this many, absence from the list proves nothing and
/// the observer falls back to per-task status.
const ACTIVE_LIST_LIMIT: u32 = 5000;

/// Minimum time between two sweeps of the task map.
const PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Log lines read per progress update.
const PROGRESS_READ_LIMIT: u32 = 1000;

/// How to observe one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObserveOptions {
    pub mode: ObserveMode,
    /// Also read new log lines of a running task to report progress. This
    /// costs one request per running task per observation.
    pub progress: bool,
}

/// Bookkeeping shared by all clones of a client.
#[derive(Debug, Default)]
pub(crate) struct ObserverState {
    nodes: Mutex<HashMap<String, Arc<NodeSlot>>>,
    tasks: Mutex<HashMap<Upid, TaskBook>>,
    last_prune: Mutex<Option<Instant>>,
    /// How long tasks took, for the list read at a long task's expected
    /// end ([`ends`]).
    ends: Mutex<ends::Ends>,
}

#[derive(Debug, Default)]
struct NodeSlot {
    /// Held while the list is fetched: the single-flight lock.
    snapshot: tokio::sync::Mutex<Option<Arc<ActiveSnapshot>>>,
    /// When this client last started a task on the node (or tried to).
    dispatched: Mutex<Option<Instant>>,
}

/// One node's active-task list at one moment.
#[derive(Debug)]
pub(crate) struct ActiveSnapshot {
    fetched_at: Instant,
    /// Where the list interval runs from: the fetch, or for a read made
    /// at a task's expected end that showed no end, the read before
    /// (that read is one more, not one instead).
    cadence_from: Instant,
    /// The entries as listed.
    listed: Vec<TaskListEntry>,
    /// UPID → its entry's index in `listed`.
    by_upid: HashMap<String, usize>,
}

impl ActiveSnapshot {
    pub(crate) fn from_entries(listed: Vec<TaskListEntry>, fetched_at: Instant) -> Self {
        let by_upid = listed
            .iter()
            .enumerate()
            .map(|(i, e)| (e.upid.clone(), i))
            .collect();
        Self {
            fetched_at,
            cadence_from: fetched_at,
            listed,
            by_upid,
        }
    }

    /// False when the list may have been cut at the limit.
    fn complete(&self) -> bool {
        self.listed.len() < ACTIVE_LIST_LIMIT as usize
    }

    /// What the list says about `upid`.
    /// A task this client started after the list was fetched
    /// (`started_here`) cannot be in it: it counts as running, and the next
    /// list shows it.
    pub(crate) fn lookup(&self, upid: &Upid, started_here: Option<Instant>) -> Listed {
        let Some(entry) = self.by_upid.get(upid.as_str()).map(|&i| &self.listed[i]) else {
            return if started_here > Some(self.fetched_at) {
                Listed::Running
            } else {
                Listed::Absent
            };
        };
        match &entry.status {
            Some(status) if !entry.is_running() => Listed::Finished(status.clone()),
            _ => Listed::Running,
        }
    }
}

/// What a node's task list says of one task (see [`Client::listed_task`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListedTask {
    /// It runs (or was started after the list was fetched).
    Running,
    /// It ended.
    Finished,
    /// The list does not show it.
    NotListed,
}

/// A task's presence in an active list.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Listed {
    Running,
    Finished(String),
    Absent,
}

/// What the observer remembers per task.
#[derive(Debug, Clone)]
struct TaskBook {
    first_seen: Instant,
    /// When this client started the task (its UPID came back to a write):
    /// a list fetched before cannot show it, and says nothing of it.
    started_here: Option<Instant>,
    last_seen: Instant,
    outcome: Option<TaskOutcome>,
    log_cursor: u64,
    progress: Option<crate::task::Progress>,
    /// When the log was last read for progress.
    progress_read: Option<Instant>,
    /// When the latest node list that showed it running was asked for.
    listed_running: Option<Instant>,
    /// A node list showed its end.
    end_listed: bool,
}

impl TaskBook {
    fn new(now: Instant) -> Self {
        Self {
            first_seen: now,
            started_here: None,
            last_seen: now,
            outcome: None,
            log_cursor: 0,
            progress: None,
            progress_read: None,
            listed_running: None,
            end_listed: false,
        }
    }

    /// When this client started the task, while a node list has not shown
    /// its end and its outcome is not known: the tasks whose end the
    /// lists are watched for ([`ends`]).
    fn awaiting_end(&self) -> Option<Instant> {
        self.started_here
            .filter(|_| !self.end_listed && self.outcome.is_none())
    }

    /// Whether the progress is worth a log read now: once the task has run
    /// for `every` since it was first seen, then every `every`. A task that
    /// ends sooner costs no log read at all (its progress would be out of
    /// date before anyone saw it).
    fn progress_due(&self, now: Instant, every: std::time::Duration) -> bool {
        let since = self.progress_read.unwrap_or(self.first_seen);
        now.saturating_duration_since(since) >= every
    }
}

impl ObserverState {
    /// Records an observation of `upid` and returns its book entry.
    fn touch(&self, upid: &Upid, now: Instant) -> TaskBook {
        let mut tasks = self.tasks.lock().expect("observer task map poisoned");
        let book = tasks
            .entry(upid.clone())
            .or_insert_with(|| TaskBook::new(now));
        book.last_seen = now;
        book.clone()
    }

    fn update(&self, upid: &Upid, f: impl FnOnce(&mut TaskBook)) {
        let mut tasks = self.tasks.lock().expect("observer task map poisoned");
        if let Some(book) = tasks.get_mut(upid) {
            f(book);
        }
    }

    fn forget(&self, upid: &Upid) {
        self.tasks
            .lock()
            .expect("observer task map poisoned")
            .remove(upid);
    }

    /// Drops entries nobody asked about for `retain`; runs at most once a
    /// minute so observing stays O(1) per task.
    fn prune(&self, now: Instant, retain: std::time::Duration) {
        {
            let mut last = self
                .last_prune
                .lock()
                .expect("observer prune clock poisoned");
            if last.is_some_and(|t| now.saturating_duration_since(t) < PRUNE_EVERY) {
                return;
            }
            *last = Some(now);
        }
        let mut tasks = self.tasks.lock().expect("observer task map poisoned");
        tasks.retain(|_, b| now.saturating_duration_since(b.last_seen) < retain);
    }

    fn node_slot(&self, node: &str) -> Arc<NodeSlot> {
        let mut nodes = self.nodes.lock().expect("observer node map poisoned");
        Arc::clone(nodes.entry(node.to_owned()).or_default())
    }

    /// A task was just started on `node` (or may have been: `upid` is what
    /// came back). A list of the node's running tasks asked for after this
    /// ([`Client::active_tasks`]) is fetched after it, so it shows the task;
    /// observing the task itself reuses the current list and takes the
    /// task's absence there for "not listed yet", i.e. running.
    pub(crate) fn dispatched(&self, node: &str, upid: Option<&Upid>) {
        let now = Instant::now();
        *self
            .node_slot(node)
            .dispatched
            .lock()
            .expect("observer node slot poisoned") = Some(now);
        if let Some(upid) = upid {
            self.touch(upid, now);
            self.update(upid, |book| book.started_here = Some(now));
        }
    }

    /// When this client last started a task on `node`.
    fn last_dispatch(&self, node: &str) -> Option<Instant> {
        *self
            .node_slot(node)
            .dispatched
            .lock()
            .expect("observer node slot poisoned")
    }

    /// Whether a task started here on `node` was expected to end after the
    /// list of `fetched_at` and by `now` (one more read of the list is
    /// due for it; see [`ends`]).
    fn end_due(
        &self,
        node: &str,
        fetched_at: Instant,
        now: Instant,
        interval: std::time::Duration,
    ) -> bool {
        let tasks = self.tasks.lock().expect("observer task map poisoned");
        let ends = self.ends.lock().expect("observer task ends poisoned");
        // What each task type is expected to take here, looked up once per
        // type: the lookup sorts the type's samples, and thousands of
        // tasks of a few types may await their end on one node.
        let mut expected: Vec<(&str, Option<std::time::Duration>)> = Vec::new();
        tasks.iter().any(|(upid, book)| {
            let Some(started) = book.awaiting_end() else {
                return false;
            };
            if upid.node() != node {
                return false;
            }
            let kind = upid.task_type();
            let took = match expected.iter().find(|(k, _)| *k == kind) {
                Some((_, took)) => *took,
                None => {
                    let took = ends.expected(node, kind);
                    expected.push((kind, took));
                    took
                }
            };
            took.and_then(|took| ends::due(started, took, interval))
                .is_some_and(|due| fetched_at < due && due <= now)
        })
    }

    /// What a new list of `node`, asked for at `asked`, shows of the tasks
    /// started here: running (the latest such list is kept) or ended (how
    /// long it took is recorded). Returns how many it shows ended.
    fn saw_list(&self, node: &str, snapshot: &ActiveSnapshot, asked: Instant) -> usize {
        let mut samples = vec![];
        {
            let mut tasks = self.tasks.lock().expect("observer task map poisoned");
            for (upid, book) in tasks.iter_mut() {
                let Some(started) = book.awaiting_end() else {
                    continue;
                };
                if upid.node() != node || started > asked {
                    continue;
                }
                match snapshot.lookup(upid, book.started_here) {
                    Listed::Running => book.listed_running = Some(asked),
                    Listed::Finished(_) => {
                        book.end_listed = true;
                        samples.push((upid.task_type().to_owned(), started, book.listed_running));
                    }
                    Listed::Absent => {}
                }
            }
        }
        let mut ends = self.ends.lock().expect("observer task ends poisoned");
        for (kind, started, running) in &samples {
            ends.record((node, kind), *started, *running, snapshot.fetched_at);
        }
        samples.len()
    }

    /// The start of the oldest task on `node` whose end is not known yet:
    /// the `since` of the node's next list.
    fn oldest_unfinished(&self, node: &str) -> Option<u32> {
        self.tasks
            .lock()
            .expect("observer task map poisoned")
            .iter()
            .filter(|(upid, book)| book.outcome.is_none() && upid.node() == node)
            .map(|(upid, _)| upid.starttime())
            .min()
    }

    /// Number of tasks currently tracked (for tests and metrics).
    pub(crate) fn tracked(&self) -> usize {
        self.tasks.lock().expect("observer task map poisoned").len()
    }
}

impl Client {
    /// Returns at once what is known about a task, with the configured
    /// [`ObserveMode`]. Never waits for the task to finish.
    pub async fn observe_task(&self, upid: &Upid) -> Result<TaskObservation> {
        self.observe_task_with(
            upid,
            ObserveOptions {
                mode: self.task_options().observe_mode,
                progress: false,
            },
        )
        .await
    }

    /// Like [`Client::observe_task`], and reads new log lines of a running
    /// task to report its progress (`transferred X of Y (pp.pp%)`).
    pub async fn observe_task_progress(&self, upid: &Upid) -> Result<TaskObservation> {
        self.observe_task_with(
            upid,
            ObserveOptions {
                mode: self.task_options().observe_mode,
                progress: true,
            },
        )
        .await
    }

    /// Observes a task with explicit options.
    pub async fn observe_task_with(
        &self,
        upid: &Upid,
        opts: ObserveOptions,
    ) -> Result<TaskObservation> {
        let state = self.observer_state();
        let now = Instant::now();
        state.prune(now, self.task_options().retain_finished);
        let book = state.touch(upid, now);
        if let Some(outcome) = book.outcome {
            return Ok(TaskObservation::Finished(outcome));
        }

        if opts.mode == ObserveMode::Batched {
            match self.active_snapshot(upid.node(), None).await {
                Ok(snapshot) => match snapshot.lookup(upid, book.started_here) {
                    Listed::Running => return self.running(upid, &book, opts.progress).await,
                    Listed::Finished(status) => return self.finished(upid, &status).await,
                    Listed::Absent => {}
                },
                Err(err) => {
                    // The list is an optimisation; per-task status still works.
                    tracing::debug!(node = upid.node(), error = %err, "active task list unavailable");
                }
            }
        }

        match self.task_status(upid).await {
            Ok(status) if status.is_running() => self.running(upid, &book, opts.progress).await,
            Ok(status) => {
                let exit = status
                    .exitstatus
                    .unwrap_or_else(|| "unexpected status".to_owned());
                self.finished(upid, &exit).await
            }
            Err(err) if is_no_such_task(&err) => {
                let grace = self.task_options().not_visible_grace;
                if now.saturating_duration_since(book.first_seen) < grace {
                    Ok(TaskObservation::NotVisibleYet)
                } else {
                    state.forget(upid);
                    Err(Error::TaskUnknown { upid: upid.clone() })
                }
            }
            Err(err) => Err(err),
        }
    }

    async fn finished(&self, upid: &Upid, exit_status: &str) -> Result<TaskObservation> {
        let outcome = self.outcome_of(upid, exit_status).await?;
        let cached = outcome.clone();
        self.observer_state()
            .update(upid, move |book| book.outcome = Some(cached));
        Ok(TaskObservation::Finished(outcome))
    }

    async fn running(
        &self,
        upid: &Upid,
        book: &TaskBook,
        progress: bool,
    ) -> Result<TaskObservation> {
        let every = self.task_options().progress_every;
        if !progress || !book.progress_due(Instant::now(), every) {
            return Ok(TaskObservation::Running {
                progress: book.progress,
            });
        }
        let log = self
            .task_log(upid, book.log_cursor, PROGRESS_READ_LIMIT)
            .await?;
        // An empty log reads as one placeholder line "no content"; do not
        // let it advance the cursor past the real first line.
        let placeholder =
            book.log_cursor == 0 && log.lines.len() == 1 && log.lines[0].t == "no content";
        let (newest, cursor) = if placeholder {
            (None, 0)
        } else {
            (
                last_progress(&log.lines),
                log.lines.last().map_or(book.log_cursor, |l| l.n),
            )
        };
        let progress = newest.or(book.progress);
        self.observer_state().update(upid, |b| {
            b.log_cursor = b.log_cursor.max(cursor);
            b.progress = progress;
            b.progress_read = Some(Instant::now());
        });
        Ok(TaskObservation::Running { progress })
    }

    /// The node's task list, fetched at most once per poll interval no
    /// matter how many callers ask, and after `after` when given.
    async fn active_snapshot(
        &self,
        node: &str,
        after: Option<Instant>,
    ) -> Result<Arc<ActiveSnapshot>> {
        let state = self.observer_state();
        let slot = state.node_slot(node);
        let mut guard = slot.snapshot.lock().await;
        let options = self.task_options();
        let interval = options.list_every.min(options.poll_interval);
        let asked = Instant::now();
        // Read again once the interval has passed, after a task started
        // here since, or at a long task's expected end.
        let (regular, cadence) = match guard.as_ref() {
            None => (true, asked),
            Some(snapshot) => {
                let regular = asked.saturating_duration_since(snapshot.cadence_from) >= interval
                    || after.is_some_and(|after| snapshot.fetched_at <= after);
                if !regular && !state.end_due(node, snapshot.fetched_at, asked, interval) {
                    return Ok(Arc::clone(snapshot));
                }
                (regular, snapshot.cadence_from)
            }
        };
        // Finished tasks too, as far back as a task observed here whose end
        // is not known: their exit status comes with the list.
        let since = state.oldest_unfinished(node);
        let filter = TaskListFilter {
            source: Some(if since.is_some() { "all" } else { "active" }.to_owned()),
            limit: Some(ACTIVE_LIST_LIMIT),
            since,
            ..TaskListFilter::default()
        };
        let entries = self.list_tasks(node, &filter).await?;
        let mut snapshot = ActiveSnapshot::from_entries(entries, Instant::now());
        if state.saw_list(node, &snapshot, asked) == 0 && !regular {
            snapshot.cadence_from = cadence;
        }
        let snapshot = Arc::new(snapshot);
        if !snapshot.complete() {
            tracing::warn!(node, "active task list hit its limit; observing per task");
            *guard = None;
            return Err(Error::protocol("active task list truncated"));
        }
        *guard = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }

    /// The tasks `GET /nodes/{node}/tasks?source=active` lists, shared with
    /// task observation: fetched at most once per poll interval for all
    /// callers, and always after the last task this client started on the
    /// node (starting one invalidates the list). A task that stopped but
    /// is not archived yet is still listed as `RUNNING`; exit statuses
    /// appear only while PVE cannot write its task index (see
    /// [`TaskListEntry::is_running`]).
    pub async fn active_tasks(&self, node: &str) -> Result<Vec<TaskListEntry>> {
        let after = self.observer_state().last_dispatch(node);
        Ok(self.active_snapshot(node, after).await?.listed.clone())
    }

    /// The node's current task list, as shared for task observation: at most
    /// one poll interval old, and possibly fetched before this client's last
    /// task there (for counting what runs, where a task just started is
    /// accounted for otherwise).
    pub async fn latest_tasks(&self, node: &str) -> Result<Vec<TaskListEntry>> {
        Ok(self.active_snapshot(node, None).await?.listed.clone())
    }

    /// Whether the node's current list shows `upid` running, without a
    /// request of its own beyond the shared list (the task watcher's
    /// question). A task this client started after the list was fetched
    /// counts as running; [`ListedTask::NotListed`] is for the pass to look
    /// into.
    pub async fn listed_task(&self, upid: &Upid) -> Result<ListedTask> {
        let state = self.observer_state();
        let book = state.touch(upid, Instant::now());
        if book.outcome.is_some() {
            return Ok(ListedTask::Finished);
        }
        let snapshot = self.active_snapshot(upid.node(), None).await?;
        Ok(match snapshot.lookup(upid, book.started_here) {
            Listed::Running => ListedTask::Running,
            Listed::Finished(_) => ListedTask::Finished,
            Listed::Absent => ListedTask::NotListed,
        })
    }

    /// Makes the observer answer for these tasks in the next list of their
    /// node (they are followed without being observed one by one: the task
    /// watcher).
    pub fn follow_tasks<'a>(&self, upids: impl IntoIterator<Item = &'a Upid>) {
        let state = self.observer_state();
        let now = Instant::now();
        for upid in upids {
            state.touch(upid, now);
        }
    }

    /// Number of tasks the observer remembers.
    pub fn observed_tasks(&self) -> usize {
        self.observer_state().tracked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn upid(pid: u32) -> Upid {
        Upid::encode(
            "pve",
            pid,
            0x0D01_5579,
            0x68BF_3A41,
            "qmcreate",
            "100",
            "root@pam",
        )
        .unwrap()
    }

    fn entry(u: &Upid, status: Option<&str>) -> TaskListEntry {
        serde_json::from_value(serde_json::json!({"upid": u.as_str(), "status": status})).unwrap()
    }

    #[test]
    fn snapshot_lookup() {
        let (a, b, c, d) = (upid(1), upid(2), upid(3), upid(4));
        let snap = ActiveSnapshot::from_entries(
            vec![
                entry(&a, Some("RUNNING")),
                entry(&b, Some("OK")),
                entry(&c, Some("VM is locked (create)")),
            ],
            Instant::now(),
        );
        assert!(snap.complete());
        assert_eq!(snap.lookup(&a, None), Listed::Running);
        assert_eq!(snap.lookup(&b, None), Listed::Finished("OK".into()));
        assert_eq!(
            snap.lookup(&c, None),
            Listed::Finished("VM is locked (create)".into())
        );
        assert_eq!(snap.lookup(&d, None), Listed::Absent);
        let no_status = ActiveSnapshot::from_entries(vec![entry(&d, None)], Instant::now());
        assert_eq!(no_status.lookup(&d, None), Listed::Running);
        // Started here after the list was fetched: not listed yet, running.
        let later = snap.fetched_at + Duration::from_millis(1);
        assert_eq!(snap.lookup(&d, Some(later)), Listed::Running);
        assert_eq!(snap.lookup(&d, Some(snap.fetched_at)), Listed::Absent);
    }

    #[test]
    fn truncated_lists_are_not_trusted() {
        let entries: Vec<_> = (0..ACTIVE_LIST_LIMIT)
            .map(|i| entry(&upid(i), Some("RUNNING")))
            .collect();
        assert!(!ActiveSnapshot::from_entries(entries, Instant::now()).complete());
    }

    #[tokio::test(start_paused = true)]
    async fn books_are_kept_updated_and_pruned() {
        let state = ObserverState::default();
        let (a, b) = (upid(1), upid(2));
        let t0 = Instant::now();
        let first = state.touch(&a, t0);
        assert_eq!(first.first_seen, t0);
        tokio::time::advance(Duration::from_secs(5)).await;
        let again = state.touch(&a, Instant::now());
        assert_eq!(again.first_seen, t0, "first sighting is kept");
        state.update(&a, |book| {
            book.outcome = Some(TaskOutcome::Succeeded {
                warnings: 0,
                warning_lines: vec![],
            });
        });
        assert!(state.touch(&a, Instant::now()).outcome.is_some());
        state.touch(&b, Instant::now());
        assert_eq!(state.tracked(), 2);
        tokio::time::advance(Duration::from_secs(100)).await;
        state.touch(&b, Instant::now());
        state.prune(Instant::now(), Duration::from_secs(60));
        assert_eq!(
            state.tracked(),
            1,
            "a, unobserved for 100 s, is pruned; b stays"
        );
        state.forget(&b);
        assert_eq!(state.tracked(), 0);
    }

    /// A long task's node is due for one more read at its expected end,
    /// once three tasks of its kind there were seen to end; and no longer
    /// once a list shows its end.
    #[tokio::test(start_paused = true)]
    async fn a_long_tasks_node_is_read_again_at_its_expected_end() {
        let state = ObserverState::default();
        let second = Duration::from_secs(1);
        let list =
            |entries: Vec<TaskListEntry>| ActiveSnapshot::from_entries(entries, Instant::now());
        // Three tasks, each listed running 1 s after its dispatch and
        // ended 3 s after it: each took 2 s (the middle of [1 s, 3 s]).
        for pid in 1..=3 {
            let u = upid(pid);
            state.dispatched("pve", Some(&u));
            tokio::time::advance(second).await;
            let running = list(vec![entry(&u, Some("RUNNING"))]);
            assert_eq!(state.saw_list("pve", &running, Instant::now()), 0);
            tokio::time::advance(2 * second).await;
            let ended = list(vec![entry(&u, Some("OK"))]);
            assert_eq!(state.saw_list("pve", &ended, Instant::now()), 1);
        }
        let u = upid(4);
        state.dispatched("pve", Some(&u));
        let t = Instant::now();
        let fetched = t + Duration::from_millis(500);
        let due = |now: Instant| state.end_due("pve", fetched, now, second);
        assert!(!due(t + Duration::from_millis(1900)), "before its end");
        assert!(due(t + Duration::from_millis(2100)), "at its end");
        assert!(
            !state.end_due("other", fetched, t + 3 * second, second),
            "another node's list is not due"
        );
        assert!(
            !state.end_due(
                "pve",
                t + Duration::from_millis(2100),
                t + 3 * second,
                second
            ),
            "once read at its end, not again"
        );
        // A list showing it ended: nothing is due for it any more.
        tokio::time::advance(Duration::from_millis(2100)).await;
        let ended = list(vec![entry(&u, Some("OK"))]);
        assert_eq!(state.saw_list("pve", &ended, Instant::now()), 1);
        assert!(!due(t + 3 * second));
    }

    /// Each task type is judged by what its own tasks took on the node,
    /// whatever else awaits its end there (the expectation is looked up
    /// once per type).
    #[tokio::test(start_paused = true)]
    async fn each_task_type_is_due_at_its_own_expected_end() {
        let state = ObserverState::default();
        let typed = |pid: u32, kind: &str| {
            Upid::encode(
                "pve",
                pid,
                0x0D01_5579,
                0x68BF_3A41,
                kind,
                "100",
                "root@pam",
            )
            .unwrap()
        };
        // Listed running, then ended: qmstart takes about 0.2 s there (no
        // read of its own), qmcreate 2 s (as in the test above).
        let list =
            |entries: Vec<TaskListEntry>| ActiveSnapshot::from_entries(entries, Instant::now());
        for (pid, kind, running, ended) in [(1, "qmstart", 100, 200), (11, "qmcreate", 1000, 2000)]
        {
            for n in 0..3 {
                let u = typed(pid + n, kind);
                state.dispatched("pve", Some(&u));
                tokio::time::advance(Duration::from_millis(running)).await;
                state.saw_list(
                    "pve",
                    &list(vec![entry(&u, Some("RUNNING"))]),
                    Instant::now(),
                );
                tokio::time::advance(Duration::from_millis(ended)).await;
                let seen =
                    state.saw_list("pve", &list(vec![entry(&u, Some("OK"))]), Instant::now());
                assert_eq!(seen, 1);
            }
        }
        let t = Instant::now();
        for pid in 21..=25 {
            state.dispatched("pve", Some(&typed(pid, "qmstart")));
        }
        assert!(!state.end_due("pve", t, t + Duration::from_secs(3), Duration::from_secs(1)));
        state.dispatched("pve", Some(&typed(31, "qmcreate")));
        for pid in 26..=30 {
            state.dispatched("pve", Some(&typed(pid, "qmstart")));
        }
        let fetched = t + Duration::from_millis(500);
        let due = |now: Instant| state.end_due("pve", fetched, now, Duration::from_secs(1));
        assert!(
            !due(t + Duration::from_millis(1900)),
            "before the create's end"
        );
        assert!(due(t + Duration::from_millis(2100)), "at the create's end");
    }

    /// A task shorter than the list interval gets no read of its own: the
    /// next regular list shows its end as soon.
    #[tokio::test(start_paused = true)]
    async fn a_short_task_gets_no_read_of_its_own() {
        let state = ObserverState::default();
        for pid in 1..=4 {
            let u = upid(pid);
            state.dispatched("pve", Some(&u));
            tokio::time::advance(Duration::from_millis(300)).await;
            let ended = ActiveSnapshot::from_entries(vec![entry(&u, Some("OK"))], Instant::now());
            state.saw_list("pve", &ended, Instant::now());
        }
        let t = Instant::now();
        state.dispatched("pve", Some(&upid(5)));
        assert!(!state.end_due("pve", t, t + Duration::from_secs(5), Duration::from_secs(1)));
    }
}
