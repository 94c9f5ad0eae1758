//! Per-resource exponential backoff for failed passes: 1 s doubling to
//! 60 s, reset by a pass that succeeds (kube-runtime keeps no such count,
//! and `error_policy` is not told about successes).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

const BASE: Duration = Duration::from_secs(1);
const MAX: Duration = Duration::from_secs(60);

/// Consecutive failures per resource UID.
#[derive(Debug, Default)]
pub struct FailureCounts {
    counts: Mutex<HashMap<String, u32>>,
}

impl FailureCounts {
    /// Records a failure and returns how long to wait before retrying.
    pub fn failed(&self, uid: &str) -> Duration {
        let mut counts = self.counts.lock().expect("failure counts poisoned");
        let n = counts.entry(uid.to_owned()).or_default();
        *n = n.saturating_add(1);
        delay(*n)
    }

    /// Forgets the failures of a resource whose pass succeeded.
    pub fn succeeded(&self, uid: &str) {
        self.counts
            .lock()
            .expect("failure counts poisoned")
            .remove(uid);
    }
}

/// The delay after `n` consecutive failures.
fn delay(n: u32) -> Duration {
    let exp = n.saturating_sub(1).min(16);
    (BASE * 2u32.pow(exp)).min(MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_a_minute_and_resets() {
        let counts = FailureCounts::default();
        let seen: Vec<u64> = (0..8).map(|_| counts.failed("a").as_secs()).collect();
        assert_eq!(seen, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(counts.failed("b").as_secs(), 1, "per resource");
        counts.succeeded("a");
        assert_eq!(counts.failed("a").as_secs(), 1);
    }
}
