//! A Proxmox task as every kind's pass sees it: the in-flight task's
//! state, the node's active tasks, how long a task may stay invisible and
//! the backoff after failures.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

pub use pve_client::{TaskOutcome, Upid};

/// A task Proxmox does not know yet may just not be visible yet (cluster
/// file system sync); after this long it is taken as lost.
pub const NOT_VISIBLE_GRACE: Duration = Duration::from_secs(60);

/// Retry delay after `count` consecutive failures: 10 s doubling to 5 min.
pub fn backoff(count: u32) -> Duration {
    let exp = count.saturating_sub(1).min(16);
    (Duration::from_secs(10) * 2u32.pow(exp)).min(Duration::from_secs(300))
}

/// The state of the in-flight task.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskState {
    /// Still running; progress in percent when the log tells.
    Running {
        /// Percent done.
        progress: Option<u8>,
    },
    /// Stopped: succeeded (possibly with warnings) or failed, with the log
    /// lines that say why.
    Finished(TaskOutcome),
    /// Proxmox answered `no such task` (not visible yet, or gone).
    NotFound,
    /// The status could not be read.
    Unreadable(String),
}

/// A task Proxmox lists as active on a node: its UPID says what it is
/// (type, ID, node, start time).
pub type ActiveTask = Upid;

/// When an active task started, from its UPID.
pub fn started_at(task: &ActiveTask) -> Timestamp {
    Timestamp::from_second(i64::from(task.starttime())).unwrap_or(Timestamp::UNIX_EPOCH)
}
