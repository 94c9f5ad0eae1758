//! One time axis for everything measured: seconds since the epoch, with
//! fractions, as pve-sim's request log and task table have them.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in seconds since the epoch.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// An RFC 3339 time (the audit log's `requestReceivedTimestamp`) in seconds
/// since the epoch.
pub fn parse_rfc3339(text: &str) -> Option<f64> {
    let ts: k8s_openapi::jiff::Timestamp = text.parse().ok()?;
    Some(ts.as_nanosecond() as f64 / 1e9)
}

/// `2026-07-01 12:00 UTC`, for report headings.
pub fn utc_minute(epoch: f64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(epoch as i64)
        .map(|ts| ts.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_timestamps_keep_their_fractions() {
        let t = parse_rfc3339("2026-01-02T03:04:05.250000Z").unwrap();
        assert!((t - 1_767_323_045.25).abs() < 1e-6, "{t}");
        assert_eq!(utc_minute(t), "2026-01-02 03:04 UTC");
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
