//! Per-node limits on imports and clones that hold exactly.
//!
//! A slot is in use while work is actually in flight on the node: a task
//! the node lists as running (the batched active-task list every client
//! shares, one request per node per poll interval), or a dispatch this
//! process granted whose task the list may not show yet. The two are
//! joined by UPID, so one task is never counted twice, and nothing is
//! counted from resources' statuses (a resource that merely waits on
//! another's task is not an import). Granting is one atomic
//! check-and-take under the book's lock, so two passes cannot both take the
//! last slot; no lock is held across a Proxmox request.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pve_client::Upid;

use crate::api::vm::VmRef;
use crate::reconcile::common::grants::{Heavy, SlotGrant};

/// A dispatched task the active list has not shown for this long is taken
/// as ended (a new task is listed within a second or two; the grace covers
/// the cluster file system's sync).
const NOT_LISTED_GRACE: Duration = Duration::from_secs(15);
/// A grant whose pass never said what became of it (it should, at its end)
/// is given back after this long.
const GRANT_EXPIRES: Duration = Duration::from_secs(600);

/// A task on the node's active list that counts against a limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningTask {
    /// Its UPID.
    pub upid: Upid,
    /// What it counts as.
    pub kind: Heavy,
}

/// A slot taken by a resource of this process.
#[derive(Clone, Debug)]
struct Taken {
    kind: Heavy,
    /// The task once dispatched.
    upid: Option<Upid>,
    /// Whether the active list has shown the task.
    listed: bool,
    /// When granted or dispatched.
    at: Instant,
}

/// A resource waiting for a slot.
#[derive(Clone, Debug)]
struct Waiter {
    since: Instant,
    who: VmRef,
    kind: Heavy,
    woken: bool,
}

/// The slots of one node.
#[derive(Debug, Default)]
pub struct NodeSlots {
    /// Resource UID → its slot.
    taken: HashMap<String, Taken>,
    /// Resource UID → since when it waits for a slot, and whether it was
    /// woken for a freed one since it last asked.
    waiting: HashMap<String, Waiter>,
    /// UPIDs of this process's tasks that do not count (creates without
    /// imports), so the active list does not make them imports.
    light: HashMap<Upid, Instant>,
    /// Per kind, when a slot there last went to anyone: a waiter is told
    /// how long the line stood still, not how long it is (at 10,000 VMs a
    /// waiter far back waits long in a line that keeps moving).
    moved: HashMap<Heavy, Instant>,
}

impl NodeSlots {
    /// Takes a `kind` slot for `uid` if fewer than `limit` are in use;
    /// `running` is the node's active list (heavy tasks only), `None` when
    /// it could not be read (then only this process's work is counted and
    /// nothing is taken as ended).
    pub fn acquire(
        &mut self,
        node: &str,
        (uid, who): (&str, &VmRef),
        kind: Heavy,
        limit: u32,
        running: Option<&[RunningTask]>,
        now: Instant,
    ) -> SlotGrant {
        if let Some(list) = running {
            self.refresh(list, now);
        }
        let running = running.unwrap_or_default();
        if self.taken.get(uid).is_some_and(|t| t.kind == kind) {
            self.waiting.remove(uid);
            return SlotGrant::Granted {
                node: node.to_owned(),
            };
        }
        let in_use = self.in_use(kind, running);
        if in_use < limit {
            self.waiting.remove(uid);
            self.moved.insert(kind, now);
            self.taken.insert(
                uid.to_owned(),
                Taken {
                    kind,
                    upid: None,
                    listed: false,
                    at: now,
                },
            );
            return SlotGrant::Granted {
                node: node.to_owned(),
            };
        }
        let waiter = self.waiting.entry(uid.to_owned()).or_insert(Waiter {
            since: now,
            who: who.clone(),
            kind,
            woken: false,
        });
        // Asked and refused: wake it again when the next slot frees.
        waiter.woken = false;
        let since = waiter.since;
        let still_since = self.moved.get(&kind).map_or(since, |&at| at.max(since));
        let ahead = self
            .waiting
            .values()
            .filter(|w| w.kind == kind && w.since < since)
            .count();
        SlotGrant::Busy {
            node: node.to_owned(),
            in_use,
            limit,
            stalled: now.saturating_duration_since(still_since),
            ahead: u32::try_from(ahead).unwrap_or(u32::MAX),
        }
    }

