//! Worker tasks: each async operation gets a UPID, a log and an exit status,
//! and runs in the background like a forked PVE worker.

pub mod archive;
pub mod flock;

use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::clock::Clock;
use crate::control::faults::HoldAt;
use crate::http::Call;
use crate::instance::Instance;
use crate::upid::Upid;
use archive::{Listing, PVESTATD_CYCLE};
use flock::FlockGuard;

#[derive(Clone, Debug)]
pub struct TaskRecord {
    pub upid: Upid,
    pub text: String,
    pub log: Vec<String>,
    /// `None` while running; the exit status once stopped.
    pub exit: Option<String>,
    /// Where the task list shows it (active file or archive index).
    pub listing: Listing,
    /// Before this instant the task is not visible (injected fault).
    pub visible_at: Instant,
    pub warnings: u32,
    /// Wall-clock start and end (seconds since the epoch, with fractions)
    /// for `GET /_sim/tasks`: the task lists' `starttime`/`endtime` are whole
    /// seconds, and `endtime` is the archival pass, not the exit.
    pub started: f64,
    pub ended: Option<f64>,
}

impl TaskRecord {
    pub fn new(upid: Upid, visible_at: Instant) -> Self {
        Self {
            text: upid.to_string(),
            upid,
            log: Vec::new(),
            exit: None,
            listing: Listing::Active,
            visible_at,
            warnings: 0,
            started: Clock::epoch_f64(),
            ended: None,
        }
    }

    #[cfg(test)]
    pub fn with_exit(mut self, exit: Option<String>) -> Self {
        self.exit = exit;
        self
    }

    pub fn is_visible(&self) -> bool {
        Instant::now() >= self.visible_at
    }
}

pub struct TaskTable {
    records: Mutex<Vec<TaskRecord>>,
    next_pid: AtomicU32,
    /// Lines written to the archive index so far.
    archived: AtomicU64,
    boot: std::time::Instant,
    boot_ticks: u64,
}

impl TaskTable {
    pub fn new(seed: u64) -> Self {
        // Worker PIDs and the node's uptime look like a host that has been
        // up for a few days.
        Self {
            records: Mutex::new(Vec::new()),
            next_pid: AtomicU32::new(0x0009_0000 + (seed % 0x1_0000) as u32),
            archived: AtomicU64::new(0),
            boot: std::time::Instant::now(),
            boot_ticks: 0x0D01_5579,
        }
    }

    pub fn records(&self) -> MutexGuard<'_, Vec<TaskRecord>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn create(
        &self,
        node: &str,
        task_type: &str,
        id: &str,
        user: &str,
        hidden_for: Option<Duration>,
    ) -> String {
        let pid = self.next_pid.fetch_add(
            1 + (self.next_pid.load(Ordering::Relaxed) % 7),
            Ordering::Relaxed,
        );
        let upid = Upid {
            node: node.to_owned(),
            pid,
            pstart: self.boot_ticks + (self.boot.elapsed().as_millis() / 10) as u64,
            starttime: Clock::epoch_secs(),
            task_type: task_type.to_owned(),
            id: id.to_owned(),
            user: user.to_owned(),
        };
        let record = TaskRecord::new(upid, Instant::now() + hidden_for.unwrap_or_default());
        let text = record.text.clone();
        self.records().push(record);
        text
    }

    /// An archival pass over `node` (see [`archive`]); `index_fails` says
    /// whether writing the index fails this time. Returns whether it worked.
    pub fn archive(&self, node: &str, index_fails: impl FnOnce() -> bool) -> bool {
        let mut records = self.records();
        // The counter only changes under the records lock.
        let mut seq = self.archived.load(Ordering::Relaxed);
        let ok = archive::pass(&mut records, &mut seq, node, index_fails);
        self.archived.store(seq, Ordering::Relaxed);
        ok
    }

    fn is_archived(&self, upid: &str) -> bool {
        self.with(upid, |r| r.listing.is_archived()).unwrap_or(true)
    }

    fn with<R>(&self, upid: &str, f: impl FnOnce(&mut TaskRecord) -> R) -> Option<R> {
        self.records()
            .iter_mut()
            .rev()
            .find(|r| r.text == upid)
            .map(f)
    }

    /// A visible task by its UPID text.
    pub fn find(&self, upid: &str) -> Option<TaskRecord> {
        self.records()
            .iter()
            .rev()
            .find(|r| r.text == upid && r.is_visible())
            .cloned()
    }

    fn finish(&self, upid: &str, result: Result<(), String>) {
        self.with(upid, |r| {
            let (exit, line) = match result {
                Ok(()) if r.warnings > 0 => (
                    format!("WARNINGS: {}", r.warnings),
                    format!("TASK WARNINGS: {}", r.warnings),
                ),
                Ok(()) => ("OK".to_owned(), "TASK OK".to_owned()),
                Err(msg) => {
                    let msg = msg.replace('\n', " ").trim_end().to_owned();
                    (msg.clone(), format!("TASK ERROR: {msg}"))
                }
            };
            r.log.push(line);
            r.exit = Some(exit);
            r.ended = Some(Clock::epoch_f64());
        });
    }
}

/// How long "hidden until released" is: longer than any test runs.
const HIDDEN_UNTIL_RELEASED: Duration = Duration::from_secs(365 * 24 * 3600);

