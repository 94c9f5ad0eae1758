//! Holds: tasks that a `task-held` fault keeps from doing anything until
//! the control API releases their hold by name. A test that must see what
//! waits for a task (a clone waiting for its image, a phase, a progress
//! value) holds the task instead of racing a clock it does not control.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use tokio::sync::Notify;

#[derive(Default)]
pub struct Holds {
    released: Mutex<HashSet<String>>,
    changed: Notify,
}

impl Holds {
    /// Holds `name` (again): tasks that a rule puts under it from now on wait.
    pub fn arm(&self, name: &str) {
        self.set().remove(name);
    }

    /// Releases `name`: its waiting tasks go on, and so will later ones until
    /// a rule arms it again.
    pub fn release(&self, name: &str) {
        self.set().insert(name.to_owned());
        self.changed.notify_waiters();
    }

    /// Waits until `name` is released.
    pub async fn wait(&self, name: &str) {
        loop {
            // Registered before the check, so a release between the check
            // and the await is not lost.
            let changed = self.changed.notified();
            if self.set().contains(name) {
                return;
            }
            changed.await;
        }
    }

    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.released.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::task::JoinHandle;

    use super::*;

    fn waiter(holds: &Arc<Holds>, name: &'static str) -> JoinHandle<()> {
        let holds = holds.clone();
        tokio::spawn(async move { holds.wait(name).await })
    }

    /// Still waiting after a while (a held task never ends by itself).
    async fn still_waiting(task: &JoinHandle<()>, why: &str) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!task.is_finished(), "{why}");
    }

    async fn finishes(task: JoinHandle<()>) {
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("released")
            .unwrap();
    }

    #[tokio::test]
    async fn a_held_task_waits_until_its_hold_is_released() {
        let holds = Arc::new(Holds::default());
        holds.arm("image");
        let first = waiter(&holds, "image");
        still_waiting(&first, "held until released").await;
        holds.release("other");
        still_waiting(&first, "another name releases nothing").await;
        holds.release("image");
        finishes(first).await;
        // Released stays released until armed again.
        finishes(waiter(&holds, "image")).await;
        holds.arm("image");
        let again = waiter(&holds, "image");
        still_waiting(&again, "armed again by a new rule").await;
        holds.release("image");
        finishes(again).await;
    }
}
