//! Task endpoints: status, log, list, stop; and turning an exit status
//! into an outcome.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::form::Params;
use crate::request::{ApiPath, ApiRequest};
use crate::task::{
    ExitStatus, TaskListEntry, TaskListFilter, TaskLog, TaskLogLine, TaskOutcome, TaskStatus,
};
use crate::upid::Upid;

/// Lines read from the start of a log before falling back to a second,
/// tail-only request.
const LOG_FIRST_READ: u32 = 500;

impl Client {
    /// `GET /nodes/{node}/tasks/{upid}/status`, asked of the UPID's node.
    pub async fn task_status(&self, upid: &Upid) -> Result<TaskStatus> {
        self.get(
            ApiPath::new(
                "/nodes/{node}/tasks/{upid}/status",
                &[upid.node(), upid.as_str()],
            ),
            Params::new(),
        )
        .await
    }

    /// `GET /nodes/{node}/tasks/{upid}/log?start=&limit=`.
    pub async fn task_log(&self, upid: &Upid, start: u64, limit: u32) -> Result<TaskLog> {
        let req = ApiRequest::get(
            ApiPath::new(
                "/nodes/{node}/tasks/{upid}/log",
                &[upid.node(), upid.as_str()],
            ),
            Params::new().text("start", start).text("limit", limit),
        );
        let mut envelope = self.call(&req).await?;
        let lines: Vec<TaskLogLine> = envelope.data("GET /nodes/{node}/tasks/{upid}/log")?;
        let total = envelope
            .body
            .get("total")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| lines.last().map_or(0, |l| l.n));
        Ok(TaskLog { lines, total })
    }

    /// The last `n` lines of a task log (one request for short logs, two
    /// for long ones).
    pub async fn task_log_tail(&self, upid: &Upid, n: u32) -> Result<Vec<String>> {
        let first = self.task_log(upid, 0, LOG_FIRST_READ.max(n)).await?;
        let lines = if first.total > first.lines.len() as u64 {
            let start = first.total.saturating_sub(u64::from(n));
            self.task_log(upid, start, n).await?.lines
        } else {
            first.lines
        };
        let skip = lines.len().saturating_sub(n as usize);
        Ok(lines.into_iter().skip(skip).map(|l| l.t).collect())
    }

    /// `GET /cluster/tasks`: every node's recent tasks (running and
    /// ended), one request for the whole cluster.
    pub async fn cluster_tasks(&self) -> Result<Vec<TaskListEntry>> {
        self.get(ApiPath::new("/cluster/tasks", &[]), Params::new())
            .await
    }

    /// `GET /nodes/{node}/tasks` with filters.
    pub async fn list_tasks(
        &self,
        node: &str,
        filter: &TaskListFilter,
    ) -> Result<Vec<TaskListEntry>> {
        let params = Params::new()
            .opt("source", filter.source.as_deref())
            .opt("vmid", filter.vmid)
            .opt("typefilter", filter.typefilter.as_deref())
            .opt_flag("errors", filter.errors)
            .opt("start", filter.start)
            .opt("limit", filter.limit)
            .opt("since", filter.since);
        self.get(ApiPath::new("/nodes/{node}/tasks", &[node]), params)
            .await
    }

    /// Turns a stopped task's exit status into an outcome, reading the log
    /// where the outcome needs it (failure: the tail; warnings: the
    /// `WARN:` lines).
    pub(crate) async fn outcome_of(&self, upid: &Upid, exit_status: &str) -> Result<TaskOutcome> {
        let tail_lines = self.task_options().log_tail_lines;
        Ok(match ExitStatus::parse(exit_status) {
            ExitStatus::Ok => TaskOutcome::Succeeded {
                warnings: 0,
                warning_lines: Vec::new(),
            },
            ExitStatus::Warnings(warnings) => {
                let lines = self
                    .task_log_tail(upid, LOG_FIRST_READ)
                    .await
                    .unwrap_or_default();
                TaskOutcome::Succeeded {
                    warnings,
                    warning_lines: lines
                        .into_iter()
                        .filter(|l| l.starts_with("WARN"))
                        .collect(),
                }
            }
            ExitStatus::Error(exit_status) => {
                // The tail is a courtesy: a failed log read must not hide the
                // failure itself.
                let log_tail = match self.task_log_tail(upid, tail_lines).await {
                    Ok(lines) => lines,
                    Err(err) => vec![format!("(task log unavailable: {err})")],
                };
                TaskOutcome::Failed {
                    exit_status,
                    log_tail,
                }
            }
        })
    }
}

/// Whether an error is PVE's `400 no such task` for a UPID that parses.
pub(crate) fn is_no_such_task(err: &Error) -> bool {
    match err {
        Error::Invalid { errors, message } => {
            errors
                .get("upid")
                .is_some_and(|m| m.contains("no such task"))
                || message.contains("no such task")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_such_task_detection() {
        let e = crate::classify::classify(
            400,
            Some("Parameter verification failed."),
            br#"{"data":null,"errors":{"upid":"no such task"}}"#,
        );
        assert!(is_no_such_task(&e));
        let other = crate::classify::classify(
            400,
            Some("Parameter verification failed."),
            br#"{"data":null,"errors":{"upid":"unable to parse worker upid"}}"#,
        );
        assert!(!is_no_such_task(&other));
    }
}
