//! Per-client request limits: a concurrency cap and a token-bucket rate.
//!
//! A thousand `ProxmoxVM`s sharing one ProviderConfig share one client, so
//! these bound what one provider can ask of one Proxmox host no matter how
//! many reconciles run at once.
//!
//! Writes go first. A write starts a task (a create, a start, a destroy),
//! and a task that waits behind reads leaves an import slot of Proxmox's
//! idle, while the reads it waits behind only report on work already under
//! way. So a read takes a rate token only while no write waits for one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::Limits;

/// Concurrency and rate limiter shared by all clones of a client.
#[derive(Debug)]
pub(crate) struct Limiter {
    slots: Arc<Semaphore>,
    bucket: Mutex<TokenBucket>,
    /// Writes waiting for a rate token: reads yield to them.
    writes_waiting: AtomicUsize,
}

/// Which queue a request waits in for its rate token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Priority {
    /// A write (it may start a task): served first.
    Write,
    /// A read: served while no write waits.
    Read,
}

/// Counts a waiting write while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Holding this is the right to have one request in flight.
#[derive(Debug)]
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
}

impl Limiter {
    pub(crate) fn new(limits: &Limits) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(limits.max_concurrent_requests.max(1))),
            bucket: Mutex::new(TokenBucket::new(
                limits.requests_per_second,
                limits.burst,
                Instant::now(),
            )),
            writes_waiting: AtomicUsize::new(0),
        }
    }

    /// Waits for a rate token (writes before reads), then for a
    /// concurrency slot.
    pub(crate) async fn acquire(&self, priority: Priority) -> Slot {
        let _waiting = (priority == Priority::Write).then(|| Waiting::new(&self.writes_waiting));
        loop {
            let wait = {
                let mut bucket = self.bucket.lock().await;
                let yields =
                    priority == Priority::Read && self.writes_waiting.load(Ordering::SeqCst) > 0;
                if yields {
                    Some(bucket.interval())
                } else {
                    bucket.take(Instant::now())
                }
            };
            match wait {
                None => break,
                Some(delay) => tokio::time::sleep(delay).await,
            }
        }
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .expect("the limiter semaphore is never closed");
        Slot { _permit: permit }
    }
}

/// Classic token bucket: `burst` tokens, refilled at `rate` per second.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub(crate) fn new(rate: f64, burst: u32, now: Instant) -> Self {
        let capacity = f64::from(burst.max(1));
        Self {
            // A non-positive rate would never refill; treat it as "no limit".
            rate: if rate > 0.0 { rate } else { f64::INFINITY },
            capacity,
            tokens: capacity,
            last: now,
        }
    }

    /// The time one token takes to refill (how long a yielding read waits
    /// before it looks again).
    fn interval(&self) -> Duration {
        if self.rate.is_infinite() {
            return Duration::from_millis(1);
        }
        Duration::from_secs_f64(1.0 / self.rate).max(Duration::from_millis(1))
    }

    /// Takes a token if one is there (`None`), else says how long until one
    /// will be.
    pub(crate) fn take(&mut self, now: Instant) -> Option<Duration> {
        if self.rate.is_infinite() {
            return None;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            let missing = 1.0 - self.tokens;
            Some(Duration::from_secs_f64(missing / self.rate).max(Duration::from_millis(1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_allows_burst_then_paces() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 3, t0);
        assert!(b.take(t0).is_none());
        assert!(b.take(t0).is_none());
        assert!(b.take(t0).is_none());
        let wait = b.take(t0).expect("bucket is empty");
        assert!(
            wait <= Duration::from_millis(100) && wait >= Duration::from_millis(99),
            "{wait:?}"
        );
        // After 100 ms exactly one more token is there.
        let t1 = t0 + Duration::from_millis(100);
        assert!(b.take(t1).is_none());
        assert!(b.take(t1).is_some());
        // Refill never exceeds the burst.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(b.take(t2).is_none());
        }
        assert!(b.take(t2).is_some());
    }

    #[test]
    fn zero_rate_means_unlimited() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(0.0, 1, t0);
        assert!(b.take(t0).is_none());
        assert!(b.take(t0 + Duration::from_millis(1)).is_none());
    }

    #[tokio::test]
    async fn concurrency_is_capped() {
        let limits = Limits {
            max_concurrent_requests: 2,
            requests_per_second: 0.0,
            ..Limits::default()
        };
        let limiter = Limiter::new(&limits);
        let a = limiter.acquire(Priority::Read).await;
        let _b = limiter.acquire(Priority::Read).await;
        let third =
            tokio::time::timeout(Duration::from_millis(50), limiter.acquire(Priority::Read)).await;
        assert!(third.is_err(), "a third slot must wait");
        drop(a);
        let third =
            tokio::time::timeout(Duration::from_secs(5), limiter.acquire(Priority::Read)).await;
        assert!(third.is_ok(), "a freed slot is handed on");
    }

    /// A write that arrives behind many waiting reads takes the next token
    /// (issue 17: a freed import slot waited behind reads for its create).
    #[tokio::test(start_paused = true)]
    async fn a_write_takes_the_next_token_before_waiting_reads() {
        let limits = Limits {
            max_concurrent_requests: 100,
            requests_per_second: 10.0,
            burst: 1,
            ..Limits::default()
        };
        let limiter = Arc::new(Limiter::new(&limits));
        // The burst is spent.
        drop(limiter.acquire(Priority::Read).await);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for i in 0..20 {
            let (limiter, order) = (Arc::clone(&limiter), Arc::clone(&order));
            waiting.push(tokio::spawn(async move {
                let _slot = limiter.acquire(Priority::Read).await;
                order.lock().unwrap().push(format!("read {i}"));
            }));
        }
        // The reads are all waiting now.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let write = {
            let (limiter, order) = (Arc::clone(&limiter), Arc::clone(&order));
            tokio::spawn(async move {
                let _slot = limiter.acquire(Priority::Write).await;
                order.lock().unwrap().push("write".to_owned());
            })
        };
        write.await.unwrap();
        for w in waiting {
            w.await.unwrap();
        }
        let order = order.lock().unwrap();
        let at = order.iter().position(|o| o == "write").unwrap();
        assert!(at <= 1, "the write went {at}th: {order:?}");
    }
}
