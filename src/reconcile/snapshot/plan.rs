//! The snapshot as the CRUD path sees it, pure: what is wanted (the
//! description with the owner marker, the RAM, the rollback asked for),
//! what Proxmox showed, the one correction, whose it is, and what the
//! status reports.
//!
//! A snapshot cannot be changed on Proxmox but for its description, so the
//! correction ([`Patch`]) is the description (`PUT .../config`, at once)
//! or a rollback (a task); a rollback comes first, the description on the
//! next pass. The rollback is "the request handled": the observed object
//! carries the last request whose rollback ended OK (from the status), the
//! wanted one the spec's `rollbackRequest`; they differ until a rollback
//! for this request ends OK.

use k8s_openapi::jiff::Timestamp;
use pve_client::{Guest, SnapshotEntry};

pub use crate::reconcile::managed::guests::resolve as guest;

use crate::api::snapshot::{GuestKind, RollbackOutcome, SnapshotAtProvider};
use crate::api::task::{CallAction, TaskRecord};
use crate::reconcile::common::owner::{self, Ownership};
use crate::reconcile::managed::crud::{Diff, Observed};

/// The snapshot's managed fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SnapshotObject {
    /// The description as on Proxmox: the spec's text, then the marker.
    pub description: String,
    /// Whether it holds the RAM.
    pub vmstate: bool,
    /// The rollback request (wanted: the spec's; observed: the last one
    /// handled OK).
    pub rollback: Option<String>,
    /// Why the guest cannot have the snapshot now (no VMID yet, not
    /// found): nothing is created.
    pub no_guest: Option<String>,
    /// Seen only: when it was taken (UNIX seconds) and after which.
    pub snaptime: Option<u64>,
    pub parent: Option<String>,
}

/// What corrects a snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Patch {
    /// Roll back for this request (a task; sent before the description).
    pub rollback: Option<String>,
    /// Set the description (with the marker).
    pub description: Option<String>,
}

impl Diff for SnapshotObject {
    type Patch = Patch;

    fn diff(&self, observed: &Self) -> Option<Patch> {
        let rollback = self
            .rollback
            .clone()
            .filter(|r| observed.rollback.as_ref() != Some(r));
        // One call per pass: the rollback first, the description after.
        let description = (rollback.is_none() && self.description != observed.description)
            .then(|| self.description.clone());
        let patch = Patch {
            rollback,
            description,
        };
        (patch != Patch::default()).then_some(patch)
    }

    fn absent(&self) -> Option<String> {
        self.no_guest.clone()
    }
}

/// Who the snapshot is for (the owner marker's words).
pub struct Owner<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// The snapshot wanted: the spec's description with `owner`'s marker, the
/// RAM only for a VM, the spec's rollback request; `no_guest` why the
/// guest cannot have it now.
pub fn want(
    owner: &Owner<'_>,
    description: Option<&str>,
    (kind, vmstate): (GuestKind, Option<bool>),
    rollback: Option<&str>,
    no_guest: Option<String>,
) -> SnapshotObject {
    let marker = owner::marker_line_of("ProxmoxSnapshot", owner.namespace, owner.name, owner.uid);
    SnapshotObject {
        description: owner::description(description, &marker),
        vmstate: kind == GuestKind::ProxmoxVM && vmstate == Some(true),
        rollback: rollback.map(str::to_owned),
        no_guest,
        snaptime: None,
        parent: None,
    }
}

/// The snapshot `name` among `entries`, as the CRUD path sees it: ours when
/// its description carries `uid`'s marker; `handled` is the last rollback
/// request handled OK.
pub fn observed(
    entries: &[SnapshotEntry],
    name: &str,
    uid: &str,
    handled: Option<&str>,
) -> Observed<SnapshotObject> {
    let Some(entry) = entries.iter().find(|e| !e.is_current() && e.name == name) else {
        return Observed::NotFound;
    };
    let description = entry.description.clone().unwrap_or_default();
    let ours = owner::owner_of(Some(&description), uid) == Ownership::Ours;
    Observed::Found {
        object: SnapshotObject {
            description,
            vmstate: entry.vmstate.unwrap_or(false),
            rollback: handled.map(str::to_owned),
            no_guest: None,
            snaptime: entry.snaptime,
            parent: entry.parent.clone(),
        },
        ours,
    }
}

/// The last rollback request handled OK.
pub fn handled(last: Option<&RollbackOutcome>) -> Option<&str> {
    last.filter(|r| r.succeeded).map(|r| r.request.as_str())
}

/// `at` with what was `seen` (`None`, or unreadable: kept as it was; not
/// ours or gone: the snapshot's fields cleared).
pub fn at_provider(
    mut at: SnapshotAtProvider,
    guest: Option<&Guest>,
    seen: Option<&Observed<SnapshotObject>>,
) -> SnapshotAtProvider {
    if let Some(g) = guest {
        at.vmid = Some(g.vmid);
        at.node = Some(g.node.clone());
    }
    match seen {
        None | Some(Observed::Unknown(_)) => {}
        Some(Observed::Found { object, ours: true }) => {
            at.snaptime = object
                .snaptime
                .and_then(|t| Timestamp::from_second(i64::try_from(t).ok()?).ok())
                .map(|t| t.to_string());
            at.parent = object.parent.clone();
            at.vmstate = Some(object.vmstate);
            at.description = Some(owner::user_part(&object.description)).filter(|d| !d.is_empty());
        }
        Some(Observed::NotFound | Observed::Found { ours: false, .. }) => {
            at.snaptime = None;
            at.parent = None;
            at.vmstate = None;
            at.description = None;
        }
    }
    at
}

/// Whether a task type is a snapshot rollback.
pub fn is_rollback(task_type: &str) -> bool {
    matches!(task_type, "qmrollback" | "vzrollback")
}

/// The rollback outcome a task `record` tells, when its last task is a
/// rollback not yet reported in `last` (each rollback task said once).
pub fn rollback_outcome(
    record: &TaskRecord,
    last: Option<&RollbackOutcome>,
) -> Option<RollbackOutcome> {
    let t = record.last_task.as_ref()?;
    if t.action != CallAction::Update || !is_rollback(&t.type_) {
        return None;
    }
    if last.is_some_and(|l| l.upid == t.upid) {
        return None;
    }
    Some(RollbackOutcome {
        request: t.target.clone()?,
        succeeded: t.succeeded,
        message: t.message.clone(),
        upid: t.upid.clone(),
        at: t.at.clone(),
    })
}