/// Task-level faults decided when a task starts.
#[derive(Clone, Debug, Default)]
pub struct TaskFaults {
    pub fail: Option<String>,
    pub warnings: u32,
    pub hidden_for: Option<Duration>,
    /// The task stays hidden until this hold is released.
    pub hidden_until: Option<String>,
    /// The task does nothing (from its start, or from its first simulated
    /// wait) until this hold is released.
    pub held: Option<(String, HoldAt)>,
}

/// What a running task body uses: its log, the clock, the flock.
#[derive(Clone)]
pub struct TaskCtx {
    pub inst: Arc<Instance>,
    pub upid: String,
    pub node: String,
    injected_failure: Option<String>,
    force_lock_timeout: bool,
    /// A `task-held` hold at `sleep`: every simulated wait waits for it first.
    held_at_sleep: Option<String>,
}

impl TaskCtx {
    /// A context for work done inside a request (PUT config): no task, no log.
    pub fn inline(inst: Arc<Instance>, node: &str, force_lock_timeout: bool) -> Self {
        Self {
            inst,
            upid: String::new(),
            node: node.to_owned(),
            injected_failure: None,
            force_lock_timeout,
            held_at_sleep: None,
        }
    }

    pub fn log(&self, line: impl Into<String>) {
        let line = line.into();
        self.inst.tasks.with(&self.upid, |r| r.log.push(line));
    }

    /// Appends to the last line (PVE workers `print` without a newline).
    pub fn append(&self, text: &str) {
        self.inst
            .tasks
            .with(&self.upid, |r| match r.log.last_mut() {
                Some(last) => last.push_str(text),
                None => r.log.push(text.to_owned()),
            });
    }

    /// A `WARN:` line; the task then ends with `WARNINGS: n`.
    pub fn warn(&self, msg: &str) {
        self.inst.tasks.with(&self.upid, |r| {
            r.log.push(format!("WARN: {msg}"));
            r.warnings += 1;
        });
    }

    /// Fails here if a fault rule asked this task to fail.
    pub fn checkpoint(&self) -> Result<(), String> {
        self.injected_failure.clone().map_or(Ok(()), Err)
    }

    pub async fn sleep(&self, simulated: Duration) {
        if let Some(hold) = &self.held_at_sleep {
            self.inst.holds.wait(hold).await;
        }
        self.inst.clock.sleep(simulated).await;
    }

    /// `lock_config` with the given (simulated) timeout, logging
    /// `trying to acquire lock...` when it has to wait, like PVE.
    pub async fn flock(&self, vmid: u32, timeout: Duration) -> Result<FlockGuard, String> {
        if !self.force_lock_timeout
            && let Some(guard) = self.inst.flocks.try_lock(vmid)
        {
            return Ok(guard);
        }
        self.log("trying to acquire lock...");
        let guard = self
            .inst
            .flocks
            .lock(
                vmid,
                self.inst.clock.scaled(timeout),
                self.force_lock_timeout,
            )
            .await?;
        self.append(" OK");
        Ok(guard)
    }
}

/// Starts a worker task and returns its UPID at once.
pub fn spawn<F, Fut>(
    inst: &Arc<Instance>,
    call: &Call,
    node: &str,
    task_type: &str,
    id: &str,
    body: F,
) -> String
where
    F: FnOnce(TaskCtx) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let faults = inst.faults().on_task(task_type, &call.route_key);
    // fork_worker runs an archival pass as it registers the new worker.
    archive_pass(inst, node);
    // Hidden until a hold is released: out of sight for good until then.
    let hidden_for = match faults.hidden_until {
        Some(_) => Some(HIDDEN_UNTIL_RELEASED),
        None => faults.hidden_for,
    };
    let upid = inst
        .tasks
        .create(node, task_type, id, &call.identity.full(), hidden_for);
    if let Some(hold) = faults.hidden_until {
        let (inst, upid) = (inst.clone(), upid.clone());
        tokio::spawn(async move {
            inst.holds.wait(&hold).await;
            inst.tasks.with(&upid, |r| r.visible_at = Instant::now());
        });
    }
    let (held_at_start, held_at_sleep) = match faults.held {
        Some((hold, HoldAt::Start)) => (Some(hold), None),
        Some((hold, HoldAt::Sleep)) => (None, Some(hold)),
        None => (None, None),
    };
    let ctx = TaskCtx {
        inst: inst.clone(),
        upid: upid.clone(),
        node: node.to_owned(),
        injected_failure: faults.fail,
        force_lock_timeout: call.lock_timeout,
        held_at_sleep,
    };
    tokio::spawn(async move {
        if let Some(hold) = &held_at_start {
            ctx.inst.holds.wait(hold).await;
        }
        let result = body(ctx.clone()).await;
        if result.is_ok() {
            for _ in 0..faults.warnings {
                ctx.warn("pve-sim: injected warning");
            }
        }
        ctx.inst.tasks.finish(&ctx.upid, result);
        archive_after_exit(&ctx).await;
    });
    upid
}

/// An archival pass on `node`; the `archive-error` fault makes its index
/// write fail.
fn archive_pass(inst: &Instance, node: &str) -> bool {
    inst.tasks.archive(node, || inst.faults().on_archive())
}

/// The daemon that forked the worker reaps it and runs a pass (after the
/// configured delay); a pass that could not write the index is retried on
/// every pvestatd cycle until the task is archived.
async fn archive_after_exit(ctx: &TaskCtx) {
    ctx.sleep(ctx.inst.durations.task_archive).await;
    loop {
        archive_pass(&ctx.inst, &ctx.node);
        if ctx.inst.tasks.is_archived(&ctx.upid) {
            return;
        }
        ctx.sleep(PVESTATD_CYCLE).await;
    }
}
