//! What a fault rule does when it fires, and which kind of event (a
//! request, a task, an archival pass) it applies to.

use serde::{Deserialize, Serialize};

use crate::http::ApiError;

/// What a rule does when it fires.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "fault", rename_all = "kebab-case")]
pub enum FaultAction {
    /// Answer with this status (500, 595, 596, 599, ...) instead of handling the request.
    HttpError {
        status: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Close the connection without a response.
    Reset,
    /// Delay the request by `ms` real milliseconds, then handle it.
    Latency { ms: u64 },
    /// The request's config flock times out (`got timeout`) after the flock timeout.
    LockTimeout,
    /// Handle the request, then answer 200 `{"data":null}`: a call that
    /// starts a task returns no UPID, as a broken proxy or an old bug would.
    NullData,
    /// Handle the request (or run the task, or write the task index)
    /// normally: a step of a sequence that lets one through.
    Pass,
    /// The next matching task fails with `message`.
    TaskFail {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The next matching task ends with `WARNINGS: n`.
    TaskWarnings { warnings: u32 },
    /// The task is invisible (`400 no such task`) for `ms` real
    /// milliseconds, or, with `hold`, until that hold is released (a test
    /// that must see the task unseen holds it there instead of racing `ms`).
    TaskHidden {
        #[serde(default)]
        ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hold: Option<String>,
    },
    /// The task runs but does nothing until `POST /_sim/release {"hold": NAME}`:
    /// a download or an import that is slow for as long as a test needs to
    /// look at what waits for it, with no clock to race. `at: sleep` lets the
    /// body run up to its first wait on the simulated clock (its first log
    /// lines, locks and progress line written) and stops the clock there.
    TaskHeld {
        hold: String,
        #[serde(default, skip_serializing_if = "HoldAt::is_start")]
        at: HoldAt,
    },
    /// An archival pass cannot write the task index (a full `/var/log`):
    /// stopped tasks stay in `source=active` with their exit status.
    ArchiveError,
    /// One step per matching event, in order; see [`super::FaultRule::count`].
    Sequence { steps: Vec<FaultAction> },
}

/// Where a `task-held` task stops.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum HoldAt {
    /// Before its body runs: no log, no lock, nothing done.
    #[default]
    Start,
    /// At every wait on the simulated clock until released: what the body
    /// does before its first wait (log lines, locks, the first progress
    /// line) is there to see while it is held.
    Sleep,
}

impl HoldAt {
    fn is_start(&self) -> bool {
        *self == Self::Start
    }
}

/// The kind of event a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// An `/api2` request (before and around its handler).
    Request,
    /// A worker task, when it starts.
    Task,
    /// An archival pass of the task lists.
    Archive,
}

impl FaultAction {
    /// The scope of a single action; `Pass` fits every scope.
    fn own_scope(&self) -> Option<Scope> {
        match self {
            Self::HttpError { .. }
            | Self::Reset
            | Self::Latency { .. }
            | Self::LockTimeout
            | Self::NullData => Some(Scope::Request),
            Self::TaskFail { .. }
            | Self::TaskWarnings { .. }
            | Self::TaskHidden { .. }
            | Self::TaskHeld { .. } => Some(Scope::Task),
            Self::ArchiveError => Some(Scope::Archive),
            Self::Pass => None,
            Self::Sequence { steps } => steps.iter().find_map(Self::own_scope),
        }
    }

    /// The holds this action (or a step of it) puts tasks under.
    pub fn holds(&self) -> Vec<&str> {
        match self {
            Self::TaskHeld { hold, .. } => vec![hold.as_str()],
            Self::TaskHidden {
                hold: Some(hold), ..
            } => vec![hold.as_str()],
            Self::Sequence { steps } => steps.iter().flat_map(Self::holds).collect(),
            _ => Vec::new(),
        }
    }

    pub fn scope(&self) -> Scope {
        self.own_scope().unwrap_or(Scope::Request)
    }

    /// Whether the action decides the outcome of its event. Only one such
    /// action fires per event: the first matching rule's; later rules keep
    /// their counts. Latency, lock timeouts, warnings and hidden tasks add
    /// to whatever else fires.
    pub fn decides_outcome(&self) -> bool {
        matches!(
            self,
            Self::HttpError { .. }
                | Self::Reset
                | Self::NullData
                | Self::Pass
                | Self::TaskFail { .. }
                | Self::ArchiveError
        )
    }

