//! The provider config's durations (Go syntax: `3s`, `10m`, `1m30s`), parsed.

use std::time::Duration;

use super::ProviderSettings;
pub use super::go_duration::go_duration;

/// A duration field that could not be read (the API server's pattern makes
/// this rare: only objects written before validation existed).
#[derive(Debug, thiserror::Error)]
#[error("{field}: {value:?} is not a Go duration such as 3s or 10m")]
pub struct DurationError {
    field: &'static str,
    value: String,
}

fn parse_duration(field: &'static str, value: &str) -> Result<Duration, DurationError> {
    go_duration(value).ok_or_else(|| DurationError {
        field,
        value: value.to_owned(),
    })
}

/// Durations of [`TaskSettings`](super::TaskSettings) and the resync interval, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Poll interval of running tasks.
    pub poll_interval: Duration,
    /// Task deadline.
    pub task_timeout: Duration,
    /// Graceful shutdown deadline.
    pub shutdown_timeout: Duration,
    /// Drift-detection interval.
    pub resync_interval: Duration,
    /// How often an up-to-date VM gets a full look.
    pub full_look_interval: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(3),
            task_timeout: Duration::from_secs(600),
            shutdown_timeout: Duration::from_secs(120),
            resync_interval: Duration::from_secs(60),
            full_look_interval: Duration::from_secs(1200),
        }
    }
}

impl ProviderSettings {
    /// The durations, parsed.
    pub fn timing(&self) -> Result<Timing, DurationError> {
        Ok(Timing {
            poll_interval: parse_duration("tasks.pollInterval", &self.tasks.poll_interval)?,
            task_timeout: parse_duration("tasks.timeout", &self.tasks.timeout)?,
            shutdown_timeout: parse_duration(
                "tasks.shutdownTimeout",
                &self.tasks.shutdown_timeout,
            )?,
            resync_interval: parse_duration("resyncInterval", &self.resync_interval)?,
            full_look_interval: parse_duration("fullLookInterval", &self.full_look_interval)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        let cases = [
            ("500ms", Duration::from_millis(500)),
            ("1m30s", Duration::from_secs(90)),
            ("1.5h", Duration::from_secs(5400)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration("f", text).unwrap(), want, "{text}");
        }
        assert!(parse_duration("f", "10").is_err());
        assert!(parse_duration("f", "-1s").is_err());
    }
}
