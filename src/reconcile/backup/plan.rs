//! The backup as the CRUD path sees it, pure: what is wanted (the
//! protection; the guest it can be taken of), what Proxmox showed (the
//! archive carrying this resource's owner marker as the first line of its
//! notes, the line Proxmox lists), the one correction, and what the status
//! reports.
//!
//! An archive cannot be changed on Proxmox but for its notes and
//! protection; the notes are written once with it, so the correction
//! ([`Patch`]) is the protection (`PUT .../content/{volume}`, at once).

use k8s_openapi::jiff::Timestamp;
use pve_client::{BackupVolume, Guest};

use crate::api::backup::BackupAtProvider;
use crate::reconcile::common::owner::{self, Ownership};
use crate::reconcile::managed::crud::{Diff, Observed};

/// The archive's managed fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BackupObject {
    /// Protected from deletion (wanted: `None` when the spec leaves it
    /// out, not managed).
    pub protected: Option<bool>,
    /// Why the guest cannot be backed up now (no VMID yet, not found,
    /// being deleted): nothing is taken.
    pub no_guest: Option<String>,
    /// Seen only: the archive's volume ID, size and creation time.
    pub volume: Option<String>,
    pub size: Option<u64>,
    pub ctime: Option<u64>,
}

/// What corrects an archive: its protection.
#[derive(Clone, Debug, PartialEq)]
pub struct Patch {
    /// The archive's volume ID.
    pub volume: String,
    pub protected: bool,
}

impl Diff for BackupObject {
    type Patch = Patch;

    fn diff(&self, observed: &Self) -> Option<Patch> {
        let protected = self
            .protected
            .filter(|p| *p != observed.protected.unwrap_or(false))?;
        Some(Patch {
            volume: observed.volume.clone()?,
            protected,
        })
    }

    fn absent(&self) -> Option<String> {
        self.no_guest.clone()
    }
}

/// The archive wanted.
pub fn want(protected: Option<bool>, no_guest: Option<String>) -> BackupObject {
    BackupObject {
        protected,
        no_guest,
        ..BackupObject::default()
    }
}

/// The `notes-template` sent: the owner marker first (the line Proxmox
/// lists of the notes), then the spec's template on the next lines (`\n`
/// is vzdump's new line).
pub fn notes_template(marker: &str, template: Option<&str>) -> String {
    match template.filter(|t| !t.is_empty()) {
        Some(t) => format!("{marker}\\n{t}"),
        None => marker.to_owned(),
    }
}

/// This resource's archive among a guest's `archives`: the newest whose
/// notes carry `uid`'s marker. `recorded`, the volume the status names,
/// found without the marker (its notes changed by hand) is not ours.
pub fn observed(
    archives: &[BackupVolume],
    uid: &str,
    recorded: Option<&str>,
) -> Observed<BackupObject> {
    let object = |b: &BackupVolume| BackupObject {
        protected: Some(b.protected.unwrap_or(false)),
        no_guest: None,
        volume: Some(b.volid.clone()),
        size: b.size,
        ctime: b.ctime,
    };
    let ours = archives
        .iter()
        .filter(|b| owner::owner_of(b.notes.as_deref(), uid) == Ownership::Ours)
        .max_by_key(|b| b.ctime);
    if let Some(b) = ours {
        return Observed::Found {
            object: object(b),
            ours: true,
        };
    }
    match recorded.and_then(|v| archives.iter().find(|b| b.volid == v)) {
        Some(b) => Observed::Found {
            object: object(b),
            ours: false,
        },
        None => Observed::NotFound,
    }
}

/// `at` with the guest and what was `seen` (`None`, or unreadable: kept
/// as it was; gone or not ours: the archive's fields cleared).
pub fn at_provider(
    mut at: BackupAtProvider,
    guest: Option<&Guest>,
    seen: Option<&Observed<BackupObject>>,
) -> BackupAtProvider {
    if let Some(g) = guest {
        at.vmid = Some(g.vmid);
        at.node = Some(g.node.clone());
    }
    match seen {
        None | Some(Observed::Unknown(_)) => {}
        Some(Observed::Found { object, ours: true }) => {
            at.volume = object.volume.clone();
            at.size = object.size;
            at.protected = object.protected;
            at.ctime = object
                .ctime
                .and_then(|t| Timestamp::from_second(i64::try_from(t).ok()?).ok())
                .map(|t| t.to_string());
        }
        Some(Observed::NotFound | Observed::Found { ours: false, .. }) => {
            at.volume = None;
            at.size = None;
            at.protected = None;
            at.ctime = None;
        }
    }
    at
}
