//! A job's last run, read with the fewest requests: the cluster's task
//! list (`GET /cluster/tasks`, one request for every node) read at most
//! once per [`LIST_FOR`] per provider config, whatever the number of jobs;
//! the log's first line (`GET .../tasks/{upid}/log?limit=1`) of a new
//! `vzdump` task of `root@pam` read once per task and provider (it names
//! the job; remembered, for every job), and only for tasks newer than the
//! run a job's status records.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pve_client::{Client, TaskListEntry, Upid};

use super::plan::{run_candidates, run_of};
use crate::api::backup_job::BackupJobRun;
use crate::reconcile::providers::ConfigKey;

/// How long a config's task list serves the passes of its jobs.
const LIST_FOR: Duration = Duration::from_secs(30);

/// A config's task list and when it was read; the lock is the single
/// flight.
type Listed = tokio::sync::Mutex<Option<(Instant, Arc<Vec<TaskListEntry>>)>>;

/// The task lists of the provider configs, and the job each `vzdump` task
/// read ran for.
#[derive(Debug, Default)]
pub struct Runs {
    lists: Mutex<HashMap<ConfigKey, Arc<Listed>>>,
    /// UPID → the job its log names (`None`: none, a backup by hand).
    jobs: Mutex<HashMap<String, Option<String>>>,
}

impl Runs {
    /// The newest ended run of job `id` (its guests `vmids` when it names
    /// VMIDs) after `recorded`; `None`: nothing newer ran.
    pub async fn last(
        &self,
        (key, client): (&ConfigKey, &Client),
        id: &str,
        vmids: Option<&[u32]>,
        recorded: Option<&BackupJobRun>,
    ) -> Result<Option<BackupJobRun>, pve_client::Error> {
        let tasks = self.list(key, client).await?;
        for task in run_candidates(&tasks, vmids, recorded) {
            if self.job_of(client, &task.upid).await?.as_deref() == Some(id) {
                return Ok(run_of(task));
            }
        }
        Ok(None)
    }

    /// The cluster's task list, at most [`LIST_FOR`] old; one read serves
    /// every pass waiting meanwhile.
    async fn list(
        &self,
        key: &ConfigKey,
        client: &Client,
    ) -> Result<Arc<Vec<TaskListEntry>>, pve_client::Error> {
        let slot = Arc::clone(
            self.lists
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key.clone())
                .or_default(),
        );
        let mut guard = slot.lock().await;
        if let Some((at, tasks)) = guard.as_ref()
            && at.elapsed() < LIST_FOR
        {
            return Ok(Arc::clone(tasks));
        }
        let asked = Instant::now();
        let tasks = Arc::new(client.cluster_tasks().await?);
        *guard = Some((asked, Arc::clone(&tasks)));
        Ok(tasks)
    }

    /// The job `upid`'s log names, read once.
    async fn job_of(
        &self,
        client: &Client,
        upid: &str,
    ) -> Result<Option<String>, pve_client::Error> {
        if let Some(known) = self.memo().get(upid) {
            return Ok(known.clone());
        }
        let Ok(parsed) = Upid::parse(upid) else {
            return Ok(None);
        };
        let log = client.task_log(&parsed, 0, 1).await?;
        let job = log
            .lines
            .first()
            .and_then(|l| pve_client::vzdump_job_id(&l.t))
            .map(str::to_owned);
        self.memo().insert(upid.to_owned(), job.clone());
        Ok(job)
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<String>>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}
