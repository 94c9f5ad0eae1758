//! When an idle resource's next full look is due: once per interval, each
//! resource at its own phase of the interval (from its UID). Resources
//! created together would otherwise all come due together, every interval,
//! and their looks reach Proxmox in bursts; at their own phases the looks
//! of any number of resources spread evenly over the interval.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

/// Where in each interval of length `every` the resource `uid` is looked
/// at in full (the same in every process: `DefaultHasher::new` has fixed
/// keys).
pub fn phase(uid: &str, every: Duration) -> Duration {
    let every_ms = every.as_millis().max(1);
    let mut hasher = DefaultHasher::new();
    uid.hash(&mut hasher);
    let ms = u128::from(hasher.finish()) % every_ms;
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// When the next full look is due after one at `last` (both measured from
/// the same origin): the first moment at the resource's `phase` that is at
/// least half an interval after `last`. A resource looked at off its phase
/// (created, changed) comes back to its phase within 1.5 intervals, and
/// then is looked at exactly once per interval.
pub fn due(last: Duration, every: Duration, phase: Duration) -> Duration {
    let every_ms = every.as_millis();
    if every_ms == 0 {
        return last;
    }
    let earliest = (last + every / 2).as_millis();
    let phase_ms = phase.as_millis() % every_ms;
    let cycles = earliest.saturating_sub(phase_ms).div_ceil(every_ms);
    let due = phase_ms + cycles * every_ms;
    Duration::from_millis(u64::try_from(due).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn the_next_full_look_is_at_the_phase_at_least_half_an_interval_on() {
        let every = S(600);
        let cases = [
            (
                "on its phase: exactly one interval later",
                S(100),
                S(100),
                S(700),
            ),
            ("just after its phase: the next one", S(101), S(100), S(700)),
            ("just before: the phase after next", S(99), S(100), S(700)),
            (
                "less than half an interval to the phase: skipped",
                S(450),
                S(100),
                S(1300),
            ),
            (
                "half an interval before the phase: kept",
                S(400),
                S(100),
                S(700),
            ),
            ("phase zero", S(0), S(0), S(600)),
        ];
        for (name, last, phase, want) in cases {
            assert_eq!(due(last, every, phase), want, "{name}");
        }
        assert_eq!(
            due(S(30), Duration::ZERO, S(0)),
            S(30),
            "no interval: at once"
        );
    }

    #[test]
    fn phases_are_stable_within_the_interval_and_spread() {
        let every = S(600);
        assert_eq!(phase("a", every), phase("a", every));
        let phases: Vec<Duration> = (0..1000)
            .map(|i| phase(&format!("uid-{i}"), every))
            .collect();
        assert!(phases.iter().all(|p| *p < every));
        // Ten buckets of a minute: each holds about a tenth of them.
        let mut buckets = [0u32; 10];
        for p in &phases {
            buckets[(p.as_secs() / 60) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|n| (50..=150).contains(n)),
            "{buckets:?}"
        );
    }
}
