//! What the controller remembers of each resource between its passes, in
//! one table under one lock: the count of failed passes (for backoff), the
//! resourceVersion of our last write (so a pass may read the cache), when
//! it was last observed in full, and what that look showed (so the next
//! pass need not ask Proxmox again what it already said: the kind's
//! [`Remembered`], kept as a [`Kept`] so the table names no kind; the VM's
//! is `vm::pass::observe::known`).
//!
//! All of it is a hint that a restart may lose: a new process starts with
//! an empty table, reads every object afresh once and observes every VM in
//! full, which is always safe. So a lock poisoned by a panicking pass is
//! recovered rather than propagated: the entries are plain values that a
//! panic cannot leave half-written.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::cycle;
use crate::reconcile::common::look::Depth;
use crate::reconcile::providers::ConfigKey;

/// What a kind remembers of its last look, kept between passes.
pub trait Remembered: Clone + std::fmt::Debug {
    /// Something was sent (or may have been): what the look showed no
    /// longer holds as it was.
    fn touch(&mut self);
    /// The pass wrote the resource's metadata: the pass that write
    /// triggers may reuse the look.
    fn wrote(&mut self);
}

/// No look memory (the default for tests of the generic parts).
impl Remembered for () {
    fn touch(&mut self) {}
    fn wrote(&mut self) {}
}

/// A kind's look memory, whatever the kind: the shared table (one for
/// every kind, in the `Context`) keeps it without naming its type, and the
/// kind that put it there reads its own back ([`Kept::get`]).
pub struct Kept(Box<dyn Held>);

/// What the table needs of a look: a copy, the two marks, and its type.
trait Held: Send + Sync + std::fmt::Debug {
    fn copy(&self) -> Box<dyn Held>;
    fn touch(&mut self);
    fn wrote(&mut self);
    fn any(&self) -> &dyn std::any::Any;
}

impl<L: Remembered + Send + Sync + 'static> Held for L {
    fn copy(&self) -> Box<dyn Held> {
        Box::new(self.clone())
    }
    fn touch(&mut self) {
        Remembered::touch(self);
    }
    fn wrote(&mut self) {
        Remembered::wrote(self);
    }
    fn any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Kept {
    /// Keeps `look`.
    pub fn new<L: Remembered + Send + Sync + 'static>(look: L) -> Self {
        Self(Box::new(look))
    }

    /// The look, when it is an `L` (a kind reads only its own).
    pub fn get<L: Clone + 'static>(&self) -> Option<L> {
        self.0.any().downcast_ref::<L>().cloned()
    }
}

impl Clone for Kept {
    fn clone(&self) -> Self {
        Self(self.0.copy())
    }
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Remembered for Kept {
    fn touch(&mut self) {
        self.0.touch();
    }
    fn wrote(&mut self) {
        self.0.wrote();
    }
}

/// Whether resourceVersion `a` is `b` or later. kube-apiserver's versions
/// of one resource type, custom resources' too, are integers that only
/// grow, and clients may compare them so (Kubernetes 1.35, "API concepts:
/// resource versions", KEP-5504; what the servers before it did without
/// saying so). A version that is not such an integer (another kind of API
/// server) is only ever equal.
///
/// Why it matters: equality alone made every pass after someone else's
/// write (the user's edit, the deletion's timestamp) read the object again
/// though the cache already held it: one GET per VM deleted.
fn at_least(a: &str, b: &str) -> bool {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a >= b,
        _ => a == b,
    }
}

/// The first backoff after a failed pass, doubling up to [`BACKOFF_MAX`].
const BACKOFF_BASE: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// One resource's entry.
#[derive(Debug)]
struct Entry<L> {
    /// Consecutive failed passes.
    failures: u32,
    /// The resourceVersion of our last write (or fresh read).
    last_write: Option<String>,
    /// When the VM was last observed in full.
    full_look: Option<Instant>,
    /// What the last look showed.
    known: Option<L>,
    /// The provider config whose Proxmox that look was at.
    config: Option<ConfigKey>,
    /// When this process last wrote the resource's status (what spaces
    /// out the writes that only reword it or move its progress).
    status_written: Option<Instant>,
}

