//! The in-flight task and the node's active tasks.

use crate::reconcile::common::tasks::{ActiveTask, TaskState};
use pve_client::{self, Client, TaskListEntry, TaskListFilter, TaskObservation, Upid};

/// Task types whose log reports progress (`transferred X of Y (pp%)`); only
/// for these is the log read while they run.
const WITH_PROGRESS: [&str; 5] = ["qmcreate", "qmclone", "download", "qmigrate", "qmmove"];

/// The state of the task recorded in the status. Never waits for it.
pub(crate) async fn task_state(client: &Client, upid: &Upid) -> TaskState {
    let observed = if WITH_PROGRESS.contains(&upid.task_type()) {
        client.observe_task_progress(upid).await
    } else {
        client.observe_task(upid).await
    };
    match observed {
        Ok(TaskObservation::Running { progress }) => TaskState::Running {
            // Whole percent, rounded down: 99.6 % is not done.
            progress: progress.map(|p| p.percent.clamp(0.0, 100.0) as u8),
        },
        Ok(TaskObservation::Finished(outcome)) => TaskState::Finished(outcome),
        Ok(TaskObservation::NotVisibleYet) | Err(pve_client::Error::TaskUnknown { .. }) => {
            TaskState::NotFound
        }
        Err(e) => TaskState::Unreadable(e.to_string()),
    }
}

/// The tasks running on `node` (finished ones the list still shows are left
/// out: they are nothing to adopt or wait for).
pub(crate) async fn active_tasks(
    client: &Client,
    node: &str,
) -> Result<Vec<ActiveTask>, pve_client::Error> {
    Ok(client
        .active_tasks(node)
        .await?
        .iter()
        .filter_map(TaskListEntry::running_upid)
        .collect())
}

/// The tasks of `task_type` this client's user started on `node` at
/// `since` (UNIX seconds) or later: those running, and those that finished
/// OK. One `GET /nodes/{node}/tasks` (active and archived, filtered by
/// type and start time by Proxmox, by user here).
pub(crate) async fn own_tasks(
    client: &Client,
    node: &str,
    task_type: &str,
    since: u32,
) -> Result<(Vec<ActiveTask>, Vec<ActiveTask>), pve_client::Error> {
    let filter = TaskListFilter {
        source: Some("all".to_owned()),
        typefilter: Some(task_type.to_owned()),
        since: Some(since),
        limit: Some(OWN_TASKS_LIMIT),
        ..TaskListFilter::default()
    };
    let (mut running, mut finished) = (vec![], vec![]);
    for entry in client.list_tasks(node, &filter).await? {
        let Ok(upid) = Upid::parse(&entry.upid) else {
            continue;
        };
        if upid.user() != client.user() || upid.starttime() < since {
            continue;
        }
        if entry.is_running() {
            running.push(upid);
        } else if entry.status.as_deref() == Some("OK") {
            finished.push(upid);
        }
    }
    Ok((running, finished))
}

/// Enough for the downloads of one type on one node since an image was
/// created.
const OWN_TASKS_LIMIT: u32 = 500;
