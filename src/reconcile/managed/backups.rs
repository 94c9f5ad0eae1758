//! The ProxmoxBackup a restore names (`restore.backupRef` of a VM or a
//! container): read afresh before the restore, as its archive is what is
//! sent.

use kube::Api;

use crate::api::ConditionStatus;
use crate::api::backup::ProxmoxBackup;
use crate::api::condition::{ConditionType, find};
use crate::reconcile::common::restore::BackupLookup;

/// Whether the ProxmoxBackup `name` of `namespace` is Ready, and its archive.
pub async fn lookup(
    kube: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<BackupLookup, kube::Error> {
    let Some(backup) = Api::<ProxmoxBackup>::namespaced(kube.clone(), namespace)
        .get_opt(name)
        .await?
    else {
        return Ok(BackupLookup::NotFound);
    };
    Ok(of(&backup))
}

/// What a restore reads of `backup`: Ready with its archive, or why not.
pub fn of(backup: &ProxmoxBackup) -> BackupLookup {
    if backup.metadata.deletion_timestamp.is_some() {
        return BackupLookup::NotReady("it is being deleted".into());
    }
    let Some(status) = &backup.status else {
        return BackupLookup::NotReady("it has no status yet".into());
    };
    let ready = find(&status.conditions, ConditionType::Ready)
        .is_some_and(|c| c.status == ConditionStatus::True);
    match (&status.at_provider.volume, ready) {
        (Some(volume), true) => BackupLookup::Ready(volume.clone()),
        (_, false) => BackupLookup::NotReady("it is not Ready".into()),
        (None, true) => BackupLookup::NotReady("its status names no archive".into()),
    }
}
