//! The backup as a CRUD kind for [`managed::crud::pass`], on its task
//! path: taking the backup (`vzdump`) and deleting the archive (`imgdel`)
//! are Proxmox tasks, recorded in the status and observed on later passes
//! (`managed::crud::task`).
//!
//! What it asks Proxmox, per pass: `GET .../storage/{storage}/content?
//! content=backup&vmid=` on the guest's node (its archives: this
//! resource's found by the marker in its notes). Only when a backup is
//! due: `GET .../config` (the guest's lock: a backup, snapshot or anything
//! else in progress is waited for) and `GET /nodes/{node}/tasks` (a
//! `vzdump` of this guest by this provider's user that a lost status
//! write did not record, adopted instead of sent again). Then at most one
//! call: the backup (`POST /nodes/{node}/vzdump`, a task), the protection
//! (`PUT .../content/{volume}`) or the deletion (`DELETE`, a task; a
//! protected archive's protection is lifted by the same pass first).
//!
//! [`managed::crud::pass`]: crate::reconcile::managed::crud::pass

use std::sync::Mutex;

use kube::ResourceExt;
use pve_client::{BackupMode, Client, Compression, Guest, GuestType, Upid, Vzdump};

use super::plan::{self, BackupObject, Patch};
use crate::api::ProxmoxBackup;
use crate::api::backup::{self as api, ProxmoxBackupStatus};
use crate::api::condition::Condition;
use crate::api::task::TaskRecord;
use crate::reconcile::common::owner;
use crate::reconcile::managed::crud::pass::{Kind, Wanted};
use crate::reconcile::managed::crud::{Call, External, Observed, Sent, Started};
use crate::reconcile::managed::guests::Guests;
use crate::reconcile::managed::tasks;

/// No task recorded yet.
static NO_TASKS: TaskRecord = TaskRecord {
    task: None,
    last_task: None,
    last_failure: None,
};

impl ProxmoxBackup {
    fn guest(&self, guests: &Guests) -> Result<Guest, String> {
        let r = &self.spec.for_provider.guest_ref;
        guests.guest(&self.namespace().unwrap_or_default(), r.kind, &r.name)
    }

    /// Where its archive is looked for: the guest, or, once it is gone,
    /// the node and VMID the status recorded.
    fn target(&self, guests: &Guests) -> Option<Guest> {
        self.guest(guests).ok().or_else(|| {
            let at = &self.status.as_ref()?.at_provider;
            Some(Guest {
                kind: match self.spec.for_provider.guest_ref.kind {
                    api::GuestKind::ProxmoxVM => GuestType::Qemu,
                    api::GuestKind::ProxmoxContainer => GuestType::Lxc,
                },
                node: at.node.clone()?,
                vmid: at.vmid?,
            })
        })
    }
}

fn mode(mode: Option<api::BackupMode>) -> BackupMode {
    match mode {
        None | Some(api::BackupMode::Snapshot) => BackupMode::Snapshot,
        Some(api::BackupMode::Suspend) => BackupMode::Suspend,
        Some(api::BackupMode::Stop) => BackupMode::Stop,
    }
}

fn compression(compress: Option<api::Compression>) -> Compression {
    match compress {
        None | Some(api::Compression::None) => Compression::None,
        Some(api::Compression::Lzo) => Compression::Lzo,
        Some(api::Compression::Gzip) => Compression::Gzip,
        Some(api::Compression::Zstd) => Compression::Zstd,
    }
}

impl Kind for ProxmoxBackup {
    type External = Archive;
    type Status = ProxmoxBackupStatus;
    type Extra = Guests;

    fn managed(&self) -> &crate::api::managed::ManagedSpec {
        &self.spec.managed
    }

    fn want(&self, guests: &Guests) -> Wanted<Self> {
        Ok(plan::want(
            self.spec.for_provider.protected,
            self.guest(guests).err(),
        ))
    }

    fn external(&self, client: Client, guests: &Guests) -> Archive {
        let spec = &self.spec.for_provider;
        let uid = self.uid().unwrap_or_default();
        let marker = owner::marker_line_of(
            "ProxmoxBackup",
            &self.namespace().unwrap_or_default(),
            &self.name_any(),
            &uid,
        );
        let target = self.target(guests);
        // A vzdump of this resource's starts after the resource itself.
        let since = self
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second());
        Archive {
            client,
            guest: self.guest(guests).ok(),
            dump: target.as_ref().map(|g| Vzdump {
                vmid: g.vmid,
                storage: spec.storage.clone(),
                mode: mode(spec.mode),
                compress: compression(spec.compress),
                notes_template: Some(plan::notes_template(
                    &marker,
                    spec.notes_template.as_deref(),
                )),
                protected: spec.protected == Some(true),
            }),
            target,
            storage: spec.storage.clone(),
            uid,
            recorded: self
                .status
                .as_ref()
                .and_then(|s| s.at_provider.volume.clone()),
            since: u32::try_from(since).unwrap_or(u32::MAX),
            seen: Mutex::new(None),
        }
    }

    /// Nothing in Kubernetes holds an archive (a restore copies it).
    fn users(&self, _: &Guests) -> Vec<String> {
        vec![]
    }

    fn conditions(&self) -> Vec<Condition> {
        self.status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default()
    }

    fn status(
        &self,
        guests: &Guests,
        conditions: Vec<Condition>,
        observed: Option<&Observed<BackupObject>>,
    ) -> ProxmoxBackupStatus {
        let previous = self.status.clone().unwrap_or_default();
        ProxmoxBackupStatus {
            at_provider: plan::at_provider(
                previous.at_provider,
                self.guest(guests).ok().as_ref(),
                observed,
            ),
            conditions,
            observed_generation: self.metadata.generation,
            ..Default::default()
        }
    }

    fn object_name(&self) -> String {
        let r = &self.spec.for_provider.guest_ref;
        format!(
            "backup of {:?} {} on {}",
            r.kind, r.name, self.spec.for_provider.storage
        )
    }

    fn tracking(&self) -> Option<&TaskRecord> {
        Some(
            self.status
                .as_ref()
                .map_or(&NO_TASKS, |s| &s.at_provider.tasks),
        )
    }

    fn track(&self, mut status: ProxmoxBackupStatus, record: TaskRecord) -> ProxmoxBackupStatus {
        status.at_provider.tasks = record;
        status
    }
}

