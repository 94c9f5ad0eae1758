//! Fair admission of passes: at most `max_concurrent_reconciles` run at
//! once, and due passes are admitted in the order they arrived; beside
//! them, a small lane for the passes many others wait for
//! ([`Queue::admit_first`]); and the first passes of resources never
//! reconciled queue a few at a time, so that after a bulk apply the next
//! steps of the resources under way (an import slot's next create among
//! them) do not wait behind thousands of them.
//!
//! kube-runtime's own concurrency limit holds due objects back and picks
//! among them in hash order when a slot frees, so under saturation some
//! objects can wait indefinitely. The controller therefore lets the runtime
//! start every due pass (it still never runs two passes of one object at
//! once; it spawns each on a task of its own), and each pass takes its turn
//! here, on tokio's semaphores, which grant permits first come, first
//! served. A pass that cannot be admitted at once does not wait inside the
//! runtime, though: it leaves its place in the queue to a small task and
//! ends, and the resource is woken when its turn comes ([`turns`]).

pub mod turns;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use self::turns::Book;
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
    permits: Arc<Semaphore>,
    /// The lane of [`Queue::admit_first`].
    lane: Arc<Semaphore>,
    /// The first passes queued for `permits` at once.
    fresh: Arc<Semaphore>,
    limit: usize,
    last_warning: AtomicU64,
    /// The resources whose turn is awaited outside the runtime.
    book: std::sync::Mutex<Book>,
}

/// The permits of an admitted pass: they admit it until dropped.
#[derive(Debug)]
pub struct Admitted {
    _fresh: Option<OwnedSemaphorePermit>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Queue {
    /// A queue admitting `limit` passes at once (at least one).
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            lane: Arc::new(Semaphore::new(LANE)),
            fresh: Arc::new(Semaphore::new(limit.div_ceil(FRESH_SHARE))),
            limit,
            last_warning: AtomicU64::new(0),
            book: std::sync::Mutex::default(),
        }
    }

    /// Waits for this pass's turn.
    pub async fn admit(&self, metrics: &Metrics) -> Admitted {
        self.wait(false, metrics).await
    }

    /// Waits for a turn: the first pass of a resource never reconciled
    /// (`fresh`) in arrival order among such passes, and only
    /// [`FRESH_SHARE`]th of the queue's limit of them wait for or hold its
    /// permits at once, so a pass of a resource under way waits behind at
    /// most that many of them.
    async fn wait(&self, fresh: bool, metrics: &Metrics) -> Admitted {
        let since = Instant::now();
        metrics.queue_entered();
        // The semaphores are never closed; `None` would only mean they were.
        let fresh = match fresh {
            true => Arc::clone(&self.fresh).acquire_owned().await.ok(),
            false => None,
        };
        let permit = Arc::clone(&self.permits).acquire_owned().await.ok();
        let waited = since.elapsed();
        metrics.queue_left(waited);
        if waited >= SLOW_ADMISSION && self.may_warn() {
            tracing::warn!(
                waited_s = waited.as_secs(),
                concurrency = self.limit,
                "due ProxmoxVMs wait for a reconcile slot; raise --max-concurrent-reconciles or the provider configs' request limits"
            );
        }
        Admitted {
            _fresh: fresh,
            _permit: permit,
        }
    }

    /// Admits the pass at once if its permits are free and nobody waits
    /// for them (tokio hands a released permit to the first waiter, so a
    /// free permit means none waits).
    fn now(&self, fresh: bool, metrics: &Metrics) -> Option<Admitted> {
        let fresh = match fresh {
            true => Some(Arc::clone(&self.fresh).try_acquire_owned().ok()?),
            false => None,
        };
        let permit = Arc::clone(&self.permits).try_acquire_owned().ok()?;
        metrics.queue_entered();
        metrics.queue_left(Duration::ZERO);
        Some(Admitted {
            _fresh: fresh,
            _permit: Some(permit),
        })
    }

    /// Admits a pass that many others wait for (a ProxmoxImage, a
    /// template's VM: every clone of it waits on its next step) through a
    /// lane of its own, first come first served among such passes, so it
    /// does not wait behind the passes of the resources waiting for it (a
    /// thousand clones after a bulk apply). At most [`LANE`] such passes
    /// run beside the queue's limit; the request budget bounds what they
    /// send.
    pub async fn admit_first(&self, metrics: &Metrics) -> Admitted {
        metrics.queue_entered();
        let since = Instant::now();
        let permit = Arc::clone(&self.lane).acquire_owned().await.ok();
        metrics.queue_left(since.elapsed());
        Admitted {
            _fresh: None,
            _permit: permit,
        }
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
        assert!(
            lane.is_ok_and(|a| a._permit.is_some()),
            "the lane admits it"
        );
    }
}
