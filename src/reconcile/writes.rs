//! The resourceVersions of this controller's own last writes, per
//! ProxmoxVM, so a pass can read the controller's cache instead of the API
//! server and still never act on an object older than what it wrote.
//!
//! After a write the cache shows the new object a moment later (the watch
//! event). A pass that starts meanwhile sees a cached resourceVersion other
//! than the one it wrote and reads the object afresh; otherwise the cache is
//! used. resourceVersions are compared for equality only, as Kubernetes
//! asks: any difference (older, or someone else's newer write) costs one
//! GET, never a wrong decision.

use std::collections::HashMap;
use std::sync::Mutex;

/// Resource UID → the resourceVersion of our last write to it.
#[derive(Debug, Default)]
pub struct Writes {
    last: Mutex<HashMap<String, String>>,
}

impl Writes {
    /// Whether the cached object (`cached` resourceVersion) is at least as
    /// new as our last write: it is that very version, or we wrote nothing.
    pub fn cache_is_current(&self, uid: &str, cached: Option<&str>) -> bool {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match last.get(uid) {
            None => true,
            Some(ours) => cached == Some(ours.as_str()),
        }
    }

    /// Records the version a write (or a fresh read) produced.
    pub fn saw(&self, uid: &str, version: Option<String>) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match version {
            Some(v) => {
                last.insert(uid.to_owned(), v);
            }
            None => {
                last.remove(uid);
            }
        }
    }

    /// Forgets a resource that is gone.
    pub fn forget(&self, uid: &str) {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_current_when_it_shows_our_last_write() {
        let writes = Writes::default();
        assert!(
            writes.cache_is_current("a", Some("5")),
            "nothing written yet"
        );
        writes.saw("a", Some("7".into()));
        assert!(!writes.cache_is_current("a", Some("5")), "the cache lags");
        assert!(
            !writes.cache_is_current("a", Some("9")),
            "another write: read afresh"
        );
        assert!(writes.cache_is_current("a", Some("7")));
        writes.forget("a");
        assert!(writes.cache_is_current("a", Some("5")));
    }
}
