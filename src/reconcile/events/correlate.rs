//! Which write an event becomes, decided the way client-go's
//! `EventCorrelator` (tools/record/events_cache.go) decides it, as a pure
//! state machine: the clock is an argument, the publisher does the I/O.
//!
//! 1. **Counting.** An event identical to one already written (same
//!    object, type, reason and message) patches that event's `count` and
//!    `lastTimestamp` instead of creating another.
//! 2. **Aggregation.** Similar events (same object, type and reason, other
//!    messages) are counted by distinct message: from the
//!    [`Limits::similar`]th distinct message seen within
//!    [`Limits::window`] of the previous one, they go into one event whose
//!    message is "(combined from similar events): <latest message>" and
//!    whose count then grows.
//! 3. **Spam filter.** Every write about an object and type takes a token
//!    from that object's bucket ([`Limits::burst`] tokens, one more every
//!    [`Limits::refill`]); without a token the event is dropped. Its
//!    occurrence still counts: the next write of its series carries it.
//!
//! Memory is bounded: each of the three tables is an LRU of
//! [`Limits::entries`] entries keyed by the object's UID, and messages are
//! kept as hashes only.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::num::NonZeroUsize;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use lru::LruCache;

/// The prefix of an aggregated event's message (client-go's wording).
pub const COMBINED: &str = "(combined from similar events): ";

/// The correlator's knobs; [`Limits::default`] is client-go's.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Entries of each table (client-go: 4096).
    pub entries: NonZeroUsize,
    /// Distinct messages of one object, type and reason from which they
    /// are aggregated (client-go: 10).
    pub similar: usize,
    /// How long after the last similar event a new one starts afresh
    /// (client-go: 10 minutes).
    pub window: Duration,
    /// Writes about one object and type allowed at once (client-go: 25).
    pub burst: u32,
    /// Time to earn one more write (client-go: 5 minutes).
    pub refill: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            entries: NonZeroUsize::new(4096).unwrap_or(NonZeroUsize::MIN),
            similar: 10,
            window: Duration::from_secs(600),
            burst: 25,
            refill: Duration::from_secs(300),
        }
    }
}

/// One event as the controller raises it.
#[derive(Clone, Copy, Debug)]
pub struct Occurrence<'a> {
    /// The UID of the object it is about.
    pub object: &'a str,
    /// Warning (else Normal).
    pub warning: bool,
    /// Its reason.
    pub reason: &'static str,
    /// Its message.
    pub message: &'a str,
}

/// Events of one object, type and reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Group {
    object: String,
    warning: bool,
    reason: &'static str,
}

/// One Event object's identity: a message of a group, or the group's
/// aggregate (`message: None`).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Series {
    group: Group,
    message: Option<u64>,
}

/// The write to make.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// Patch this Event (count, lastTimestamp, message); `None`: create one.
    pub name: Option<String>,
    /// The message to show.
    pub message: String,
    /// Occurrences so far, this one included.
    pub count: i32,
    /// The first occurrence.
    pub first: Timestamp,
}

/// What to do with an occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Write it; report back with [`Correlator::created`] after a create.
    Write(Series, Write),
    /// The object's bucket is empty: drop it (not an error).
    Dropped,
}

/// Distinct recent messages of a group, as hashes.
#[derive(Debug)]
struct Similar {
    messages: VecDeque<u64>,
    last: Timestamp,
}

/// The Event object of a series.
#[derive(Debug)]
struct Logged {
    name: Option<String>,
    count: i32,
    first: Timestamp,
}

/// A token bucket kept as the time it is full again (in nanoseconds, so
/// that no rounding ever grants or denies a token): every write moves that
/// time one refill later; a write is allowed while it stays within
/// `burst` refills of now (the generic cell rate algorithm).
#[derive(Debug)]
struct Bucket {
    full_at: i128,
}

/// The correlator's state; see the module documentation.
#[derive(Debug)]
pub struct Correlator {
    limits: Limits,
    similar: LruCache<Group, Similar>,
    logged: LruCache<Series, Logged>,
    buckets: LruCache<(String, bool), Bucket>,
}

