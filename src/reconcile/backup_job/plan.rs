//! The backup job's managed fields and how drift in them is corrected,
//! pure.
//!
//! A field the spec leaves out is not managed. The guests are the VMIDs
//! the selector gives (in order) or the pool; one `PUT` with every
//! managed option corrects any drift (PVE drops `pool` when `vmid` is
//! set, and the other way round). Proxmox cannot hold a job without
//! guests: a want without any is never created, and a job that exists
//! is disabled instead (its last VMIDs kept, never run) until guests come
//! back.

use std::collections::BTreeMap;

use pve_client::{ExitStatus, TaskListEntry};

use crate::api::backup_job::BackupJobRun;
use crate::reconcile::managed::crud::Diff;

/// Whom the job backs up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Guests {
    /// These VMIDs, ascending.
    Vmids(Vec<u32>),
    /// Every member of this Proxmox pool.
    Pool(String),
    /// None now (why, naming the field).
    Nothing(String),
}

/// A job as managed; `next_run` (seconds since the epoch) and `last_run`:
/// observed only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub comment: String,
    pub schedule: String,
    pub storage: Option<String>,
    pub mode: Option<String>,
    pub compress: Option<String>,
    /// `keep-last` → 3; empty: not managed.
    pub prune_backups: BTreeMap<String, u64>,
    pub notes_template: Option<String>,
    pub enabled: bool,
    pub protected: Option<bool>,
    pub node: Option<String>,
    pub guests: Guests,
    pub next_run: Option<u64>,
    pub last_run: Option<BackupJobRun>,
}

/// The one correction a pass sends: the job as it should be, and the
/// fields that differ (for people).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobPatch {
    pub fields: Vec<&'static str>,
    pub job: Job,
}

/// Whether a managed optional field differs.
fn differs<T: PartialEq>(want: Option<&T>, seen: Option<&T>) -> bool {
    want.is_some_and(|w| seen != Some(w))
}

impl Job {
    /// What to hold against `observed`: with no guest, the job disabled
    /// with the guests it has (Proxmox refuses a job without any).
    fn held(&self, observed: &Self) -> Self {
        match &self.guests {
            Guests::Nothing(_) => Self {
                enabled: false,
                guests: observed.guests.clone(),
                ..self.clone()
            },
            Guests::Vmids(_) | Guests::Pool(_) => self.clone(),
        }
    }
}

impl Diff for Job {
    type Patch = JobPatch;

    fn diff(&self, observed: &Self) -> Option<JobPatch> {
        let want = self.held(observed);
        let o = observed;
        let checks = [
            ("comment", want.comment != o.comment),
            ("schedule", want.schedule != o.schedule),
            (
                "storage",
                differs(want.storage.as_ref(), o.storage.as_ref()),
            ),
            ("mode", differs(want.mode.as_ref(), o.mode.as_ref())),
            (
                "compress",
                differs(want.compress.as_ref(), o.compress.as_ref()),
            ),
            (
                "pruneBackups",
                !want.prune_backups.is_empty() && want.prune_backups != o.prune_backups,
            ),
            (
                "notesTemplate",
                differs(want.notes_template.as_ref(), o.notes_template.as_ref()),
            ),
            ("enabled", want.enabled != o.enabled),
            (
                "protected",
                differs(want.protected.as_ref(), o.protected.as_ref()),
            ),
            ("node", differs(want.node.as_ref(), o.node.as_ref())),
            ("guests", want.guests != o.guests),
        ];
        let fields: Vec<&'static str> = checks
            .into_iter()
            .filter(|(_, d)| *d)
            .map(|(f, _)| f)
            .collect();
        (!fields.is_empty()).then_some(JobPatch { fields, job: want })
    }

    fn absent(&self) -> Option<String> {
        match &self.guests {
            Guests::Nothing(why) => Some(why.clone()),
            Guests::Vmids(_) | Guests::Pool(_) => None,
        }
    }
}

/// Proxmox's refusal of a job, naming the spec field it is about (PVE
/// names its parameter: `schedule: invalid calendar event ...`).
pub fn refusal(message: &str) -> String {
    const FIELDS: &[(&str, &str)] = &[
        ("schedule", "schedule"),
        ("storage", "storage"),
        ("prune-backups", "pruneBackups"),
        ("notes-template", "notesTemplate"),
        ("mode", "mode"),
        ("compress", "compress"),
        ("node", "node"),
        ("pool", "pool"),
        ("vmid", "guestSelector"),
    ];
    match FIELDS
        .iter()
        .find(|(param, _)| message.contains(&format!("{param}:")))
    {
        Some((_, field)) => format!("spec.forProvider.{field}: {message}"),
        None => message.to_owned(),
    }
}

/// The entries of the cluster's task list that may be a run of a job
/// newer than `recorded`, newest first: ended `vzdump` tasks of
/// `root@pam` (as the scheduler starts them) whose ID is empty or one of
/// `vmids` (when the job names VMIDs: a node's task takes the VMID when it
/// backs up one guest), started after the recorded run. Which job a task
/// ran for only its log says (`pve_client::vzdump_job_id`).
pub fn run_candidates<'a>(
    tasks: &'a [TaskListEntry],
    vmids: Option<&[u32]>,
    recorded: Option<&BackupJobRun>,
) -> Vec<&'a TaskListEntry> {
    let mut out: Vec<&TaskListEntry> = tasks
        .iter()
        .filter(|t| {
            let id = t.id.as_deref().unwrap_or_default();
            t.task_type.as_deref() == Some("vzdump")
                && t.user.as_deref() == Some("root@pam")
                && !t.is_running()
                && (id.is_empty() || vmids.is_none_or(|v| id.parse().is_ok_and(|n| v.contains(&n))))
                && recorded.is_none_or(|r| {
                    t.upid != r.upid && t.starttime.unwrap_or_default() >= r.start_time
                })
        })
        .collect();
    out.sort_by_key(|t| std::cmp::Reverse(t.starttime.unwrap_or_default()));
    out
}

/// An ended task as a job's run in the status.
pub fn run_of(task: &TaskListEntry) -> Option<BackupJobRun> {
    let upid = pve_client::Upid::parse(&task.upid).ok()?;
    let status = task.status.clone().unwrap_or_default();
    let end_time = task
        .endtime
        .and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok())
        .map(|t| t.to_string());
    Some(BackupJobRun {
        node: upid.node().to_owned(),
        start_time: i64::from(upid.starttime()),
        upid: task.upid.clone(),
        end_time,
        succeeded: !matches!(ExitStatus::parse(&status), ExitStatus::Error(_)),
        status,
    })
}
