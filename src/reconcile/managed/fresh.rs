//! Read-your-writes: a pass decides from the resource as this replica
//! last wrote it, whatever the kind.
//!
//! The controller's cache is fed by a watch that may still lag a write
//! this replica just made (a status with a task's UPID, a finalizer). A
//! pass that decided from the older copy would write a status without
//! what the pass before recorded: a task's end never told, or a task
//! sent again. So each write's resourceVersion is remembered
//! ([`Memory::saw`]) and a cached copy older than it is read afresh (one
//! GET, only while the cache lags; see [`Memory::cache_is_current`]); the
//! status is then written on the version decided from
//! ([`super::status::apply_on`]), so nothing newer is overwritten either.

use std::fmt::Debug;

use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::reconcile::runtime::memory::{Memory, Remembered};

/// The resource for this pass: `cached` when it shows this replica's last
/// write of it (or none was made), else read afresh. `None`: it is gone.
pub async fn current<K, L>(
    cached: &K,
    api: &Api<K>,
    memory: &Memory<L>,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    L: Remembered,
{
    let uid = cached.uid().unwrap_or_default();
    if memory.cache_is_current(&uid, cached.resource_version().as_deref()) {
        return Ok(Some(cached.clone()));
    }
    match api.get_opt(&cached.name_any()).await? {
        Some(fresh) => {
            memory.saw(&uid, fresh.resource_version());
            Ok(Some(fresh))
        }
        None => {
            memory.forget(&uid);
            Ok(None)
        }
    }
}

/// Remembers the version a write of `obj` produced.
pub fn wrote<K: Resource, L: Remembered>(memory: &Memory<L>, obj: &K, written: &K) {
    memory.saw(&obj.uid().unwrap_or_default(), written.resource_version());
}

/// The version a status write of `obj` goes on: this replica's last write
/// of it in this pass or before, else the version the pass read.
pub fn base<K: Resource, L: Remembered>(memory: &Memory<L>, obj: &K) -> Option<String> {
    let uid = obj.uid().unwrap_or_default();
    memory.last_write(&uid).or(obj.resource_version())
}