impl Default for Correlator {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Correlator {
    /// An empty correlator.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            similar: LruCache::new(limits.entries),
            logged: LruCache::new(limits.entries),
            buckets: LruCache::new(limits.entries),
        }
    }

    /// Decides what `event`, happening at `now`, becomes.
    pub fn correlate(&mut self, event: &Occurrence<'_>, now: Timestamp) -> Outcome {
        let group = Group {
            object: event.object.to_owned(),
            warning: event.warning,
            reason: event.reason,
        };
        let hash = message_hash(event.message);
        let (series, message) = if self.aggregate(&group, hash, now) {
            let message = format!("{COMBINED}{}", event.message);
            (
                Series {
                    group,
                    message: None,
                },
                message,
            )
        } else {
            let message = event.message.to_owned();
            (
                Series {
                    group,
                    message: Some(hash),
                },
                message,
            )
        };
        let logged = self.logged.get_or_insert_mut(series.clone(), || Logged {
            name: None,
            count: 0,
            first: now,
        });
        logged.count = logged.count.saturating_add(1);
        let write = Write {
            name: logged.name.clone(),
            message,
            count: logged.count,
            first: logged.first,
        };
        if self.admit(event.object, event.warning, now) {
            Outcome::Write(series, write)
        } else {
            Outcome::Dropped
        }
    }

    /// Whether an event identical to `event` (object, type, reason and
    /// message) occurred already, as far as the tables remember (an entry
    /// evicted or a restart forgets it: then it is said again).
    pub fn seen(&self, event: &Occurrence<'_>) -> bool {
        let group = Group {
            object: event.object.to_owned(),
            warning: event.warning,
            reason: event.reason,
        };
        let hash = message_hash(event.message);
        let series = Series {
            group: group.clone(),
            message: Some(hash),
        };
        self.logged.peek(&series).is_some()
            || self
                .similar
                .peek(&group)
                .is_some_and(|s| s.messages.contains(&hash))
    }

    /// Remembers the Event object created for `series`, so that its next
    /// occurrence patches it.
    pub fn created(&mut self, series: &Series, name: String) {
        if let Some(logged) = self.logged.get_mut(series) {
            logged.name = Some(name);
        }
    }

    /// Records `hash` among the group's recent messages; whether the group
    /// is aggregated now. Like client-go, the set is kept one below the
    /// threshold once reached, so every further new message is aggregated.
    fn aggregate(&mut self, group: &Group, hash: u64, now: Timestamp) -> bool {
        let window = self.limits.window;
        let similar = self.similar.get_or_insert_mut(group.clone(), || Similar {
            messages: VecDeque::new(),
            last: now,
        });
        if elapsed(similar.last, now) > window {
            similar.messages.clear();
        }
        similar.last = now;
        if !similar.messages.contains(&hash) {
            similar.messages.push_back(hash);
        }
        if similar.messages.len() < self.limits.similar {
            return false;
        }
        similar.messages.pop_front();
        true
    }

    /// Takes a token from the bucket of `object` and type, if it has one.
    fn admit(&mut self, object: &str, warning: bool, now: Timestamp) -> bool {
        let now = now.as_nanosecond();
        let refill = i128::try_from(self.limits.refill.as_nanos()).unwrap_or(i128::MAX);
        let depth = refill.saturating_mul(i128::from(self.limits.burst));
        let bucket = self
            .buckets
            .get_or_insert_mut((object.to_owned(), warning), || Bucket { full_at: now });
        let next = bucket.full_at.max(now).saturating_add(refill);
        if next.saturating_sub(now) > depth {
            return false;
        }
        bucket.full_at = next;
        true
    }
}

/// Time from `since` to `now`; zero if the clock went back.
fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or_default()
}

