//! The per-VM config flock (`/var/lock/qemu-server/lock-<vmid>.conf`) with
//! PVE's timeout behaviour: waiters give up with `got timeout`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

pub type FlockGuard = OwnedMutexGuard<()>;

#[derive(Default)]
pub struct Flocks {
    locks: Mutex<HashMap<u32, Arc<AsyncMutex<()>>>>,
}

pub fn timeout_message(vmid: u32) -> String {
    format!("can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout")
}

impl Flocks {
    fn handle(&self, vmid: u32) -> Arc<AsyncMutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks.entry(vmid).or_default().clone()
    }

    /// Takes the lock without waiting, if it is free.
    pub fn try_lock(&self, vmid: u32) -> Option<FlockGuard> {
        self.handle(vmid).try_lock_owned().ok()
    }

    /// Waits up to `timeout` (real time) for the lock. `force_timeout`
    /// simulates a lock held elsewhere: wait the full timeout, then fail.
    pub async fn lock(
        &self,
        vmid: u32,
        timeout: Duration,
        force_timeout: bool,
    ) -> Result<FlockGuard, String> {
        if force_timeout {
            tokio::time::sleep(timeout).await;
            return Err(timeout_message(vmid));
        }
        tokio::time::timeout(timeout, self.handle(vmid).lock_owned())
            .await
            .map_err(|_| timeout_message(vmid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn second_locker_times_out() {
        let f = Flocks::default();
        let _held = f.lock(100, Duration::from_millis(10), false).await.unwrap();
        let err = f
            .lock(100, Duration::from_millis(10), false)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"
        );
        assert!(f.lock(101, Duration::from_millis(10), false).await.is_ok());
    }
}