/// The calls for one backup of one guest.
pub struct Archive {
    client: Client,
    /// The guest, when its resource shows it (a backup is taken only then).
    guest: Option<Guest>,
    /// Where the archive is looked for (the guest, or what the status
    /// recorded once it is gone).
    target: Option<Guest>,
    /// The backup call, when there is a guest to name.
    dump: Option<Vzdump>,
    storage: String,
    uid: String,
    /// The archive the status names.
    recorded: Option<String>,
    /// vzdump tasks started before this (UNIX seconds) are not this
    /// resource's.
    since: u32,
    /// The archive this pass observed, and whether it is protected: what
    /// a deletion removes.
    seen: Mutex<Option<(String, bool)>>,
}

impl Archive {
    fn remember(&self, seen: Option<(String, bool)>) {
        if let Ok(mut s) = self.seen.lock() {
            *s = seen;
        }
    }

    fn seen(&self) -> Option<(String, bool)> {
        self.seen.lock().ok().and_then(|s| s.clone())
    }
}

impl External for Archive {
    type Object = BackupObject;

    async fn observe(&self) -> Observed<BackupObject> {
        // Neither a guest nor a recorded one: nothing was taken.
        let Some(target) = &self.target else {
            return Observed::NotFound;
        };
        let listed = self
            .client
            .backups(&target.node, &self.storage, Some(target.vmid))
            .await;
        let observed = match listed {
            Ok(archives) => plan::observed(&archives, &self.uid, self.recorded.as_deref()),
            Err(e) if e.is_not_found() => Observed::NotFound,
            Err(e) => Observed::Unknown(e.to_string()),
        };
        self.remember(
            observed
                .found()
                .and_then(|o| o.volume.clone().map(|v| (v, o.protected.unwrap_or(false)))),
        );
        observed
    }

    async fn call(&self, call: &Call<BackupObject>) -> Result<(), String> {
        self.start(call).await.map(|_| ())
    }

    async fn start(&self, call: &Call<BackupObject>) -> Result<Sent, String> {
        let target = self
            .target
            .as_ref()
            .ok_or_else(|| "the guest has no VMID".to_owned())?;
        let task = |upid: Result<Upid, pve_client::Error>| {
            upid.map(|upid| Sent::Task(Started { upid, target: None }))
                .map_err(|e| e.to_string())
        };
        match call {
            Call::Create(_) => {
                let dump = self
                    .dump
                    .as_ref()
                    .ok_or_else(|| "the guest has no VMID".to_owned())?;
                task(self.client.vzdump(&target.node, dump).await)
            }
            Call::Update(Patch { volume, protected }) => {
                self.client
                    .set_backup_protected(&target.node, volume, *protected)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Sent::Done)
            }
            Call::Delete => {
                let (volume, protected) = self
                    .seen()
                    .ok_or_else(|| "the archive was not seen this pass".to_owned())?;
                // Proxmox refuses to delete a protected archive; the
                // resource's deletion is the request to let it go.
                if protected {
                    self.client
                        .set_backup_protected(&target.node, &volume, false)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                task(
                    self.client
                        .delete_volume(&target.node, &self.storage, &volume)
                        .await,
                )
            }
        }
    }

    async fn busy(&self, call: &Call<BackupObject>) -> Option<String> {
        let (Call::Create(_), Some(guest)) = (call, &self.guest) else {
            return None;
        };
        match self.client.guest_lock(guest).await {
            Ok(None) => None,
            Ok(Some(lock)) => Some(format!("guest {} is locked ({lock})", guest.vmid)),
            Err(e) => Some(format!("cannot read guest {}'s lock: {e}", guest.vmid)),
        }
    }

    async fn adopt(&self, call: &Call<BackupObject>) -> Result<Option<Started>, String> {
        // Once a vzdump ended, its archive is seen (or it failed); one still
        // running that the status did not record is this resource's.
        let (Call::Create(_), Some(guest)) = (call, &self.guest) else {
            return Ok(None);
        };
        let (running, _) = tasks::own_tasks(&self.client, &guest.node, "vzdump", self.since)
            .await
            .map_err(|e| format!("cannot list the node's tasks: {e}"))?;
        let vmid = guest.vmid.to_string();
        let own = running
            .into_iter()
            .filter(|u| u.id() == vmid)
            .max_by_key(Upid::starttime);
        Ok(own.map(|upid| Started { upid, target: None }))
    }
}