fn message_hash(message: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    message.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_700_000_000;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(T0 + secs).unwrap()
    }

    fn event<'a>(object: &'a str, reason: &'static str, message: &'a str) -> Occurrence<'a> {
        Occurrence {
            object,
            warning: false,
            reason,
            message,
        }
    }

    #[test]
    fn an_event_is_seen_once_it_occurred() {
        let mut c = Correlator::default();
        let e = event("uid-a", "TaskStarted", "started qmcreate");
        assert!(!c.seen(&e));
        send(&mut c, &e, at(0));
        assert!(c.seen(&e));
        assert!(!c.seen(&event("uid-b", "TaskStarted", "started qmcreate")));
        assert!(!c.seen(&event("uid-a", "TaskStarted", "started qmstart")));
        // Aggregated from the 10th distinct message on: still seen.
        for i in 0..12 {
            send(
                &mut c,
                &event("uid-a", "TaskSucceeded", &format!("m{i}")),
                at(i),
            );
        }
        assert!(c.seen(&event("uid-a", "TaskSucceeded", "m11")));
    }

    /// Correlates and, like the publisher, records a create under a name
    /// derived from the series' first message; returns the write.
    fn send(c: &mut Correlator, e: &Occurrence<'_>, now: Timestamp) -> Option<Write> {
        match c.correlate(e, now) {
            Outcome::Write(series, write) => {
                if write.name.is_none() {
                    c.created(&series, format!("ev-{}", write.message));
                }
                Some(write)
            }
            Outcome::Dropped => None,
        }
    }

    #[test]
    fn identical_events_count_up_one_event() {
        let mut c = Correlator::default();
        let e = event("uid-a", "TaskStarted", "started qmstart");
        let first = send(&mut c, &e, at(0)).unwrap();
        assert_eq!(
            first,
            Write {
                name: None,
                message: "started qmstart".into(),
                count: 1,
                first: at(0),
            }
        );
        let again = send(&mut c, &e, at(30)).unwrap();
        assert_eq!(again.name.as_deref(), Some("ev-started qmstart"));
        assert_eq!((again.count, again.first), (2, at(0)));
        // Another object, type or reason is another event.
        let other = [
            event("uid-b", "TaskStarted", "started qmstart"),
            event("uid-a", "TaskFinished", "started qmstart"),
            Occurrence { warning: true, ..e },
        ];
        for e in other {
            assert_eq!(send(&mut c, &e, at(31)).unwrap().name, None, "{e:?}");
        }
    }

    #[test]
    fn similar_events_are_combined_from_the_tenth_message() {
        let mut c = Correlator::default();
        let messages: Vec<String> = (0..14).map(|i| format!("started UPID:{i}")).collect();
        let writes: Vec<Write> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| send(&mut c, &event("uid-a", "TaskStarted", m), at(i as i64)).unwrap())
            .collect();
        for w in &writes[..9] {
            assert_eq!((w.name.as_deref(), w.count), (None, 1), "{w:?}");
            assert!(!w.message.starts_with(COMBINED));
        }
        // The 10th distinct message creates the aggregate ...
        assert_eq!(writes[9].name, None);
        assert_eq!(writes[9].message, format!("{COMBINED}started UPID:9"));
        assert_eq!(writes[9].count, 1);
        // ... which every later one patches, with the latest message.
        let aggregate = format!("ev-{COMBINED}started UPID:9");
        for (i, w) in writes[10..].iter().enumerate() {
            assert_eq!(w.name.as_deref(), Some(aggregate.as_str()));
            assert_eq!(w.count, 2 + i as i32);
            assert_eq!(w.message, format!("{COMBINED}{}", messages[10 + i]));
            assert_eq!(w.first, at(9));
        }
    }

    #[test]
    fn similar_events_start_afresh_after_a_quiet_window() {
        let mut c = Correlator::default();
        for i in 0..9 {
            send(&mut c, &event("uid-a", "R", &format!("m{i}")), at(i)).unwrap();
        }
        // Ten minutes and a second after the 9th: the 10th is on its own.
        let later = send(&mut c, &event("uid-a", "R", "m9"), at(8 + 601)).unwrap();
        assert_eq!(later.message, "m9");
        // The window is rolling: similar events 10 minutes apart each keep
        // the group alive.
        let mut c = Correlator::default();
        for i in 0..10 {
            let w = send(&mut c, &event("uid-a", "R", &format!("m{i}")), at(i * 600)).unwrap();
            assert_eq!(w.message.starts_with(COMBINED), i == 9, "{w:?}");
        }
    }

    #[test]
    fn the_spam_filter_allows_a_burst_then_one_write_per_refill() {
        let limits = Limits::default();
        let mut c = Correlator::new(limits);
        let e = event("uid-a", "TaskStarted", "same");
        let passed = (0..40)
            .filter(|_| send(&mut c, &e, at(0)).is_some())
            .count();
        assert_eq!(passed, 25, "the burst");
        assert!(
            send(&mut c, &e, at(299)).is_none(),
            "no token before 5 minutes"
        );
        let w = send(&mut c, &e, at(300)).unwrap();
        assert_eq!(w.count, 42, "dropped occurrences still count");
        assert!(send(&mut c, &e, at(301)).is_none());
        // Other objects and the other type have buckets of their own.
        assert!(send(&mut c, &event("uid-b", "TaskStarted", "same"), at(1)).is_some());
        let warning = Occurrence { warning: true, ..e };
        assert!(send(&mut c, &warning, at(1)).is_some());
        // The bucket refills to the burst, not beyond.
        let much_later = (0..40)
            .filter(|_| send(&mut c, &e, at(1_000_000)).is_some())
            .count();
        assert_eq!(much_later, 25);
    }

    #[test]
    fn a_dropped_first_occurrence_is_created_with_its_count_later() {
        let mut c = Correlator::new(Limits {
            burst: 1,
            ..Limits::default()
        });
        send(&mut c, &event("uid-a", "R", "one"), at(0)).unwrap();
        assert!(send(&mut c, &event("uid-a", "R", "two"), at(1)).is_none());
        let w = send(&mut c, &event("uid-a", "R", "two"), at(301)).unwrap();
        assert_eq!((w.name, w.count, w.first), (None, 2, at(1)));
    }

    #[test]
    fn memory_is_bounded_by_the_entries() {
        let mut c = Correlator::new(Limits {
            entries: NonZeroUsize::new(8).unwrap(),
            ..Limits::default()
        });
        for i in 0..1000 {
            let uid = format!("uid-{i}");
            send(&mut c, &event(&uid, "R", &format!("m{i}")), at(i)).unwrap();
        }
        assert_eq!(
            (c.similar.len(), c.logged.len(), c.buckets.len()),
            (8, 8, 8)
        );
        // The oldest were evicted: that object's event is created anew.
        let again = send(&mut c, &event("uid-0", "R", "m0"), at(2000)).unwrap();
        assert_eq!(again.name, None);
        let recent = send(&mut c, &event("uid-999", "R", "m999"), at(2000)).unwrap();
        assert_eq!(recent.name.as_deref(), Some("ev-m999"));
    }
}
