//! Polling until something holds, with a deadline.

use std::future::Future;
use std::time::Duration;

use anyhow::bail;

/// Calls `check` every 200 ms until it returns `Some`, for at most `limit`.
pub async fn until<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {} s waiting for {what}", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
