//! Which requests are retried, on what, and how long to wait in between.
//!
//! | request kind | retried on | never retried on |
//! |---|---|---|
//! | [`CallKind::Read`] (GET) | `Transient` (502/503/504, 595/596/597/599, connection errors, timeouts), `Locked` | everything else |
//! | [`CallKind::Write`] (sync PUT/POST/DELETE that start no task) | same as reads: they set values, so repeating them is harmless | everything else |
//! | [`CallKind::StartsTask`] (answers a UPID) | only errors that prove the request never reached the API handler: connection refused / connect timeout, 595, `got no worker upid`, and `Locked` from the synchronous checks that run before the worker forks | 596/597/599, 502/503/504, resets and read timeouts, because the task may have started; and of course a request that returned a UPID is never sent again |
//!
//! `Locked` retries can be switched off with
//! [`RetryPolicy::retry_locked`](crate::config::RetryPolicy::retry_locked).
//! A `401` with ticket authentication triggers one fresh login and one
//! resend; that is not counted as a retry. Delays grow exponentially from
//! `base_delay`, capped at `max_delay`, with "equal jitter" (a random point
//! in the upper half of the step) so many clients retrying together spread
//! out without ever retrying at once.

use std::time::Duration;

use crate::config::RetryPolicy;
use crate::error::Error;

/// What a request does on the server, which decides whether it may be sent
/// twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// A GET.
    Read,
    /// A synchronous, idempotent write (e.g. `PUT .../config`).
    Write,
    /// A write that starts a task and answers a UPID.
    StartsTask,
}

/// Whether `err`, after `attempt` attempts (1-based), warrants another.
pub(crate) fn should_retry(
    policy: &RetryPolicy,
    kind: CallKind,
    err: &Error,
    attempt: u32,
) -> bool {
    if attempt >= policy.max_attempts {
        return false;
    }
    match err {
        Error::Locked { .. } => policy.retry_locked,
        Error::Transient { may_have_run, .. } => match kind {
            CallKind::Read | CallKind::Write => true,
            CallKind::StartsTask => !may_have_run,
        },
        _ => false,
    }
}

/// The delay before attempt `attempt + 1`, given a uniform random `jitter`
/// in `[0, 1)`: `step/2 + jitter * step/2` where `step = min(max, base * 2^(attempt-1))`.
pub(crate) fn backoff_delay(policy: &RetryPolicy, attempt: u32, jitter: f64) -> Duration {
    let exp = attempt.saturating_sub(1).min(30);
    let step = policy
        .base_delay
        .saturating_mul(1u32 << exp)
        .min(policy.max_delay);
    let half = step / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

/// [`backoff_delay`] with a fresh random jitter.
pub(crate) fn jittered_delay(policy: &RetryPolicy, attempt: u32) -> Duration {
    backoff_delay(policy, attempt, rand::random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            retry_locked: true,
        }
    }

    #[test]
    fn delays_grow_and_stay_within_bounds() {
        let p = policy();
        let expected_steps = [100, 200, 400, 800, 1000, 1000, 1000];
        for (i, step) in expected_steps.iter().enumerate() {
            let attempt = u32::try_from(i).unwrap() + 1;
            let step = Duration::from_millis(*step);
            assert_eq!(
                backoff_delay(&p, attempt, 0.0),
                step / 2,
                "attempt {attempt} floor"
            );
            assert_eq!(
                backoff_delay(&p, attempt, 1.0),
                step,
                "attempt {attempt} ceiling"
            );
            for _ in 0..50 {
                let d = jittered_delay(&p, attempt);
                assert!(d >= step / 2 && d <= step, "attempt {attempt}: {d:?}");
            }
        }
        // Absurd attempt numbers do not overflow.
        assert_eq!(backoff_delay(&p, u32::MAX, 1.0), p.max_delay);
    }

    fn transient(may_have_run: bool) -> Error {
        Error::Transient {
            status: Some(596),
            message: "x".into(),
            may_have_run,
        }
    }

    #[test]
    fn decision_table() {
        let p = policy();
        let locked = Error::Locked {
            what: "create".into(),
            message: "VM is locked (create)".into(),
        };
        let invalid = Error::Invalid {
            message: "x".into(),
            errors: Default::default(),
        };
        // Reads and sync writes retry transient errors either way.
        for kind in [CallKind::Read, CallKind::Write] {
            assert!(should_retry(&p, kind, &transient(true), 1));
            assert!(should_retry(&p, kind, &transient(false), 1));
            assert!(should_retry(&p, kind, &locked, 1));
            assert!(!should_retry(&p, kind, &invalid, 1));
        }
        // A task-starting write is resent only when it provably did not run.
        assert!(!should_retry(&p, CallKind::StartsTask, &transient(true), 1));
        assert!(should_retry(&p, CallKind::StartsTask, &transient(false), 1));
        assert!(should_retry(&p, CallKind::StartsTask, &locked, 1));
        // The bound.
        assert!(should_retry(&p, CallKind::Read, &transient(true), 4));
        assert!(!should_retry(&p, CallKind::Read, &transient(true), 5));
        // Lock retries can be switched off.
        let no_lock = RetryPolicy {
            retry_locked: false,
            ..policy()
        };
        assert!(!should_retry(&no_lock, CallKind::Read, &locked, 1));
        assert!(!should_retry(
            &RetryPolicy::none(),
            CallKind::Read,
            &transient(true),
            1
        ));
    }
}
