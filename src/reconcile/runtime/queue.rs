//! Fair admission of passes: at most `max_concurrent_reconciles` run at
//! once, and due passes are admitted in the order they arrived.
//!
//! kube-runtime's own concurrency limit holds due objects back and picks
//! among them in hash order when a slot frees, so under saturation some
//! objects can wait indefinitely. The controller therefore lets the runtime
//! start every due pass (it still never runs two passes of one object at
//! once) and each pass waits here, on tokio's semaphore, which grants
//! permits first come, first served.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{Semaphore, SemaphorePermit};

use super::metrics::Metrics;

/// A wait for admission longer than this is worth a warning.
const SLOW_ADMISSION: Duration = Duration::from_secs(30);
/// At most one such warning per this many seconds.
const WARN_EVERY_SECS: u64 = 60;

/// The admission queue.
#[derive(Debug)]
pub struct Queue {
    permits: Semaphore,
    limit: usize,
    last_warning: AtomicU64,
}

impl Queue {
    /// A queue admitting `limit` passes at once (at least one).
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            permits: Semaphore::new(limit),
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
    }
}
