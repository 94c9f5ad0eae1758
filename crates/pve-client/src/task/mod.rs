//! Tasks: status, log, outcome and progress.
//!
//! A task has succeeded when its exit status is `OK` or `WARNINGS: <n>`
//! (`PVE::UPID::status_is_error`); anything else — an error text, or
//! `unexpected status` when the worker died — is a failure, reported with
//! the last lines of its log. (go-proxmox counts `WARNINGS` as failure and
//! reports failed tasks as success; neither happens here.)

mod api;
mod progress;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::upid::Upid;

pub(crate) use api::is_no_such_task;
pub use progress::{Progress, last_progress, parse_progress};

/// `GET /nodes/{node}/tasks/{upid}/status`.
#[derive(Clone, Debug, Deserialize)]
pub struct TaskStatus {
    pub upid: Upid,
    #[serde(default)]
    pub node: String,
    /// `running` or `stopped`.
    pub status: String,
    /// Only when stopped.
    #[serde(default)]
    pub exitstatus: Option<String>,
    #[serde(rename = "type", default)]
    pub task_type: String,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub user: String,
    /// Added by PVE for token tasks (not in the schema).
    #[serde(default)]
    pub tokenid: Option<String>,
    #[serde(default)]
    pub starttime: Option<i64>,
}

impl TaskStatus {
    /// Whether the worker still runs.
    pub fn is_running(&self) -> bool {
        self.status == "running"
    }
}

/// One line of a task log.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct TaskLogLine {
    /// Line number, from 1.
    pub n: u64,
    /// Text.
    pub t: String,
}

/// A slice of a task log plus the total line count.
#[derive(Clone, Debug, Default)]
pub struct TaskLog {
    pub lines: Vec<TaskLogLine>,
    pub total: u64,
}

/// An entry of `GET /nodes/{node}/tasks`.
#[derive(Clone, Debug, Deserialize)]
pub struct TaskListEntry {
    /// Kept as text: one odd entry must not spoil the whole list.
    pub upid: String,
    #[serde(rename = "type", default)]
    pub task_type: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub starttime: Option<i64>,
    #[serde(default)]
    pub endtime: Option<i64>,
    /// `RUNNING` for active tasks, else the exit status.
    #[serde(default)]
    pub status: Option<String>,
}

impl TaskListEntry {
    /// The UPID of a task the list says still runs; `None` for one that
    /// ended, or an entry whose UPID does not parse.
    pub fn running_upid(&self) -> Option<Upid> {
        self.is_running()
            .then(|| Upid::parse(&self.upid).ok())
            .flatten()
    }

    /// Whether the list says the task still runs.
    pub fn is_running(&self) -> bool {
        self.status.as_deref().is_none_or(|s| s == "RUNNING")
    }
}

/// Filters for `GET /nodes/{node}/tasks`.
#[derive(Clone, Debug, Default)]
pub struct TaskListFilter {
    /// `active`, `archive` (PVE default) or `all`.
    pub source: Option<String>,
    pub vmid: Option<u32>,
    pub typefilter: Option<String>,
    pub errors: Option<bool>,
    pub start: Option<u32>,
    /// PVE defaults to 50 (and treats 0 as 50).
    pub limit: Option<u32>,
    /// Only tasks that started at this UNIX time or later.
    pub since: Option<u32>,
}

/// Parsed exit status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Ok,
    Warnings(u32),
    Error(String),
}

impl ExitStatus {
    /// Parses `OK`, `WARNINGS: <n>`, or anything else as an error.
    pub fn parse(s: &str) -> Self {
        let s = s.trim();
        if s == "OK" {
            return ExitStatus::Ok;
        }
        if let Some(n) = s.strip_prefix("WARNINGS: ")
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
        {
            return ExitStatus::Warnings(n.parse().unwrap_or(u32::MAX));
        }
        ExitStatus::Error(s.to_owned())
    }
}

