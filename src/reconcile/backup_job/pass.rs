//! The backup job as a CRUD kind: what it wants, its calls, its status.
//!
//! Requests per pass: `GET /cluster/backup` (every job with its options,
//! owner marker and `next-run`), for a job of ours its last run from the
//! cluster's task list (`GET /cluster/tasks`, shared by every job of the
//! config for 30 s; see [`super::runs`]), then at most one correction. A
//! re-apply of an unchanged spec sends no write.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use pve_client::{BackupJob, BackupJobOptions};

use super::Caches;
use super::plan::{self, Guests, Job};
use crate::api::ProxmoxBackupJob;
use std::sync::Arc;

use super::runs::Runs;
use crate::api::backup_job::{
    BackupGuest, BackupJobAtProvider, BackupJobRun, ProxmoxBackupJobStatus,
};
use crate::api::condition::Condition;
use crate::reconcile::common::owner::{Ownership, owner_of};
use crate::reconcile::managed::crud::pass::{Kind, Wanted};
use crate::reconcile::managed::crud::{Call, External, Observed};
use crate::reconcile::managed::names;
use crate::reconcile::providers::ConfigKey;

/// The kind's name in owner markers.
const KIND: &str = "ProxmoxBackupJob";

/// PVE's job ID limit (`pve-backup-jobid`: at most 50 characters).
const ID_MAX: usize = 50;

/// The job's Proxmox ID.
pub fn job_id(meta: &ObjectMeta) -> String {
    names::of(meta, ID_MAX)
}

impl ProxmoxBackupJob {
    /// The last run its status records.
    fn recorded_run(&self) -> Option<BackupJobRun> {
        self.status.as_ref()?.at_provider.last_run.clone()
    }

