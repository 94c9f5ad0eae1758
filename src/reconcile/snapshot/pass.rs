//! The snapshot as a CRUD kind for [`managed::crud::pass`], on its task
//! path: taking, rolling back and deleting are Proxmox tasks, recorded in
//! the status and observed on later passes (`managed::crud::task`).
//!
//! What it asks Proxmox, per pass: `GET .../snapshot` (the guest's
//! snapshots: its own found by name, ours by the marker in its
//! description). Only when a call is due: `GET .../config` (the guest's
//! lock: a snapshot, rollback, backup or anything else in progress is
//! waited for) and, for a rollback, `GET /nodes/{node}/tasks` (a rollback
//! of this guest by this provider's user that the status did not record,
//! adopted instead of sent again). Then at most one call: take
//! (`POST .../snapshot`, a task), roll back (`POST .../rollback`, a task),
//! the description (`PUT .../config`) or delete (`DELETE`, a task).
//!
//! [`managed::crud::pass`]: crate::reconcile::managed::crud::pass

use kube::ResourceExt;
use pve_client::{Client, Guest, SnapshotTask, TakeSnapshot, Upid};

use super::Guests;
use super::plan::{self, Owner, Patch, SnapshotObject};
use crate::api::ProxmoxSnapshot;
use crate::api::condition::Condition;
use crate::api::snapshot::ProxmoxSnapshotStatus;
use crate::api::task::TaskRecord;
use crate::reconcile::managed::crud::pass::{Kind, Wanted};
use crate::reconcile::managed::crud::{Call, External, Observed, Sent, Started};
use crate::reconcile::managed::tasks;

/// No task recorded yet.
static NO_TASKS: TaskRecord = TaskRecord {
    task: None,
    last_task: None,
    last_failure: None,
};

impl ProxmoxSnapshot {
    fn guest(&self, guests: &Guests) -> Result<Guest, String> {
        let r = &self.spec.for_provider.guest_ref;
        guests.guest(&self.namespace().unwrap_or_default(), r.kind, &r.name)
    }
}

impl Kind for ProxmoxSnapshot {
    type External = Snapshot;
    type Status = ProxmoxSnapshotStatus;
    type Extra = Guests;

    fn managed(&self) -> &crate::api::managed::ManagedSpec {
        &self.spec.managed
    }

    fn want(&self, guests: &Guests) -> Wanted<Self> {
        let (namespace, name, uid) = (
            self.namespace().unwrap_or_default(),
            self.name_any(),
            self.uid().unwrap_or_default(),
        );
        let spec = &self.spec.for_provider;
        let owner = Owner {
            namespace: &namespace,
            name: &name,
            uid: &uid,
        };
        Ok(plan::want(
            &owner,
            spec.description.as_deref(),
            (spec.guest_ref.kind, spec.vmstate),
            spec.rollback_request.as_deref(),
            self.guest(guests).err(),
        ))
    }

    fn external(&self, client: Client, guests: &Guests) -> Snapshot {
        let status = self.status.as_ref();
        let last = status.and_then(|s| s.at_provider.last_rollback.as_ref());
        // A rollback of this resource's is later than the last handled one
        // and than the resource itself.
        let created = self
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second());
        let after_last = last
            .and_then(|l| Upid::parse(&l.upid).ok())
            .map_or(0, |u| i64::from(u.starttime()) + 1);
        Snapshot {
            client,
            guest: self.guest(guests).ok(),
            name: self.spec.for_provider.name.clone(),
            uid: self.uid().unwrap_or_default(),
            handled: plan::handled(last).map(str::to_owned),
            rollbacks_since: u32::try_from(created.max(after_last)).unwrap_or(u32::MAX),
        }
    }

    /// Nothing in Kubernetes refers to a snapshot.
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
        observed: Option<&Observed<SnapshotObject>>,
    ) -> ProxmoxSnapshotStatus {
        let previous = self.status.clone().unwrap_or_default();
        let guest = self.guest(guests).ok();
        ProxmoxSnapshotStatus {
            at_provider: plan::at_provider(previous.at_provider, guest.as_ref(), observed),
            conditions,
            observed_generation: self.metadata.generation,
            ..Default::default()
        }
    }

    fn object_name(&self) -> String {
        let spec = &self.spec.for_provider;
        format!(
            "snapshot {} of {:?} {}",
            spec.name, spec.guest_ref.kind, spec.guest_ref.name
        )
    }

    fn tracking(&self) -> Option<&TaskRecord> {
        Some(
            self.status
                .as_ref()
                .map_or(&NO_TASKS, |s| &s.at_provider.tasks),
        )
    }

    fn task_ended(&self, guests: &Guests, ended: &crate::api::task::EndedTask) {
        if plan::is_rollback(&ended.type_) {
            let r = &self.spec.for_provider.guest_ref;
            guests.changed(r.kind, &self.namespace().unwrap_or_default(), &r.name);
        }
    }

    fn track(
        &self,
        mut status: ProxmoxSnapshotStatus,
        record: TaskRecord,
    ) -> ProxmoxSnapshotStatus {
        let at = &mut status.at_provider;
        if let Some(outcome) = plan::rollback_outcome(&record, at.last_rollback.as_ref()) {
            at.last_rollback = Some(outcome);
        }
        at.tasks = record;
        status
    }
}

