//! When a long task this client started is likely to end, from how long
//! the same kind of task took on the same node: so its node's list is read
//! once more right then, rather than up to a list interval later.
//!
//! Why: the step after a long task (the next create on an import slot the
//! task held) waits for the list that shows its end; with one list per
//! node per second that is half a second on average for every import, a
//! third of the time a short import takes at the bench's scale. A task is
//! never asked about on its own for this: the read is the node's shared
//! list, and only for a task expected to run at least a list interval
//! (shorter ones end within the next regular read anyway).
//!
//! Each end a list shows gives a sample: the task ended after the last
//! list that showed it running and before the one that showed it ended;
//! the middle of that window, from its dispatch here, is the sample. The
//! expectation is the median of the last [`KEPT`] samples of its node and
//! type, once there are [`MIN_SAMPLES`]: one odd task moves nothing.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

/// Samples kept per node and task type.
const KEPT: usize = 9;
/// Samples needed before an end is expected at all.
const MIN_SAMPLES: usize = 3;
/// How long after its expected end a task's node is read: the archival
/// pass that lists an end runs when the worker is reaped, at once.
pub(crate) const MARGIN: Duration = Duration::from_millis(50);

/// The recent durations of tasks per (node, task type).
#[derive(Debug, Default)]
pub(crate) struct Ends {
    took: HashMap<(String, String), VecDeque<Duration>>,
}

impl Ends {
    /// A task of `kind` on `node` dispatched at `dispatched`, listed
    /// running at `running` (the latest such list; else its dispatch) and
    /// ended at `ended` (the first list that showed it).
    pub(crate) fn record(
        &mut self,
        (node, kind): (&str, &str),
        dispatched: Instant,
        running: Option<Instant>,
        ended: Instant,
    ) {
        let after = running.unwrap_or(dispatched).max(dispatched);
        let middle = after + ended.saturating_duration_since(after) / 2;
        let took = middle.saturating_duration_since(dispatched);
        let samples = self
            .took
            .entry((node.to_owned(), kind.to_owned()))
            .or_default();
        if samples.len() == KEPT {
            samples.pop_front();
        }
        samples.push_back(took);
    }

    /// How long a task of `kind` on `node` is expected to take, when known.
    pub(crate) fn expected(&self, node: &str, kind: &str) -> Option<Duration> {
        let samples = self.took.get(&(node.to_owned(), kind.to_owned()))?;
        if samples.len() < MIN_SAMPLES {
            return None;
        }
        let mut sorted: Vec<Duration> = samples.iter().copied().collect();
        sorted.sort();
        Some(sorted[sorted.len() / 2])
    }
}

/// When a list of the node is due for a task dispatched at `dispatched`
/// that is expected to take `expected`: `None` for a task shorter than
/// `interval` (the regular list catches its end as soon).
pub(crate) fn due(dispatched: Instant, expected: Duration, interval: Duration) -> Option<Instant> {
    (expected >= interval).then(|| dispatched + expected + MARGIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn nothing_is_expected_before_three_samples() {
        let t0 = Instant::now();
        let mut ends = Ends::default();
        for _ in 0..2 {
            ends.record(
                ("pve1", "qmcreate"),
                t0,
                Some(t0 + secs(2.0)),
                t0 + secs(3.0),
            );
        }
        assert_eq!(ends.expected("pve1", "qmcreate"), None);
        ends.record(
            ("pve1", "qmcreate"),
            t0,
            Some(t0 + secs(2.0)),
            t0 + secs(3.0),
        );
        assert_eq!(ends.expected("pve1", "qmcreate"), Some(secs(2.5)));
        assert_eq!(ends.expected("pve2", "qmcreate"), None, "per node");
        assert_eq!(ends.expected("pve1", "qmstart"), None, "per type");
    }

    #[test]
    fn the_median_of_the_last_samples_ignores_one_odd_task() {
        let t0 = Instant::now();
        let mut ends = Ends::default();
        // Windows (running, ended) → middles 3.0, 3.2, 60.0, 3.1.
        for (running, ended) in [(2.5, 3.5), (3.0, 3.4), (59.5, 60.5), (3.0, 3.2)] {
            ends.record(
                ("pve1", "qmcreate"),
                t0,
                Some(t0 + secs(running)),
                t0 + secs(ended),
            );
        }
        assert_eq!(ends.expected("pve1", "qmcreate"), Some(secs(3.2)));
    }

    #[test]
    fn only_the_last_samples_count() {
        let t0 = Instant::now();
        let mut ends = Ends::default();
        for _ in 0..KEPT {
            ends.record(("pve1", "qmcreate"), t0, None, t0 + secs(20.0));
        }
        for _ in 0..KEPT / 2 + 1 {
            ends.record(("pve1", "qmcreate"), t0, None, t0 + secs(4.0));
        }
        // Never listed running: the window starts at the dispatch.
        assert_eq!(ends.expected("pve1", "qmcreate"), Some(secs(2.0)));
    }

    #[test]
    fn a_list_is_due_only_for_a_task_longer_than_the_interval() {
        let t0 = Instant::now();
        let interval = secs(1.0);
        assert_eq!(due(t0, secs(0.4), interval), None);
        assert_eq!(due(t0, secs(3.0), interval), Some(t0 + secs(3.0) + MARGIN));
    }
}
