//! Waiting for a task: for the CLI and tests, never for the reconciler
//! (which uses [`Client::observe_task`] and requeues).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Client;
use crate::config::TaskOptions;
use crate::error::{Error, Result};
use crate::task::{TaskObservation, TaskSuccess};
use crate::upid::Upid;

/// Poll interval and overall timeout of a wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitOptions {
    pub poll_interval: Duration,
    pub timeout: Duration,
}

impl From<&TaskOptions> for WaitOptions {
    fn from(t: &TaskOptions) -> Self {
        Self {
            poll_interval: t.poll_interval,
            timeout: t.task_timeout,
        }
    }
}

impl Client {
    /// Waits for a task with the configured poll interval (default 3 s) and
    /// timeout (default 10 min). `Ok` only for `OK` / `WARNINGS: n`; a
    /// failed task is [`Error::TaskFailed`] with its log tail, a task still
    /// running at the deadline [`Error::TaskTimeout`] (it is *not* stopped).
    pub async fn wait_task(&self, upid: &Upid) -> Result<TaskSuccess> {
        self.wait_task_with(
            upid,
            WaitOptions::from(self.task_options()),
            std::future::pending(),
        )
        .await
    }

    /// Waits with explicit options until the task ends, the timeout passes
    /// or `cancel` completes ([`Error::Cancelled`]). Dropping the future
    /// also cancels. Transient errors while polling do not end the wait.
    pub async fn wait_task_with(
        &self,
        upid: &Upid,
        opts: WaitOptions,
        cancel: impl Future<Output = ()>,
    ) -> Result<TaskSuccess> {
        tokio::pin!(cancel);
        let started = Instant::now();
        let deadline = started + opts.timeout;
        loop {
            let observation = tokio::select! {
                () = &mut cancel => return Err(Error::Cancelled),
                observed = self.observe_task(upid) => observed,
            };
            match observation {
                Ok(TaskObservation::Finished(outcome)) => return outcome.into_result(upid),
                Ok(TaskObservation::Running { .. } | TaskObservation::NotVisibleYet) => {}
                Err(err) if err.is_retryable() => {
                    tracing::debug!(%upid, error = %err, "task poll failed; polling on");
                }
                Err(err) => return Err(err),
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::TaskTimeout {
                    upid: upid.clone(),
                    waited: now - started,
                });
            }
            let nap = opts.poll_interval.min(deadline - now);
            tokio::select! {
                () = &mut cancel => return Err(Error::Cancelled),
                () = tokio::time::sleep(nap) => {}
            }
        }
    }
}
