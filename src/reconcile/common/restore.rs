//! A guest created from a backup archive (`spec.forProvider.restore` of a
//! VM or a container), the part that is the same for every guest: which
//! archive is restored (named, or the volume of a Ready ProxmoxBackup of
//! the namespace), and the proof that lets a resource write its owner
//! marker over the one the archive's notes carry. Pure.

use std::time::Duration;

use super::owner::{description, user_part};

/// How often a restore waiting for its ProxmoxBackup looks again.
pub const BACKUP_RECHECK: Duration = Duration::from_secs(10);

/// A ProxmoxBackup a restore names, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackupLookup {
    /// No such ProxmoxBackup in the namespace.
    NotFound,
    /// It exists but is not Ready (or has no archive yet): why.
    NotReady(String),
    /// Ready, with its archive's volume ID.
    Ready(String),
}

/// What a restore names: `archive`, or the ProxmoxBackup `backup_ref`.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub archive: Option<&'a str>,
    pub backup_ref: Option<&'a str>,
}

/// The archive to restore into `guest` (`the VM`, `the container`): the one
/// named, or the volume of the Ready ProxmoxBackup `backupRef` names, as
/// `lookup` read it. `Err`: why the guest waits (reason `BackupNotReady`,
/// naming the field and the ProxmoxBackup).
pub fn archive(
    source: Source<'_>,
    lookup: Option<&BackupLookup>,
    namespace: &str,
    guest: &str,
) -> Result<String, String> {
    if let Some(archive) = source.archive {
        return Ok(archive.to_owned());
    }
    let name = source.backup_ref.unwrap_or_default();
    let field = "spec.forProvider.restore.backupRef";
    Err(match lookup {
        Some(BackupLookup::Ready(volume)) => return Ok(volume.clone()),
        Some(BackupLookup::NotReady(why)) => format!(
            "{field}: ProxmoxBackup {namespace}/{name} is not ready ({why}); {guest} is restored once it is"
        ),
        Some(BackupLookup::NotFound) => format!(
            "{field}: ProxmoxBackup {namespace}/{name} does not exist; {guest} is restored once it exists and is Ready"
        ),
        None => format!("{field}: ProxmoxBackup {namespace}/{name} was not looked up yet"),
    })
}

/// Whether the guest at `vmid`, which does not carry this resource's
/// marker, is the one this resource's own restore task made: the spec
/// restores, the resource may create, and the status recorded `vmid` with
/// the restore task's end (`status.atProvider.restoredVmid`). Any other
/// guest at the VMID is someone else's.
pub fn proven(restoring: bool, may_create: bool, restored_vmid: Option<u32>, vmid: u32) -> bool {
    restoring && may_create && restored_vmid == Some(vmid)
}

/// The notes a proven restored guest is given: the ones the spec
/// declares, else the archive's without their marker lines, followed by
/// this resource's `marker`.
pub fn claimed_description(declared: Option<&str>, observed: Option<&str>, marker: &str) -> String {
    let notes = match declared {
        Some(declared) => declared.to_owned(),
        None => user_part(observed.unwrap_or_default()),
    };
    description(Some(&notes), marker)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMED: Source<'static> = Source {
        archive: Some("local:backup/vzdump-lxc-100-2026_12_05-01_00_00.tar.zst"),
        backup_ref: None,
    };
    const BY_REF: Source<'static> = Source {
        archive: None,
        backup_ref: Some("nightly"),
    };

    #[test]
    fn the_archive_is_the_named_one_or_the_ready_backups() {
        assert_eq!(
            archive(NAMED, None, "ns", "the VM").as_deref(),
            Ok("local:backup/vzdump-lxc-100-2026_12_05-01_00_00.tar.zst")
        );
        let ready = BackupLookup::Ready("local:backup/x".into());
        assert_eq!(
            archive(BY_REF, Some(&ready), "ns", "the VM").as_deref(),
            Ok("local:backup/x")
        );
        for (lookup, says) in [
            (None, "was not looked up yet"),
            (Some(BackupLookup::NotFound), "does not exist"),
            (
                Some(BackupLookup::NotReady("it is not Ready".into())),
                "is not ready (it is not Ready); the container is restored once it is",
            ),
        ] {
            let why = archive(BY_REF, lookup.as_ref(), "ns", "the container").unwrap_err();
            assert!(
                why.starts_with("spec.forProvider.restore.backupRef: ProxmoxBackup ns/nightly")
                    && why.contains(says),
                "{why}"
            );
        }
    }

    #[test]
    fn only_the_recorded_vmid_of_a_restoring_creator_is_proof() {
        assert!(proven(true, true, Some(120), 120));
        assert!(!proven(true, true, Some(121), 120));
        assert!(!proven(true, true, None, 120));
        assert!(!proven(false, true, Some(120), 120));
        assert!(!proven(true, false, Some(120), 120));
    }

    #[test]
    fn the_claimed_notes_drop_the_archives_marker() {
        let theirs = super::super::owner::marker_line_of("ProxmoxVM", "team-b", "db", "1");
        let foreign = format!("database\n\n{theirs}");
        let ours = super::super::owner::marker_line_of("ProxmoxVM", "ns", "web", "2");
        let kept = claimed_description(None, Some(&foreign), &ours);
        assert!(kept.starts_with("database") && kept.ends_with(&ours) && !kept.contains("team-b"));
        let declared = claimed_description(Some("restored"), Some(&foreign), &ours);
        assert!(declared.starts_with("restored") && !declared.contains("database"));
    }
}
