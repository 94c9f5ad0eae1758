//! Polling with a generous deadline instead of sleeping fixed times.

use std::future::Future;
use std::time::Duration;

use tokio::time::{Instant, sleep};

/// Calls `check` until it returns `Ok`, backing off from 50 ms to 1 s.
/// Panics after `timeout` with `what` and the last complaint of `check`.
pub async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(50);
    loop {
        let complaint = match check().await {
            Ok(value) => return value,
            Err(complaint) => complaint,
        };
        if Instant::now() >= deadline {
            panic!(
                "timed out after {} s waiting for {what}; last: {complaint}",
                timeout.as_secs()
            );
        }
        sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}
