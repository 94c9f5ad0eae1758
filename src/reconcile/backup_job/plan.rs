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

/// A job as managed; `next_run`: observed only (seconds since the epoch).
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