    /// The resources to wake for slots that are free now: per kind, the
    /// longest waiters not woken yet, one per free slot (`limit` per kind).
    pub fn to_wake(&mut self, limits: impl Fn(Heavy) -> u32) -> Vec<VmRef> {
        let mut woken = Vec::new();
        for kind in [Heavy::Import, Heavy::Clone] {
            let in_use = self.in_use(kind, &[]);
            let pending = u32::try_from(
                self.waiting
                    .values()
                    .filter(|w| w.kind == kind && w.woken)
                    .count(),
            )
            .unwrap_or(u32::MAX);
            let free = limits(kind).saturating_sub(in_use).saturating_sub(pending);
            let mut next: Vec<&mut Waiter> = self
                .waiting
                .values_mut()
                .filter(|w| w.kind == kind && !w.woken)
                .collect();
            next.sort_by_key(|w| w.since);
            for waiter in next.into_iter().take(free as usize) {
                waiter.woken = true;
                woken.push(waiter.who.clone());
            }
        }
        woken
    }

    /// The granted work was dispatched as task `upid`.
    pub fn dispatched(&mut self, uid: &str, upid: &Upid, now: Instant) {
        if let Some(t) = self.taken.get_mut(uid) {
            t.upid = Some(upid.clone());
            t.at = now;
        }
    }

    /// A task of this process that never counts (a create without imports).
    pub fn light_task(&mut self, upid: &Upid, now: Instant) {
        self.light.insert(upid.clone(), now);
    }

    /// Gives the slot back: the grant was not used, or its task ended.
    pub fn release(&mut self, uid: &str) {
        self.taken.remove(uid);
    }

    /// Task `upid` ended: the slot it held is given back. Whether it held
    /// one.
    pub fn ended(&mut self, upid: &Upid) -> bool {
        let before = self.taken.len();
        self.taken.retain(|_, t| t.upid.as_ref() != Some(upid));
        self.taken.len() != before
    }

    /// The resource stops waiting (it is gone, or no longer needs a slot).
    pub fn forget(&mut self, uid: &str) {
        self.taken.remove(uid);
        self.waiting.remove(uid);
    }

    /// How long the longest waiter has waited.
    pub fn oldest_wait(&self, now: Instant) -> Duration {
        self.waiting
            .values()
            .map(|w| now.saturating_duration_since(w.since))
            .max()
            .unwrap_or_default()
    }

    /// Slots of `kind` in use: this process's grants and dispatches, and the
    /// listed tasks that are not among them.
    fn in_use(&self, kind: Heavy, running: &[RunningTask]) -> u32 {
        let ours = self.taken.values().filter(|t| t.kind == kind);
        let known: Vec<&Upid> = self
            .taken
            .values()
            .filter_map(|t| t.upid.as_ref())
            .collect();
        let others = running.iter().filter(|r| {
            r.kind == kind && !known.contains(&&r.upid) && !self.light.contains_key(&r.upid)
        });
        u32::try_from(ours.count() + others.count()).unwrap_or(u32::MAX)
    }

