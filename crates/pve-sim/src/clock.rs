//! Simulated time: every duration of simulated work is multiplied by the
//! time scale, so tests can run a 30 s import in 0.3 s with the same logic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    scale: f64,
}

impl Clock {
    pub fn new(scale: f64) -> Self {
        Self { scale }
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The real duration that stands for `simulated`.
    pub fn scaled(&self, simulated: Duration) -> Duration {
        simulated.mul_f64(self.scale)
    }

    /// Waits for a simulated duration.
    pub async fn sleep(&self, simulated: Duration) {
        let real = self.scaled(simulated);
        if !real.is_zero() {
            tokio::time::sleep(real).await;
        }
    }

    /// The monotonic instant at which `simulated` will have passed.
    pub fn deadline(&self, simulated: Duration) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.scaled(simulated)
    }

    /// Wall-clock seconds since the epoch (UPIDs, tickets, ctime are real).
    pub fn epoch_secs() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// Wall-clock seconds since the epoch with fractions, for the request log.
    pub fn epoch_f64() -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_durations() {
        let c = Clock::new(0.01);
        assert_eq!(
            c.scaled(Duration::from_secs(10)),
            Duration::from_millis(100)
        );
    }
}
