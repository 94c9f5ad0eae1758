//! Tasks: status, log, outcome and progress.
//!
//! A task has succeeded when its exit status is `OK` or `WARNINGS: <n>`
//! (`PVE::UPID::status_is_error`); anything else — an error text, or
//! `unexpected status` when the worker died — is a failure, reported with
//! the last lines of its log. (go-proxmox counts `WARNINGS` as failure and
//! reports failed tasks as success; neither happens here.)

use std::sync::LazyLock;

use regex::Regex;
use reqwest::Method;
use serde::Deserialize;

use crate::proxmox::client::{ApiPath, ApiRequest, Client};
use crate::proxmox::error::{Error, Result};
use crate::proxmox::form::Params;
use crate::proxmox::upid::Upid;

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

/// Progress of a copy/import: `transferred X of Y (pp.pp%)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    pub percent: f64,
    pub transferred_bytes: u64,
    pub total_bytes: u64,
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

static PROGRESS_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"transferred\s+([0-9.]+)\s*([KMGTPE]?i?B)\s+of\s+([0-9.]+)\s*([KMGTPE]?i?B)\s+\(([0-9.]+)%\)",
    )
    .expect("the progress regex is a valid constant")
});

/// Parses a `transferred 1.1 GiB of 2.2 GiB (50.00%)` line (PVE's
/// `render_bytes` units: B, KiB, MiB, GiB, TiB, PiB).
pub fn parse_progress(line: &str) -> Option<Progress> {
    let caps = PROGRESS_RE.captures(line)?;
    let num = |i: usize| caps.get(i)?.as_str().parse::<f64>().ok();
    let unit = |i: usize| unit_factor(caps.get(i)?.as_str());
    let percent = num(5)?;
    if !(0.0..=100.0).contains(&percent) {
        return None;
    }
    Some(Progress {
        percent,
        transferred_bytes: to_bytes(num(1)?, unit(2)?),
        total_bytes: to_bytes(num(3)?, unit(4)?),
    })
}

fn unit_factor(unit: &str) -> Option<f64> {
    let pow = match unit.chars().next()? {
        'B' => 0,
        'K' => 1,
        'M' => 2,
        'G' => 3,
        'T' => 4,
        'P' => 5,
        'E' => 6,
        _ => return None,
    };
    Some(1024f64.powi(pow))
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn to_bytes(value: f64, factor: f64) -> u64 {
    // Rendered values have two decimals: the result is approximate anyway.
    (value * factor).round().max(0.0) as u64
}

/// The last progress line in a log slice.
pub fn last_progress(lines: &[TaskLogLine]) -> Option<Progress> {
    lines.iter().rev().find_map(|l| parse_progress(&l.t))
}

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
        let envelope = self.call(&req).await?;
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
            .opt("limit", filter.limit);
        self.get(ApiPath::new("/nodes/{node}/tasks", &[node]), params)
            .await
    }

    /// `DELETE /nodes/{node}/tasks/{upid}`: asks PVE to stop a task.
    pub async fn stop_task(&self, upid: &Upid) -> Result<()> {
        let _: serde_json::Value = self
            .write(
                Method::DELETE,
                ApiPath::new("/nodes/{node}/tasks/{upid}", &[upid.node(), upid.as_str()]),
                Params::new(),
            )
            .await?;
        Ok(())
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
    fn progress_table() {
        let p = parse_progress("transferred 1.1 GiB of 2.2 GiB (50.00%)").unwrap();
        assert!((p.percent - 50.0).abs() < 1e-9);
        assert_eq!(p.total_bytes, (2.2 * 1024f64.powi(3)).round() as u64);
        let zero = parse_progress("transferred 0.0 B of 2.2 GiB (0.00%)").unwrap();
        assert_eq!(zero.transferred_bytes, 0);
        let done = parse_progress("transferred 2.2 GiB of 2.2 GiB (100.00%)").unwrap();
        assert!((done.percent - 100.0).abs() < 1e-9);
        let mib = parse_progress("transferred 512.0 MiB of 1.0 GiB (50.00%)").unwrap();
        assert_eq!(mib.transferred_bytes, 512 * 1024 * 1024);
        for not in [
            "scsi0: successfully created disk 'local-lvm:vm-100-disk-0,size=2252M'",
            "transferred lots of stuff",
            "transferred 1 XB of 2 GiB (10.00%)",
            "transferred 1 GiB of 2 GiB (150.00%)",
        ] {
            assert!(parse_progress(not).is_none(), "{not}");
        }
        let lines = vec![
            TaskLogLine {
                n: 1,
                t: "transferred 0.0 B of 1.0 GiB (0.00%)".into(),
            },
            TaskLogLine {
                n: 2,
                t: "transferred 0.5 GiB of 1.0 GiB (50.00%)".into(),
            },
            TaskLogLine {
                n: 3,
                t: "other".into(),
            },
        ];
        assert!((last_progress(&lines).unwrap().percent - 50.0).abs() < 1e-9);
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
    fn no_such_task_detection() {
        let e = crate::proxmox::error::classify(
            400,
            Some("Parameter verification failed."),
            br#"{"data":null,"errors":{"upid":"no such task"}}"#,
        );
        assert!(is_no_such_task(&e));
        let other = crate::proxmox::error::classify(
            400,
            Some("Parameter verification failed."),
            br#"{"data":null,"errors":{"upid":"unable to parse worker upid"}}"#,
        );
        assert!(!is_no_such_task(&other));
    }

    #[test]
    fn list_entry_running() {
        let e: TaskListEntry = serde_json::from_str(r#"{"upid":"x","status":"RUNNING"}"#).unwrap();
        assert!(e.is_running());
        let e: TaskListEntry =
            serde_json::from_str(r#"{"upid":"x","status":"OK","endtime":5}"#).unwrap();
        assert!(!e.is_running());
    }
}