    /// Keeps dispatched tasks that the list shows (or may not show yet);
    /// drops those that ended: listed before and not any more, or never
    /// listed within the grace.
    fn refresh(&mut self, running: &[RunningTask], now: Instant) {
        self.taken.retain(|_, t| {
            let age = now.saturating_duration_since(t.at);
            let Some(upid) = &t.upid else {
                return age < GRANT_EXPIRES;
            };
            if running.iter().any(|r| &r.upid == upid) {
                t.listed = true;
                return true;
            }
            !t.listed && age < NOT_LISTED_GRACE
        });
        self.light
            .retain(|_, at| now.saturating_duration_since(*at) < GRANT_EXPIRES);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A qmcreate UPID on node `pve` whose task ID is `tag`.
    fn upid(tag: &str) -> Upid {
        Upid::encode("pve", 1, 1, 1, "qmcreate", tag, "root@pam").unwrap()
    }

    fn running(upids: &[&str]) -> Vec<RunningTask> {
        upids
            .iter()
            .map(|u| RunningTask {
                upid: upid(u),
                kind: Heavy::Import,
            })
            .collect()
    }

    /// A resource asking, by UID.
    fn ask(uid: &str) -> (&str, &'static VmRef) {
        let who: &'static VmRef = Box::leak(Box::new(VmRef::new(uid).within("ns")));
        (uid, who)
    }

    fn granted(g: &SlotGrant) -> bool {
        matches!(g, SlotGrant::Granted { .. })
    }

    /// Whether `uid` gets an import slot on `pve` (`limit` per node, no
    /// task listed as running) at `at`.
    fn import(slots: &mut NodeSlots, uid: &str, limit: u32, at: Instant) -> bool {
        granted(&slots.acquire("pve", ask(uid), Heavy::Import, limit, Some(&[]), at))
    }

    #[test]
    fn never_more_than_the_limit_in_flight() {
        let mut slots = NodeSlots::default();
        let now = Instant::now();
        let grants: Vec<bool> = (0..5)
            .map(|i| import(&mut slots, &format!("u{i}"), 2, now))
            .collect();
        assert_eq!(grants, [true, true, false, false, false]);
        // Asking again keeps the slot (a retried pass).
        assert!(import(&mut slots, "u0", 2, now));
        // Clones have their own limit.
        assert!(granted(&slots.acquire(
            "pve",
            ask("c0"),
            Heavy::Clone,
            2,
            Some(&[]),
            now
        )));
    }

    #[test]
    fn a_task_is_counted_once_whether_listed_or_granted() {
        let mut slots = NodeSlots::default();
        let now = Instant::now();
        assert!(import(&mut slots, "a", 2, now));
        slots.dispatched("a", &upid("a"), now);
        // The list shows a's task and someone else's import: 2 in use.
        let list = running(&["a", "hand-made"]);
        let busy = slots.acquire("pve", ask("b"), Heavy::Import, 2, Some(&list), now);
        assert_eq!(
            busy,
            SlotGrant::Busy {
                node: "pve".into(),
                in_use: 2,
                limit: 2,
                stalled: Duration::ZERO,
                ahead: 0,
            }
        );
        // a's task ended: the list no longer shows it, so its slot is free
        // even before a's own pass gives it back.
        let later = now + Duration::from_secs(3);
        let list = running(&["hand-made"]);
        assert!(granted(&slots.acquire(
            "pve",
            ask("b"),
            Heavy::Import,
            2,
            Some(&list),
            later
        )));
        // A list that could not be read ends nothing.
        let mut slots = NodeSlots::default();
        assert!(import(&mut slots, "a", 1, now));
        slots.dispatched("a", &upid("a"), now);
        let busy = slots.acquire(
            "pve",
            ask("b"),
            Heavy::Import,
            1,
            None,
            later + NOT_LISTED_GRACE,
        );
        assert!(!granted(&busy), "{busy:?}");
    }

    #[test]
    fn unused_grants_come_back_and_waiters_are_timed() {
        let mut slots = NodeSlots::default();
        let now = Instant::now();
        assert!(import(&mut slots, "a", 1, now));
        let later = now + Duration::from_secs(30);
        match slots.acquire("pve", ask("b"), Heavy::Import, 1, Some(&[]), now) {
            SlotGrant::Busy { .. } => {}
            other => panic!("{other:?}"),
        }
        match slots.acquire("pve", ask("b"), Heavy::Import, 1, Some(&[]), later) {
            SlotGrant::Busy { stalled, .. } => assert_eq!(stalled, Duration::from_secs(30)),
            other => panic!("{other:?}"),
        }
        assert_eq!(slots.oldest_wait(later), Duration::from_secs(30));
        slots.release("a");
        assert!(import(&mut slots, "b", 1, later));
        assert_eq!(slots.oldest_wait(later), Duration::ZERO);
    }

    /// A waiter far back in a line that keeps moving is not told it
    /// stands still: what it is told is the time since a slot last went
    /// to anyone, or its own wait if shorter.
    #[test]
    fn the_line_standing_still_is_timed_not_its_length() {
        let mut slots = NodeSlots::default();
        let now = Instant::now();
        let at = |s: u64| now + Duration::from_secs(s);
        assert!(import(&mut slots, "a", 1, now));
        let stalled = |slots: &mut NodeSlots, uid: &str, t: Instant| match slots.acquire(
            "pve",
            ask(uid),
            Heavy::Import,
            1,
            Some(&[]),
            t,
        ) {
            SlotGrant::Busy { stalled, .. } => stalled.as_secs(),
            other => panic!("{other:?}"),
        };
        assert_eq!(stalled(&mut slots, "z", at(10)), 0, "just in line");
        assert_eq!(stalled(&mut slots, "z", at(300)), 290);
        // The line moves: a's slot goes to b.
        slots.release("a");
        assert!(import(&mut slots, "b", 1, at(400)));
        assert_eq!(stalled(&mut slots, "z", at(700)), 300, "since b got it");
        // Another kind's line moving does not move this one.
        assert!(granted(&slots.acquire(
            "pve",
            ask("c"),
            Heavy::Clone,
            1,
            Some(&[]),
            at(800)
        )));
        assert_eq!(stalled(&mut slots, "z", at(900)), 500);
    }

    #[test]
    fn a_dispatch_that_never_shows_expires_after_the_grace() {
        let mut slots = NodeSlots::default();
        let now = Instant::now();
        assert!(import(&mut slots, "a", 1, now));
        slots.dispatched("a", &upid("a"), now);
        let soon = now + Duration::from_secs(2);
        assert!(!import(&mut slots, "b", 1, soon));
        let later = now + NOT_LISTED_GRACE;
        assert!(import(&mut slots, "b", 1, later));
    }

    #[test]
    fn a_freed_slot_wakes_the_longest_waiter_once() {
        let mut slots = NodeSlots::default();
        let now = Instant::now();
        assert!(import(&mut slots, "a", 1, now));
        let later = now + Duration::from_secs(1);
        for (i, uid) in ["b", "c"].iter().enumerate() {
            let at = now + Duration::from_secs(i as u64);
            assert!(!import(&mut slots, uid, 1, at));
        }
        assert!(slots.to_wake(|_| 1).is_empty(), "no slot is free");
        slots.release("a");
        let woken = slots.to_wake(|_| 1);
        assert_eq!(
            woken.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["b"]
        );
        assert!(
            slots.to_wake(|_| 1).is_empty(),
            "b is not woken twice, c waits"
        );
        // b asked again and got it; c is still waiting.
        assert!(import(&mut slots, "b", 1, later));
        assert!(slots.to_wake(|_| 1).is_empty());
    }

    #[test]
    fn a_task_seen_ended_frees_its_slot_before_its_pass() {
        let mut slots = NodeSlots::default();
        let now = Instant::now();
        assert!(import(&mut slots, "a", 1, now));
        assert!(!slots.ended(&upid("a")), "granted, not dispatched: no task");
        slots.dispatched("a", &upid("a"), now);
        assert!(!import(&mut slots, "b", 1, now));
        assert!(!slots.ended(&upid("other")), "another task frees nothing");
        assert!(slots.to_wake(|_| 1).is_empty());
        assert!(slots.ended(&upid("a")));
        let woken = slots.to_wake(|_| 1);
        assert_eq!(
            woken.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["b"]
        );
        // a's own pass gives it back again: nothing more is freed.
        slots.release("a");
        assert!(slots.to_wake(|_| 1).is_empty());
        assert!(import(&mut slots, "b", 1, now));
    }

    #[test]
    fn light_tasks_of_ours_do_not_count() {
        let mut slots = NodeSlots::default();
        let now = Instant::now();
        slots.light_task(&upid("plain-create"), now);
        let list = running(&["plain-create"]);
        assert!(granted(&slots.acquire(
            "pve",
            ask("a"),
            Heavy::Import,
            1,
            Some(&list),
            now
        )));
    }
}
