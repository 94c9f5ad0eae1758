//! With time paused, each settle runs every task until it waits before the
//! clock moves: the order is not left to the machine's speed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

/// The resources woken, in order.
#[derive(Clone, Default)]
struct Woken(Arc<Mutex<Vec<String>>>);

impl Woken {
    fn waker(&self, uid: &str) -> impl FnOnce() + Send + 'static {
        let (woken, uid) = (self.clone(), uid.to_owned());
        move || woken.0.lock().unwrap().push(uid)
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

struct Setup {
    queue: Arc<Queue>,
    metrics: Arc<Metrics>,
    woken: Woken,
}

impl Setup {
    fn new(limit: usize) -> Self {
        Self {
            queue: Arc::new(Queue::new(limit)),
            metrics: Arc::new(Metrics::default()),
            woken: Woken::default(),
        }
    }

    async fn turn(&self, uid: &str, fresh: bool) -> Turn {
        let turn = self
            .queue
            .turn(uid, fresh, &self.metrics, self.woken.waker(uid))
            .await;
        settle().await;
        turn
    }

    async fn now(&self, uid: &str) -> Admitted {
        match self.turn(uid, false).await {
            Turn::Now(admitted) => admitted,
            Turn::Later => panic!("{uid} was not admitted"),
        }
    }

    async fn later(&self, uid: &str, fresh: bool) {
        let turn = self.turn(uid, fresh).await;
        assert!(matches!(turn, Turn::Later), "{uid}: {turn:?}");
    }
}

async fn settle() {
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(5)).await;
}

#[tokio::test(start_paused = true)]
async fn a_pass_that_must_wait_ends_and_its_resource_is_woken_with_its_permits() {
    let s = Setup::new(1);
    let a = s.now("a").await;
    s.later("b", false).await;
    // Another pass of b keeps its place; it is woken once.
    s.later("b", false).await;
    assert!(s.woken.all().is_empty());
    drop(a);
    settle().await;
    assert_eq!(s.woken.all(), ["b"]);
    // The permit is kept for b: c waits, b's pass is admitted.
    s.later("c", false).await;
    let b = s.now("b").await;
    drop(b);
    settle().await;
    assert_eq!(s.woken.all(), ["b", "c"]);
    drop(s.now("c").await);
    // Free again, nobody waiting: admitted at once, nobody woken.
    drop(s.now("d").await);
    assert_eq!(s.woken.all(), ["b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn resources_get_their_turns_in_arrival_order() {
    let s = Setup::new(1);
    let mut held = s.now("first").await;
    let uids: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
    for uid in &uids {
        s.later(uid, false).await;
    }
    for (i, uid) in uids.iter().enumerate() {
        drop(held);
        settle().await;
        assert_eq!(s.woken.all(), uids[..=i], "after {i} turns");
        held = s.now(uid).await;
    }
}

#[tokio::test(start_paused = true)]
async fn permits_nobody_claims_go_to_the_next_in_line() {
    let s = Setup::new(1);
    let a = s.now("a").await;
    s.later("gone", false).await;
    s.later("c", false).await;
    drop(a);
    settle().await;
    assert_eq!(s.woken.all(), ["gone"]);
    tokio::time::sleep(CLAIM_WITHIN - Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(s.woken.all(), ["gone"], "kept a while");
    tokio::time::sleep(Duration::from_secs(2)).await;
    settle().await;
    assert_eq!(s.woken.all(), ["gone", "c"]);
    // A pass that comes too late queues again.
    s.later("gone", false).await;
    drop(s.now("c").await);
    settle().await;
    assert_eq!(s.woken.all(), ["gone", "c", "gone"]);
}

#[tokio::test(start_paused = true)]
async fn permits_forgotten_go_to_the_next_at_once() {
    let s = Setup::new(1);
    let a = s.now("a").await;
    s.later("elsewhere", false).await;
    s.later("c", false).await;
    drop(a);
    settle().await;
    assert_eq!(s.woken.all(), ["elsewhere"]);
    s.queue.forget("elsewhere");
    settle().await;
    assert_eq!(s.woken.all(), ["elsewhere", "c"], "well before a minute");
    drop(s.now("c").await);
}

/// After a bulk apply, a pass of a resource under way waits behind at
/// most a quarter of the limit of first passes, not all of them.
#[tokio::test(start_paused = true)]
async fn a_pass_under_way_waits_behind_few_first_passes() {
    let s = Setup::new(4);
    let mut held = vec![];
    for i in 0..4 {
        held.push(s.now(&format!("held-{i}")).await);
    }
    for i in 0..5 {
        s.later(&format!("fresh-{i}"), true).await;
    }
    s.later("under-way", false).await;
    // Two permits free: the one first pass already queued, then the
    // pass under way, before the four other first passes.
    held.pop();
    settle().await;
    held.pop();
    settle().await;
    assert_eq!(s.woken.all(), ["fresh-0", "under-way"]);
}