/// The calls for one snapshot of one guest.
pub struct Snapshot {
    client: Client,
    /// `None`: the guest has no VMID yet, or is gone.
    guest: Option<Guest>,
    name: String,
    uid: String,
    /// The last rollback request handled OK.
    handled: Option<String>,
    /// Rollback tasks started before this (UNIX seconds) are not this
    /// resource's pending one.
    rollbacks_since: u32,
}

impl External for Snapshot {
    type Object = SnapshotObject;

    async fn observe(&self) -> Observed<SnapshotObject> {
        // No guest: nothing of it to see (its snapshots go with it).
        let Some(guest) = &self.guest else {
            return Observed::NotFound;
        };
        match self.client.snapshots(guest).await {
            Ok(entries) => plan::observed(&entries, &self.name, &self.uid, self.handled.as_deref()),
            Err(e) if e.is_not_found() => Observed::NotFound,
            Err(e) => Observed::Unknown(e.to_string()),
        }
    }

    async fn call(&self, call: &Call<SnapshotObject>) -> Result<(), String> {
        self.start(call).await.map(|_| ())
    }

    async fn start(&self, call: &Call<SnapshotObject>) -> Result<Sent, String> {
        let guest = self
            .guest
            .as_ref()
            .ok_or_else(|| "the guest has no VMID".to_owned())?;
        let task = |upid: Result<Upid, pve_client::Error>, target: Option<String>| {
            upid.map(|upid| Sent::Task(Started { upid, target }))
                .map_err(|e| e.to_string())
        };
        match call {
            Call::Create(want) => {
                let take = TakeSnapshot {
                    name: self.name.clone(),
                    description: want.description.clone(),
                    vmstate: want.vmstate,
                };
                task(self.client.take_snapshot(guest, &take).await, None)
            }
            Call::Update(Patch {
                rollback: Some(request),
                ..
            }) => task(
                self.client.rollback_snapshot(guest, &self.name).await,
                Some(request.clone()),
            ),
            Call::Update(Patch {
                rollback: None,
                description,
            }) => {
                if let Some(description) = description {
                    self.client
                        .set_snapshot_description(guest, &self.name, description)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok(Sent::Done)
            }
            Call::Delete => task(self.client.delete_snapshot(guest, &self.name).await, None),
        }
    }

    async fn busy(&self, _: &Call<SnapshotObject>) -> Option<String> {
        let guest = self.guest.as_ref()?;
        match self.client.guest_lock(guest).await {
            Ok(None) => None,
            Ok(Some(lock)) => Some(format!("guest {} is locked ({lock})", guest.vmid)),
            Err(e) => Some(format!("cannot read guest {}'s lock: {e}", guest.vmid)),
        }
    }

    async fn adopt(&self, call: &Call<SnapshotObject>) -> Result<Option<Started>, String> {
        // Taking and deleting cannot be sent twice by mistake: the guest is
        // locked while they run, and afterwards the snapshot is there (or
        // gone). A rollback leaves nothing to see: its own task is looked
        // for.
        let (
            Call::Update(Patch {
                rollback: Some(request),
                ..
            }),
            Some(guest),
        ) = (call, &self.guest)
        else {
            return Ok(None);
        };
        let kind = guest.kind.task_type(SnapshotTask::Rollback);
        let (running, finished) =
            tasks::own_tasks(&self.client, &guest.node, kind, self.rollbacks_since)
                .await
                .map_err(|e| format!("cannot list the node's tasks: {e}"))?;
        let vmid = guest.vmid.to_string();
        let own = running
            .into_iter()
            .chain(finished)
            .filter(|u| u.id() == vmid)
            .max_by_key(Upid::starttime);
        Ok(own.map(|upid| Started {
            upid,
            target: Some(request.clone()),
        }))
    }
}