/// How a finished task ended.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskOutcome {
    /// `OK` or `WARNINGS: n`; `warning_lines` are the `WARN:` lines of the
    /// log (read only when `warnings > 0`).
    Succeeded {
        warnings: u32,
        warning_lines: Vec<String>,
    },
    /// Anything else, with the log tail.
    Failed {
        exit_status: String,
        log_tail: Vec<String>,
    },
}

impl TaskOutcome {
    pub fn is_success(&self) -> bool {
        matches!(self, TaskOutcome::Succeeded { .. })
    }

    /// `Ok(warnings)` or [`Error::TaskFailed`].
    pub fn into_result(self, upid: &Upid) -> Result<TaskSuccess> {
        match self {
            TaskOutcome::Succeeded {
                warnings,
                warning_lines,
            } => Ok(TaskSuccess {
                warnings,
                warning_lines,
            }),
            TaskOutcome::Failed {
                exit_status,
                log_tail,
            } => Err(Error::TaskFailed {
                upid: upid.clone(),
                exit_status,
                log_tail,
            }),
        }
    }
}

/// A successful task, with any warnings it logged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskSuccess {
    pub warnings: u32,
    pub warning_lines: Vec<String>,
}

/// What is known about a task right now, without waiting.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskObservation {
    /// Still running; progress if the log showed any.
    Running { progress: Option<Progress> },
    /// Done.
    Finished(TaskOutcome),
    /// PVE answered `no such task` within the grace period after the task
    /// was first seen: the worker has not written its log yet.
    NotVisibleYet,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_table() {
        let cases = [
            ("OK", ExitStatus::Ok),
            ("WARNINGS: 3", ExitStatus::Warnings(3)),
            ("WARNINGS: 0", ExitStatus::Warnings(0)),
            ("WARNINGS: x", ExitStatus::Error("WARNINGS: x".into())),
            ("WARNINGS:3", ExitStatus::Error("WARNINGS:3".into())),
            (
                "VM is locked (create)",
                ExitStatus::Error("VM is locked (create)".into()),
            ),
            (
                "unexpected status",
                ExitStatus::Error("unexpected status".into()),
            ),
            ("ok", ExitStatus::Error("ok".into())),
        ];
        for (input, want) in cases {
            assert_eq!(ExitStatus::parse(input), want, "{input}");
        }
    }

    #[test]
    fn outcomes_map_to_results() {
        let upid =
            Upid::parse("UPID:pve:000934AF:0D015579:68BF3A41:qmcreate:100:root@pam:").unwrap();
        let ok = TaskOutcome::Succeeded {
            warnings: 2,
            warning_lines: vec!["WARN: x".into()],
        };
        assert_eq!(ok.into_result(&upid).unwrap().warnings, 2);
        let failed = TaskOutcome::Failed {
            exit_status: "boom".into(),
            log_tail: vec!["a".into(), "TASK ERROR: boom".into()],
        };
        let err = failed.into_result(&upid).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("boom") && text.contains("TASK ERROR: boom"),
            "{text}"
        );
    }

    #[test]
    fn list_entry_running() {
        let e: TaskListEntry = serde_json::from_str(r#"{"upid":"x","status":"RUNNING"}"#).unwrap();
        assert!(e.is_running());
        let e: TaskListEntry =
            serde_json::from_str(r#"{"upid":"x","status":"OK","endtime":5}"#).unwrap();
        assert!(!e.is_running());
    }

    #[test]
    fn a_running_entry_gives_its_parsed_upid_and_others_none() {
        let upid = "UPID:pve:0000AAAA:00000001:6B49D264:qmcreate:100:root@pam:";
        let entry = |upid: &str, status: &str| -> TaskListEntry {
            serde_json::from_value(serde_json::json!({"upid": upid, "status": status})).unwrap()
        };
        let running = entry(upid, "RUNNING").running_upid().expect("running");
        assert_eq!((running.task_type(), running.id()), ("qmcreate", "100"));
        assert_eq!(entry(upid, "OK").running_upid(), None, "ended");
        assert_eq!(entry("x", "RUNNING").running_upid(), None, "not a UPID");
    }
}
