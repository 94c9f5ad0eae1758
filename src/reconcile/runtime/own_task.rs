//! Each pass on a tokio task of its own.
//!
//! kube-runtime runs a controller's passes inside the controller's one
//! task, in a map it scans whole (polling every pass in flight) whenever
//! any of them is woken, and it takes one finished pass per scan. The
//! controllers that admit passes themselves ([`super::queue`]) let every
//! due pass start, so after a bulk apply thousands are in flight: each
//! answer from Proxmox or the API server to any one of them polled all the
//! others, and every pass ran on the controller's one thread. At 10,000
//! VMs that scan was about 40% of the provider's CPU (docs/scaling.md).
//!
//! A pass spawned on its own task is woken alone, runs on any of the
//! runtime's threads, and leaves in the controller's map only a handle,
//! which is cheap to poll and ready once the pass is done. The handle
//! aborts the pass when dropped, as dropping the pass did (a graceful
//! shutdown waits for passes in flight; a lost config's passes end through
//! their [`super::shards::Hold`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::task::JoinHandle;
use tracing::Instrument;

/// A pass running on its own task; resolves to what the pass returned.
#[derive(Debug)]
pub struct OwnTask<T>(JoinHandle<T>);

impl<T: Send + 'static> OwnTask<T> {
    /// Spawns `pass` inside the caller's span (kube-runtime calls the
    /// reconcile function inside one naming the object and why).
    pub fn spawn(pass: impl Future<Output = T> + Send + 'static) -> Self {
        Self(tokio::spawn(pass.instrument(tracing::Span::current())))
    }
}

impl<T> Future for OwnTask<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match ready!(Pin::new(&mut self.0).poll(cx)) {
            Ok(output) => Poll::Ready(output),
            // A panic in the pass is the controller's, as it was inline.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: only by `drop` below, after which nothing polls
            // this, or by the runtime shutting down, which nothing outlives.
            Err(_) => Poll::Pending,
        }
    }
}

impl<T> Drop for OwnTask<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn resolves_to_the_pass_output() {
        assert_eq!(OwnTask::spawn(async { 7 }).await, 7);
    }

    /// Dropping the handle ends the pass, as dropping an inline pass did.
    #[tokio::test]
    async fn dropping_the_handle_aborts_the_pass() {
        let finished = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let flag = finished.clone();
        let task = OwnTask::spawn(async move {
            // Dropped with the task: tells the test the pass is gone.
            let _gone = tx;
            tokio::time::sleep(Duration::from_secs(3600)).await;
            flag.store(true, Ordering::SeqCst);
        });
        drop(task);
        // The sender is dropped when the aborted task is.
        assert!(rx.await.is_err());
        assert!(!finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    #[should_panic(expected = "the pass's own panic")]
    async fn a_panic_in_the_pass_reaches_the_caller() {
        OwnTask::spawn(async { panic!("the pass's own panic") }).await;
    }
}