impl<L> Default for Entry<L> {
    fn default() -> Self {
        Self {
            failures: 0,
            last_write: None,
            full_look: None,
            known: None,
            config: None,
            status_written: None,
        }
    }
}

/// Per-resource memory, by resource UID; `L`: what a look showed.
#[derive(Debug)]
pub struct Memory<L = ()> {
    entries: Mutex<HashMap<String, Entry<L>>>,
    /// Where the full-look cycles are measured from ([`cycle`]).
    origin: Instant,
    /// How many times looks were forgotten ([`Memory::forget_look`],
    /// [`Memory::forget_config`]); changed only under the `entries` lock.
    forgotten: AtomicU64,
}

impl<L> Default for Memory<L> {
    fn default() -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            origin: Instant::now(),
            forgotten: AtomicU64::new(0),
        }
    }
}

/// When a look began, as the memory counts it ([`Memory::recall`]): what
/// the look finds is kept only if no look was forgotten since. A pass in
/// flight when another resource's task changed its guest (a rollback
/// stopped it) read the guest before the change; were its look kept, the
/// pass woken for the change would take that look for the guest's state.
/// Any forgetting counts, not only the resource's own: forgetting is rare
/// (a rollback, a Lease gained or lost), and a look not kept costs one
/// full look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark(u64);

impl<L: Remembered> Memory<L> {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry<L>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with<T>(&self, uid: &str, f: impl FnOnce(&mut Entry<L>) -> T) -> T {
        f(self.lock().entry(uid.to_owned()).or_default())
    }

    /// Records a failed pass and returns how long to wait before retrying:
    /// 1 s doubling to 60 s (kube-runtime keeps no such count, and
    /// `error_policy` is not told about successes).
    pub fn failed(&self, uid: &str) -> Duration {
        let n = self.with(uid, |e| {
            e.failures = e.failures.saturating_add(1);
            e.failures
        });
        backoff(n)
    }

    /// Forgets the failures of a resource whose pass succeeded.
    pub fn succeeded(&self, uid: &str) {
        if let Some(entry) = self.lock().get_mut(uid) {
            entry.failures = 0;
        }
    }

    /// Whether the cached object (`cached` resourceVersion) is at least as
    /// new as our last write: we wrote nothing, or it is that version or a
    /// later one ([`at_least`]). Anything else costs one GET, never a wrong
    /// decision. A later one (someone else's write) becomes the version the
    /// next write is conditional on ([`Memory::last_write`]): the pass
    /// decides from it.
    pub fn cache_is_current(&self, uid: &str, cached: Option<&str>) -> bool {
        let mut entries = self.lock();
        let Some(ours) = entries.get_mut(uid).map(|e| &mut e.last_write) else {
            return true;
        };
        match (ours.as_deref(), cached) {
            (None, _) => true,
            (Some(last), Some(cached)) if at_least(cached, last) => {
                if cached != last {
                    *ours = Some(cached.to_owned());
                }
                true
            }
            (Some(_), _) => false,
        }
    }

    /// The version of this replica's last write (or fresh read) of a
    /// resource, if it made one: what the next status write is conditional
    /// on.
    pub fn last_write(&self, uid: &str) -> Option<String> {
        self.lock().get(uid).and_then(|e| e.last_write.clone())
    }

    /// Records the version a write (or a fresh read) produced.
    pub fn saw(&self, uid: &str, version: Option<String>) {
        self.with(uid, |e| e.last_write = version);
    }

    /// This process just wrote the resource's status.
    pub fn wrote_status(&self, uid: &str) {
        self.with(uid, |e| e.status_written = Some(Instant::now()));
    }