    /// Rejects actions the simulator could not carry out as asked.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Self::HttpError { status, .. } if !(400..=599).contains(status) => {
                Err(format!("http-error status must be 400-599, got {status}"))
            }
            Self::TaskHeld { hold, .. } if hold.is_empty() => {
                Err("task-held needs a hold name".into())
            }
            Self::TaskHidden {
                hold: Some(hold), ..
            } if hold.is_empty() => Err("task-hidden's hold needs a name".into()),
            Self::Sequence { steps } if steps.is_empty() => {
                Err("a sequence needs at least one step".into())
            }
            Self::Sequence { steps } => {
                let scope = self.scope();
                for step in steps {
                    if matches!(step, Self::Sequence { .. }) {
                        return Err("sequences cannot be nested".into());
                    }
                    step.validate()?;
                    if step.own_scope().is_some_and(|s| s != scope) {
                        return Err(
                            "a sequence mixes request, task and archive faults; use one rule each"
                                .into(),
                        );
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// The status line PVE (or the proxy hop) would send for an injected status.
pub fn http_error(status: u16, message: Option<String>) -> ApiError {
    match status {
        500 => {
            ApiError::Internal(message.unwrap_or_else(|| "pve-sim: injected internal error".into()))
        }
        _ => {
            let reason = message.unwrap_or_else(|| {
                match status {
                    595 => "Errors during connection establishment, proxy handshake: Connection refused",
                    596 => "Connection timed out",
                    597 => "Broken pipe",
                    599 => "Too many redirections",
                    502 => "Bad Gateway",
                    503 => "Service Unavailable",
                    _ => "pve-sim: injected error",
                }
                .to_owned()
            });
            ApiError::Status {
                code: status,
                reason,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(v: serde_json::Value) -> FaultAction {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn sequences_take_the_scope_of_their_steps() {
        let seq = action(serde_json::json!({"fault": "sequence", "steps": [
            {"fault": "pass"}, {"fault": "task-fail"}]}));
        assert_eq!(seq.scope(), Scope::Task);
        assert!(seq.validate().is_ok());
        assert_eq!(
            action(serde_json::json!({"fault": "pass"})).scope(),
            Scope::Request
        );
    }

    #[test]
    fn holds_are_named_by_held_and_hidden_tasks() {
        let held = action(serde_json::json!({"fault": "task-held", "hold": "a", "at": "sleep"}));
        assert_eq!(
            held,
            FaultAction::TaskHeld {
                hold: "a".into(),
                at: HoldAt::Sleep
            }
        );
        let hidden = action(serde_json::json!({"fault": "task-hidden", "hold": "b"}));
        assert_eq!(
            hidden,
            FaultAction::TaskHidden {
                ms: 0,
                hold: Some("b".into())
            }
        );
        let at_start = action(serde_json::json!({"fault": "task-held", "hold": "c"}));
        assert_eq!(
            serde_json::to_value(&at_start).unwrap()["at"],
            serde_json::Value::Null
        );
        for (a, name) in [(held, "a"), (hidden, "b"), (at_start, "c")] {
            assert!(a.validate().is_ok());
            assert_eq!(a.holds(), [name]);
        }
        assert!(
            action(serde_json::json!({"fault": "task-hidden", "ms": 5}))
                .holds()
                .is_empty()
        );
    }

    #[test]
    fn invalid_actions_are_refused() {
        for bad in [
            serde_json::json!({"fault": "sequence", "steps": []}),
            serde_json::json!({"fault": "sequence", "steps": [{"fault": "reset"}, {"fault": "task-fail"}]}),
            serde_json::json!({"fault": "sequence", "steps": [{"fault": "sequence", "steps": [{"fault": "reset"}]}]}),
            serde_json::json!({"fault": "http-error", "status": 200}),
            serde_json::json!({"fault": "task-held", "hold": ""}),
            serde_json::json!({"fault": "task-hidden", "hold": ""}),
            serde_json::json!({"fault": "sequence", "steps": [{"fault": "http-error", "status": 99}]}),
        ] {
            assert!(action(bad.clone()).validate().is_err(), "{bad}");
        }
    }
}
