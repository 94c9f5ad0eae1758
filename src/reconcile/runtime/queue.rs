//! Fair admission of passes: at most `max_concurrent_reconciles` run at
//! once, and due passes are admitted in the order they arrived; beside
//! them, a small lane for the passes many others wait for
//! ([`Queue::admit_first`]); and the first passes of resources never
//! reconciled ([`Queue::admit_fresh`]) queue a few at a time, so that after
//! a bulk apply the next steps of the resources under way (an import
//! slot's next create among them) do not wait behind thousands of them.
//!
//! kube-runtime's own concurrency limit holds due objects back and picks
//! among them in hash order when a slot frees, so under saturation some
//! objects can wait indefinitely. The controller therefore lets the runtime
//! start every due pass (it still never runs two passes of one object at
//! once; it spawns each on a task of its own), and each pass waits here,
//! on tokio's semaphore, which grants permits first come, first served.
//! The price: kube-runtime polls the handle of every pass in flight
//! whenever its controller is polled, so the controllers run on tasks of
//! their own, polled only for their own events (`controllers::apart`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{Semaphore, SemaphorePermit};

use super::metrics::Metrics;

/// Passes admitted at once in the lane of passes many others wait for
/// ([`Queue::admit_first`]), beside the queue's own limit.
const LANE: usize = 2;

/// At most one in this many of the queue's limit are first passes waiting
/// for a permit or holding one (at least one).
const FRESH_SHARE: usize = 4;

/// A wait for admission longer than this is worth a warning.
const SLOW_ADMISSION: Duration = Duration::from_secs(30);
/// At most one such warning per this many seconds.
const WARN_EVERY_SECS: u64 = 60;

/// The admission queue.
#[derive(Debug)]
pub struct Queue {
    permits: Semaphore,
    /// The lane of [`Queue::admit_first`].
    lane: Semaphore,
    /// The first passes queued for `permits` at once ([`Queue::admit_fresh`]).
    fresh: Semaphore,
    limit: usize,
    last_warning: AtomicU64,
}

impl Queue {
    /// A queue admitting `limit` passes at once (at least one).
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            permits: Semaphore::new(limit),
            lane: Semaphore::new(LANE),
            fresh: Semaphore::new(limit.div_ceil(FRESH_SHARE)),
            limit,
            last_warning: AtomicU64::new(0),
        }
    }

    /// Waits for this pass's turn. The permit admits it until dropped.
    pub async fn admit(&self, metrics: &Metrics) -> Option<SemaphorePermit<'_>> {
        let since = Instant::now();
        metrics.queue_entered();
        // The semaphore is never closed; `None` would only mean it was.
        let permit = self.permits.acquire().await.ok();
        let waited = since.elapsed();
        metrics.queue_left(waited);
        if waited >= SLOW_ADMISSION && self.may_warn() {
            tracing::warn!(
                waited_s = waited.as_secs(),
                concurrency = self.limit,
                "due ProxmoxVMs wait for a reconcile slot; raise --max-concurrent-reconciles or the provider configs' request limits"
            );
        }
        permit
    }

    /// Admits the first pass of a resource never reconciled: in arrival
    /// order among such passes, and only [`FRESH_SHARE`]th of the queue's
    /// limit of them wait for or hold its permits at once, so a pass of a
    /// resource under way waits behind at most that many of them.
    /// Both permits admit it until dropped.
    pub async fn admit_fresh(
        &self,
        metrics: &Metrics,
    ) -> (Option<SemaphorePermit<'_>>, Option<SemaphorePermit<'_>>) {
        let fresh = self.fresh.acquire().await.ok();
        (fresh, self.admit(metrics).await)
    }

    /// Admits a pass that many others wait for (a ProxmoxImage, a
    /// template's VM: every clone of it waits on its next step) through a
    /// lane of its own, first come first served among such passes, so it
    /// does not wait behind the passes of the resources waiting for it (a
    /// thousand clones after a bulk apply). At most [`LANE`] such passes
    /// run beside the queue's limit; the request budget bounds what they
    /// send.
    pub async fn admit_first(&self, metrics: &Metrics) -> Option<SemaphorePermit<'_>> {
        metrics.queue_entered();
        let since = Instant::now();
        let permit = self.lane.acquire().await.ok();
        metrics.queue_left(since.elapsed());
        permit
    }

    fn may_warn(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.last_warning.load(Ordering::Relaxed);
        now.saturating_sub(last) >= WARN_EVERY_SECS
            && self
                .last_warning
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn passes_are_admitted_in_arrival_order() {
        let queue = Arc::new(Queue::new(1));
        let metrics = Arc::new(Metrics::default());
        let first = queue.admit(&metrics).await;
        let order = Arc::new(std::sync::Mutex::new(vec![]));
        let mut waiting = vec![];
        for i in 0..20 {
            let (queue, metrics, order) = (queue.clone(), metrics.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _permit = queue.admit(&metrics).await;
                order.lock().unwrap().push(i);
            }));
            // Let each one queue up before the next arrives.
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(first);
        for w in waiting {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
        // The queue is full (`first` was dropped, but take it again): a
        // pass that others wait for is admitted through its lane.
        let _full = queue.admit(&metrics).await;
        let lane = tokio::time::timeout(Duration::from_secs(5), queue.admit_first(&metrics)).await;
        assert!(lane.is_ok_and(|p| p.is_some()), "the lane admits it");
    }

    /// After a bulk apply, a pass of a resource under way waits behind at
    /// most a quarter of the limit of first passes, not all of them. With
    /// time paused, each settle runs every task until it waits before the
    /// clock moves: the order is not left to the machine's speed.
    #[tokio::test(start_paused = true)]
    async fn a_pass_under_way_waits_behind_few_first_passes() {
        let queue = Arc::new(Queue::new(4));
        let metrics = Arc::new(Metrics::default());
        let mut held = vec![];
        for _ in 0..4 {
            held.push(queue.admit(&metrics).await);
        }
        let order = Arc::new(std::sync::Mutex::new(vec![]));
        let mut waiting = vec![];
        let settle = || async {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        for i in 0..5 {
            let (queue, metrics, order) = (queue.clone(), metrics.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _permit = queue.admit_fresh(&metrics).await;
                order.lock().unwrap().push(format!("fresh-{i}"));
                // Held until the test has seen who came first.
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }));
            settle().await;
        }
        let (q, m, o) = (queue.clone(), metrics.clone(), order.clone());
        waiting.push(tokio::spawn(async move {
            let _permit = q.admit(&m).await;
            o.lock().unwrap().push("under-way".to_owned());
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }));
        settle().await;
        // Two permits free: the one first pass already queued, then the
        // pass under way, before the four other first passes.
        held.pop();
        settle().await;
        held.pop();
        settle().await;
        assert_eq!(*order.lock().unwrap(), ["fresh-0", "under-way"]);
        for w in waiting {
            w.abort();
        }
    }
}