    /// How long ago this process last wrote the resource's status, if it
    /// did (a restarted process wrote nothing yet).
    pub fn since_status_written(&self, uid: &str) -> Option<Duration> {
        self.lock()
            .get(uid)
            .and_then(|e| e.status_written)
            .map(|at| at.elapsed())
    }

    /// The depth to observe the resource's VM at, given whether it looks
    /// idle and that it gets a full look `every` (the provider config's
    /// `fullLookInterval`), at its own phase of that interval.
    pub fn depth(&self, uid: &str, idle: bool, every: Duration) -> Depth {
        self.depth_at(uid, idle, every, Instant::now())
    }

    fn depth_at(&self, uid: &str, idle: bool, every: Duration, now: Instant) -> Depth {
        let Some(last) = self.lock().get(uid).and_then(|e| e.full_look) else {
            return Depth::Full;
        };
        let since = |at: Instant| at.saturating_duration_since(self.origin);
        let due = cycle::due(since(last), every, cycle::phase(uid, every));
        if idle && since(now) < due {
            Depth::Idle
        } else {
            Depth::Full
        }
    }

    /// The resource's VM was just observed in full, and found as asked:
    /// until its next full look, a coarse look may do.
    pub fn looked_in_full(&self, uid: &str) {
        self.with(uid, |e| e.full_look = Some(Instant::now()));
    }

    /// Something outside this resource's passes changed its guest (another
    /// resource's task): what the last look showed is forgotten, and the
    /// next look is a full one.
    pub fn forget_look(&self, uid: &str) {
        let mut entries = self.lock();
        self.forgotten.fetch_add(1, Ordering::SeqCst);
        if let Some(entry) = entries.get_mut(uid) {
            entry.known = None;
            entry.full_look = None;
        }
    }

    /// The next look at the resource's VM must be a full one.
    pub fn look_closer(&self, uid: &str) {
        self.with(uid, |e| e.full_look = None);
    }

    /// What the last look at the resource's VM showed, and the mark of a
    /// look that begins now.
    pub fn recall(&self, uid: &str) -> (Option<L>, Mark) {
        let entries = self.lock();
        (entries.get(uid).and_then(|e| e.known.clone()), self.mark())
    }

    /// The mark of a look that begins now, for what is kept without a
    /// look before it.
    pub fn mark(&self) -> Mark {
        Mark(self.forgotten.load(Ordering::SeqCst))
    }

    /// Keeps what the look at `config`'s Proxmox begun at `since` showed
    /// (`None`: nothing worth keeping), unless a look was forgotten since
    /// it began: then nothing is kept and the next look is a full one.
    pub fn remember(&self, uid: &str, config: &ConfigKey, known: Option<L>, since: Mark) {
        let mut entries = self.lock();
        let current = self.forgotten.load(Ordering::SeqCst) == since.0;
        let e = entries.entry(uid.to_owned()).or_default();
        e.config = Some(config.clone());
        if current {
            e.known = known;
        } else {
            e.known = None;
            e.full_look = None;
        }
    }

    /// Something was sent to the resource's VM (or may have been): what
    /// the last look showed no longer holds as it was.
    pub fn touched(&self, uid: &str) {
        self.with_known(uid, Remembered::touch);
    }

    /// The pass wrote the resource's metadata: the pass that write
    /// triggers may reuse its look.
    pub fn wrote_metadata(&self, uid: &str) {
        self.with_known(uid, Remembered::wrote);
    }

    /// Changes what the last look showed, if there is one.
    fn with_known(&self, uid: &str, f: impl FnOnce(&mut L)) {
        if let Some(known) = self.lock().get_mut(uid).and_then(|e| e.known.as_mut()) {
            f(known);
        }
    }

    /// Forgets a resource that is gone.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Forgets the resources that looked at `config`'s Proxmox, of every
    /// kind, when this replica gained or lost its Lease: another replica
    /// may have changed their guests meanwhile, so their next pass reads
    /// them afresh and looks in full. (Entries that never kept a look hold
    /// only a failure count and a resourceVersion hint, both safe to keep.)
    pub fn forget_config(&self, config: &ConfigKey) {
        let mut entries = self.lock();
        self.forgotten.fetch_add(1, Ordering::SeqCst);
        entries.retain(|_, e| e.config.as_ref() != Some(config));
    }
}