    /// The guests it covers now, for the status and the job.
    fn covered(&self, caches: &Caches) -> Result<Vec<BackupGuest>, String> {
        let spec = &self.spec.for_provider;
        if let Some(selector) = &spec.guest_selector {
            return Ok(super::guests::selected(
                &selector.match_labels,
                &caches.guests(self),
            ));
        }
        let name = spec.pool.clone().unwrap_or_default();
        let pool = caches.pool(self, &name).ok_or_else(|| no_pool(&name))?;
        Ok(pool
            .status
            .as_ref()
            .map(|s| {
                s.at_provider
                    .members
                    .iter()
                    .map(|m| BackupGuest {
                        name: m.name.clone().unwrap_or_default(),
                        kind: m.kind.clone(),
                        vmid: m.vmid,
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    fn guests(&self, caches: &Caches) -> Guests {
        if let Some(name) = &self.spec.for_provider.pool {
            return match caches.pool(self, name) {
                Some(pool) => Guests::Pool(pool.spec.for_provider.pool_id.clone()),
                None => Guests::Nothing(no_pool(name)),
            };
        }
        match self.covered(caches) {
            Ok(guests) if !guests.is_empty() => {
                Guests::Vmids(guests.iter().map(|g| g.vmid).collect())
            }
            Ok(_) => Guests::Nothing(
                "spec.forProvider.guestSelector matches no ProxmoxVM or ProxmoxContainer of this namespace that has a VMID yet (Proxmox needs one)".into(),
            ),
            Err(why) => Guests::Nothing(why),
        }
    }
}

fn no_pool(name: &str) -> String {
    format!("spec.forProvider.pool: no ProxmoxPool named {name} in this namespace")
}

impl Kind for ProxmoxBackupJob {
    type External = JobCalls;
    type Status = ProxmoxBackupJobStatus;
    type Extra = Caches;

    fn managed(&self) -> &crate::api::managed::ManagedSpec {
        &self.spec.managed
    }

    fn want(&self, caches: &Caches) -> Wanted<Self> {
        let spec = &self.spec.for_provider;
        Ok(Job {
            comment: names::marked_comment(KIND, &self.metadata, spec.comment.as_deref()),
            schedule: spec.schedule.clone(),
            storage: spec.storage.clone(),
            mode: spec.mode.map(|m| m.as_str().to_owned()),
            compress: spec.compress.map(|c| c.as_str().to_owned()),
            prune_backups: spec
                .prune_backups
                .as_ref()
                .map(|r| r.keep())
                .unwrap_or_default(),
            notes_template: spec.notes_template.clone(),
            enabled: spec.enabled,
            protected: spec.protected,
            node: spec.node.clone(),
            guests: self.guests(caches),
            next_run: None,
            last_run: None,
        })
    }

    fn external(&self, client: pve_client::Client, caches: &Self::Extra) -> JobCalls {
        JobCalls {
            client,
            id: job_id(&self.metadata),
            uid: self.uid().unwrap_or_default(),
            runs: Arc::clone(&caches.runs),
            key: ConfigKey::of(self),
            recorded: self.recorded_run(),
        }
    }

    /// Nothing in Kubernetes refers to a backup job.
    fn users(&self, _: &Caches) -> Vec<String> {
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
        caches: &Caches,
        conditions: Vec<Condition>,
        observed: Option<&Observed<Job>>,
    ) -> ProxmoxBackupJobStatus {
        let found = observed.and_then(Observed::found);
        // A run no longer listed stays what the status recorded.
        let last_run = found
            .and_then(|j| j.last_run.clone())
            .or_else(|| self.recorded_run());
        let next_run = found
            .and_then(|j| j.next_run)
            .and_then(|s| Timestamp::from_second(i64::try_from(s).ok()?).ok())
            .map(|t| t.to_string());
        ProxmoxBackupJobStatus {
            at_provider: BackupJobAtProvider {
                id: Some(job_id(&self.metadata)),
                guests: self.covered(caches).unwrap_or_default(),
                next_run,
                last_run,
            },
            conditions,
            observed_generation: self.metadata.generation,
            ..Default::default()
        }
    }
}

/// The calls for one job.
pub struct JobCalls {
    client: pve_client::Client,
    id: String,
    uid: String,
    runs: Arc<Runs>,
    key: ConfigKey,
    /// The last run the status records: only newer tasks are looked at.
    recorded: Option<BackupJobRun>,
}

/// A listed job as managed.
fn observed(job: BackupJob) -> Job {
    let guests = match (job.pool, job.vmid) {
        (Some(pool), _) => Guests::Pool(pool),
        (None, Some(vmids)) => {
            let mut ids: Vec<u32> = vmids
                .split(',')
                .filter_map(|v| v.trim().parse().ok())
                .collect();
            ids.sort_unstable();
            Guests::Vmids(ids)
        }
        (None, None) => Guests::Vmids(vec![]),
    };
    Job {
        comment: job.comment.unwrap_or_default(),
        schedule: job.schedule.unwrap_or_default(),
        storage: job.storage,
        mode: job.mode,
        compress: job.compress,
        prune_backups: job.prune_backups,
        notes_template: job.notes_template,
        enabled: job.enabled.unwrap_or(true),
        protected: job.protected,
        node: job.node,
        guests,
        next_run: job.next_run,
        last_run: None,
    }
}

/// What is sent for `job`.
fn options(job: &Job) -> BackupJobOptions {
    let prune = (!job.prune_backups.is_empty()).then(|| {
        job.prune_backups
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    });
    let (vmid, pool) = match &job.guests {
        Guests::Vmids(ids) => (
            Some(ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")),
            None,
        ),
        Guests::Pool(pool) => (None, Some(pool.clone())),
        Guests::Nothing(_) => (None, None),
    };
    BackupJobOptions {
        comment: job.comment.clone(),
        schedule: job.schedule.clone(),
        storage: job.storage.clone(),
        mode: job.mode.clone(),
        compress: job.compress.clone(),
        prune_backups: prune,
        notes_template: job.notes_template.clone(),
        enabled: job.enabled,
        protected: job.protected,
        node: job.node.clone(),
        vmid,
        pool,
    }
}

impl External for JobCalls {
    type Object = Job;

    async fn observe(&self) -> Observed<Job> {
        let jobs = match self.client.backup_jobs().await {
            Ok(jobs) => jobs,
            Err(e) => return Observed::Unknown(e.to_string()),
        };
        let Some(found) = jobs.into_iter().find(|j| j.id == self.id) else {
            return Observed::NotFound;
        };
        let ours = owner_of(found.comment.as_deref(), &self.uid) == Ownership::Ours;
        let mut object = observed(found);
        if ours {
            // Its runs, newer than the one recorded (one shared list read
            // per config and interval; a log read per new vzdump task).
            let vmids = match &object.guests {
                Guests::Vmids(ids) => Some(ids.as_slice()),
                Guests::Pool(_) | Guests::Nothing(_) => None,
            };
            let scope = (&self.key, &self.client);
            object.last_run = match self
                .runs
                .last(scope, &self.id, vmids, self.recorded.as_ref())
                .await
            {
                Ok(run) => run,
                // The job is corrected all the same; its last run waits
                // for the next look.
                Err(e) => {
                    tracing::warn!(job = %self.id, error = %e, "cannot read the job's runs");
                    None
                }
            };
        }
        Observed::Found { object, ours }
    }

    async fn call(&self, call: &Call<Job>) -> Result<(), String> {
        let c = &self.client;
        let result = match call {
            Call::Create(job) => c.create_backup_job(&self.id, &options(job)).await,
            Call::Update(patch) => c.update_backup_job(&self.id, &options(&patch.job)).await,
            Call::Delete => c.delete_backup_job(&self.id).await,
        };
        result.map_err(|e| plan::refusal(&e.to_string()))
    }
}

#[cfg(test)]
pub(super) fn options_of(job: &Job) -> BackupJobOptions {
    options(job)
}

#[cfg(test)]
pub(super) fn observed_of(job: BackupJob) -> Job {
    observed(job)
}
