//! How many changes a watch has put into its cache, for whoever reads the
//! cache over and over: the task watcher looks four times a second, and
//! reads a cache of thousands of resources again only when it changed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A count of the events a watch applied to its cache; cloned, it is the
/// same count.
#[derive(Clone, Debug, Default)]
pub struct Changes(Arc<AtomicU64>);

impl Changes {
    /// Counts one event; called once the cache took it in, so that a
    /// reader that saw this count reads the cache with the event in it.
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::Release);
    }

    /// The count now. Read before the cache: a change that lands while
    /// the cache is read moves the count past what was read.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_count() {
        let changes = Changes::default();
        let seen = changes.count();
        changes.clone().bump();
        assert_eq!(changes.count(), seen + 1);
    }
}