/// The delay after `n` consecutive failures.
fn backoff(n: u32) -> Duration {
    let exp = n.saturating_sub(1).min(16);
    (BACKOFF_BASE * 2u32.pow(exp)).min(BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str) -> ConfigKey {
        ConfigKey {
            kind: crate::api::ProviderConfigKind::ProviderConfig,
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    /// A look of a kind's own type, as the VM keeps its `Known`.
    #[derive(Clone, Debug, PartialEq)]
    struct Seen {
        touched: bool,
        written: bool,
    }

    impl Remembered for Seen {
        fn touch(&mut self) {
            self.touched = true;
        }
        fn wrote(&mut self) {
            self.written = true;
        }
    }

    /// The shared table keeps a kind's look without naming its type: the
    /// kind reads its own back, marks reach it, and another type reads
    /// nothing.
    #[test]
    fn a_kept_look_reads_back_as_its_kind_put_it() {
        let memory = Memory::<Kept>::default();
        let fresh = Seen {
            touched: false,
            written: false,
        };
        let (_, mark) = memory.recall("a");
        memory.remember("a", &config("one"), Some(Kept::new(fresh.clone())), mark);
        assert_eq!(
            memory.recall("a").0.and_then(|k| k.get::<Seen>()),
            Some(fresh)
        );
        memory.touched("a");
        memory.wrote_metadata("a");
        assert_eq!(
            memory.recall("a").0.and_then(|k| k.get::<Seen>()),
            Some(Seen {
                touched: true,
                written: true
            })
        );
        assert_eq!(memory.recall("a").0.and_then(|k| k.get::<u32>()), None);
        assert!(memory.recall("b").0.is_none());
    }

    /// A pass that began its look before another resource's task changed
    /// the guest (and its look was forgotten) keeps nothing: the pass woken
    /// for the change looks in full, and the look after that is kept.
    #[test]
    fn a_look_begun_before_a_forgetting_is_not_kept() {
        let memory = Memory::<Kept>::default();
        let seen = || {
            Some(Kept::new(Seen {
                touched: false,
                written: false,
            }))
        };
        let (_, before) = memory.recall("a");
        memory.remember("a", &config("one"), seen(), before);
        memory.looked_in_full("a");
        let (_, in_flight) = memory.recall("a");
        memory.forget_look("a");
        memory.remember("a", &config("one"), seen(), in_flight);
        memory.looked_in_full("a");
        assert!(memory.recall("a").0.is_none(), "taken before the change");
        let (_, other) = memory.recall("b");
        memory.forget_config(&config("two"));
        memory.remember("b", &config("one"), seen(), other);
        assert!(memory.recall("b").0.is_none(), "any forgetting counts");
        let (_, after) = memory.recall("a");
        memory.remember("a", &config("one"), seen(), after);
        assert!(memory.recall("a").0.is_some(), "taken after it");
    }

    #[test]
    fn backoff_doubles_from_one_second_to_a_minute_and_resets() {
        let memory = Memory::<()>::default();
        let seen: Vec<u64> = (0..8).map(|_| memory.failed("a").as_secs()).collect();
        assert_eq!(seen, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(memory.failed("b").as_secs(), 1, "per resource");
        memory.succeeded("a");
        assert_eq!(memory.failed("a").as_secs(), 1);
    }

    #[test]
    fn the_cache_is_current_when_it_shows_our_last_write() {
        let memory = Memory::<()>::default();
        assert!(
            memory.cache_is_current("a", Some("5")),
            "nothing written yet"
        );
        memory.saw("a", Some("7".into()));
        assert!(!memory.cache_is_current("a", Some("5")), "the cache lags");
        assert!(!memory.cache_is_current("a", None), "no version: read");
        assert!(memory.cache_is_current("a", Some("7")));
        assert!(
            memory.cache_is_current("a", Some("9")),
            "a later write (someone else's): the cache has ours and more"
        );
        assert!(
            memory.cache_is_current("a", Some("10")),
            "compared as numbers, not as text"
        );
        assert_eq!(
            memory.last_write("a").as_deref(),
            Some("10"),
            "the next write goes on the version decided from"
        );
        assert!(
            !memory.cache_is_current("a", Some("9")),
            "older than what was decided from: read"
        );
        memory.forget("a");
        assert!(memory.cache_is_current("a", Some("5")));
    }

    #[test]
    fn versions_that_are_not_numbers_are_only_ever_equal() {
        let memory = Memory::<()>::default();
        memory.saw("a", Some("b7".into()));
        assert!(memory.cache_is_current("a", Some("b7")));
        assert!(!memory.cache_is_current("a", Some("b9")));
        assert!(!memory.cache_is_current("a", Some("9")));
        memory.saw("a", Some("7".into()));
        assert!(!memory.cache_is_current("a", Some("x8")));
    }

    /// The default `fullLookInterval`.
    const EVERY: Duration = Duration::from_secs(1200);

    #[test]
    fn an_idle_vm_is_looked_at_cheaply_only_after_a_recent_full_look() {
        let memory = Memory::<()>::default();
        assert_eq!(
            memory.depth("a", true, EVERY),
            Depth::Full,
            "never looked at"
        );
        memory.looked_in_full("a");
        assert_eq!(memory.depth("a", true, EVERY), Depth::Idle);
        assert_eq!(memory.depth("a", false, EVERY), Depth::Full, "not idle");
        memory.look_closer("a");
        assert_eq!(
            memory.depth("a", true, EVERY),
            Depth::Full,
            "asked to look closer"
        );
        memory.looked_in_full("a");
        let last = memory.lock().get("a").and_then(|e| e.full_look).unwrap();
        let since = last.saturating_duration_since(memory.origin);
        let due = cycle::due(since, EVERY, cycle::phase("a", EVERY));
        let at = |d: Duration| memory.origin + d;
        assert_eq!(
            memory.depth_at("a", true, EVERY, at(due - Duration::from_millis(1))),
            Depth::Idle,
            "just before its full look is due"
        );
        assert_eq!(
            memory.depth_at("a", true, EVERY, at(due)),
            Depth::Full,
            "due: a full look"
        );
        assert!(due >= since + EVERY / 2 && due < since + EVERY * 3 / 2);
    }

    #[test]
    fn the_last_status_write_is_remembered_per_resource() {
        let memory = Memory::<()>::default();
        assert_eq!(memory.since_status_written("a"), None, "never written");
        memory.wrote_status("a");
        assert!(memory.since_status_written("a").is_some());
        assert_eq!(memory.since_status_written("b"), None, "per resource");
        memory.forget("a");
        assert_eq!(memory.since_status_written("a"), None);
    }

    #[test]
    fn one_table_for_everything_a_resource_leaves_behind() {
        let memory = Memory::<()>::default();
        memory.failed("a");
        memory.saw("a", Some("7".into()));
        memory.looked_in_full("a");
        memory.forget("a");
        assert!(memory.lock().is_empty());
        memory.remember("b", &config("one"), None, memory.mark());
        memory.looked_in_full("b");
        memory.remember("c", &config("one"), None, memory.mark());
        memory.remember("d", &config("two"), None, memory.mark());
        memory.looked_in_full("d");
        memory.looked_in_full("e");
        memory.forget_config(&config("one"));
        assert_eq!(memory.depth("b", true, EVERY), Depth::Full, "forgotten");
        assert!(!memory.lock().contains_key("c"), "forgotten");
        assert_eq!(
            memory.depth("d", true, EVERY),
            Depth::Idle,
            "another config's"
        );
        assert_eq!(
            memory.depth("e", true, EVERY),
            Depth::Idle,
            "never looked at one"
        );
    }
}
