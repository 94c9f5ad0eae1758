//! Waiting for a turn outside kube-runtime.
//!
//! kube-runtime polls the handle of every pass in flight at each poll of
//! its controller (its `FutureHashMap` has no wakers of its own), and
//! every event of the controller polls it. A pass waiting for admission is
//! in flight: after a bulk apply of N resources, N passes wait, and each
//! event of the controller costs N polls, so the controller's CPU grows
//! with the square of the resources under way (docs/scaling.md).
//!
//! So a pass that cannot be admitted at once ends at once
//! ([`Turn::Later`]), and a small task takes its place in the queue
//! (tokio's semaphore wakes that task alone when a permit is its). Once
//! admitted, the task keeps the permits for the resource and wakes it; the
//! resource's next pass claims them ([`Turn::Now`]). A pass of a resource
//! already waiting keeps its place; permits kept for a resource this
//! replica no longer reconciles go on at once ([`Queue::forget`]), and
//! permits no pass claims go on to the next in line after
//! [`CLAIM_WITHIN`] (the resource went away while it waited).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Duration;

use super::{Admitted, Queue};
use crate::reconcile::runtime::metrics::Metrics;

/// How long the permits kept for a resource wait for its pass. The wake-up
/// is an ordinary trigger of its controller, taken at once unless the
/// resource is gone (or a pass of it still runs, which ends soon).
const CLAIM_WITHIN: Duration = Duration::from_secs(60);

/// A pass's turn.
#[derive(Debug)]
pub enum Turn {
    /// Admitted: the pass runs, holding the permits until it ends.
    Now(Admitted),
    /// Queued: the pass ends now, and the resource is woken when its turn
    /// comes.
    Later,
}

/// The resources whose turn is awaited, by UID.
#[derive(Debug, Default)]
pub(super) struct Book {
    /// Resources whose turn a task awaits.
    waiting: HashSet<String>,
    /// Permits kept for a resource until its pass claims them, with the
    /// number of their grant.
    kept: HashMap<String, (u64, Admitted)>,
    /// Grants so far (tells a grant from a later one of the same resource).
    grants: u64,
}

impl Queue {
    /// The turn of a pass of the resource `uid`: now if its permits were
    /// kept for it or are free with nobody waiting; otherwise later, and
    /// `wake` asks for its pass when they are its. `fresh`: the first pass
    /// of a resource never reconciled (see [`Queue::admit`]'s lanes).
    pub async fn turn(
        self: &Arc<Self>,
        uid: &str,
        fresh: bool,
        metrics: &Arc<Metrics>,
        wake: impl FnOnce() + Send + 'static,
    ) -> Turn {
        if uid.is_empty() {
            // Nothing to keep permits under (the API server gives every
            // object a UID): it waits in the runtime.
            return Turn::Now(self.wait(fresh, metrics).await);
        }
        let mut book = self.book();
        if let Some((_, admitted)) = book.kept.remove(uid) {
            return Turn::Now(admitted);
        }
        if book.waiting.contains(uid) {
            return Turn::Later;
        }
        if let Some(admitted) = self.now(fresh, metrics) {
            return Turn::Now(admitted);
        }
        book.waiting.insert(uid.to_owned());
        drop(book);
        let (queue, metrics, uid) = (Arc::clone(self), Arc::clone(metrics), uid.to_owned());
        tokio::spawn(async move { queue.await_turn(uid, fresh, &metrics, wake).await });
        Turn::Later
    }

    /// Waits in the queue for `uid`, keeps its permits and wakes it; gives
    /// them up if no pass claims them in time.
    async fn await_turn(&self, uid: String, fresh: bool, metrics: &Metrics, wake: impl FnOnce()) {
        let admitted = self.wait(fresh, metrics).await;
        let grant = {
            let mut book = self.book();
            book.waiting.remove(&uid);
            book.grants += 1;
            let grant = book.grants;
            book.kept.insert(uid.clone(), (grant, admitted));
            grant
        };
        wake();
        tokio::time::sleep(CLAIM_WITHIN).await;
        let unclaimed = {
            let mut book = self.book();
            match book.kept.get(&uid) {
                Some((kept, _)) if *kept == grant => book.kept.remove(&uid),
                _ => None,
            }
        };
        if unclaimed.is_some() {
            tracing::debug!(uid, "a turn was not claimed; it goes to the next in line");
        }
    }

    /// Gives up the permits kept for `uid`, if any: its pass will not run
    /// on this replica (its config is another's now), so they go to the
    /// next in line at once rather than after [`CLAIM_WITHIN`].
    pub fn forget(&self, uid: &str) {
        let kept = self.book().kept.remove(uid);
        drop(kept);
    }

    /// The book (a panic elsewhere leaves it consistent: each change is
    /// whole under the lock).
    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
