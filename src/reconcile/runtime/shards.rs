//! Which provider configs this replica may act for: one Lease per provider
//! config, spread among the replicas ([`assign`]), taken, renewed and given
//! up by [`leases`].
//!
//! A config this replica holds has a **term**: a number unique in this
//! process and a renew deadline on the monotonic clock (the moment the
//! last successful renewal was sent, plus [`RENEW_DEADLINE`]). Every pass
//! takes a [`Hold`] of its config's current term before it starts and
//! shows it to [`Shards::fence`] before each write (Proxmox, the
//! resource's metadata and status, its events and connection Secret): the
//! fence fails once the term ended or its deadline passed. The deadline is
//! measured on the monotonic clock, which goes on while the process is
//! stopped, so a replica resuming from a pause (SIGSTOP, a frozen VM) past
//! its deadline treats itself as not holding until it acquires the Lease
//! again, in a new term. Other replicas take a Lease over only once they
//! have seen it unchanged for its whole duration ([`LEASE_DURATION`]) by
//! their own clocks, five seconds after the holder's deadline at the
//! earliest. A term that ends (Lease lost, taken, handed over, or the
//! deadline passed) also cancels the passes of its config in flight
//! ([`Hold::lost`]).
//!
//! Without leader election (`--leader-election=false`) every config is
//! held, in one term that never ends.

pub mod assign;
pub mod leases;

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::reconcile::error::Error;
use crate::reconcile::providers::ConfigKey;

/// How long a Lease is valid after its last renewal (`leaseDurationSeconds`).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long after sending its last successful renewal a holder may still
/// write: five seconds of margin before anyone may take the Lease over.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often Leases are listed, renewed and acquired.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// One held config.
#[derive(Debug)]
struct Term {
    id: u64,
    deadline: Instant,
    ended: watch::Sender<bool>,
}

/// The terms of the configs this replica holds.
#[derive(Debug)]
pub struct Shards {
    /// `None`: no leader election, every config is held.
    identity: Option<String>,
    terms: Mutex<HashMap<ConfigKey, Term>>,
    next: AtomicU64,
}

/// A pass's proof of its config's term, shown to [`Shards::fence`].
#[derive(Clone, Debug)]
pub struct Hold {
    key: ConfigKey,
    term: u64,
    /// `None`: the term never ends (no leader election).
    ended: Option<watch::Receiver<bool>>,
    /// The config does not exist (no Lease, no holder): every replica may
    /// say so on the resource, and nothing else (see [`Shards::to_report`]).
    report_only: bool,
}

impl Hold {
    /// The config held.
    pub fn key(&self) -> &ConfigKey {
        &self.key
    }

    /// Only to report that the config does not exist.
    pub fn report_only(&self) -> bool {
        self.report_only
    }

    /// Resolves when the term ends; never without leader election.
    pub async fn lost(&self) {
        match self.ended.clone() {
            // A dropped sender ended the term too.
            Some(mut ended) => {
                let _ = ended.wait_for(|e| *e).await;
            }
            None => std::future::pending().await,
        }
    }
}

impl Shards {
    /// Every config held, always (`--leader-election=false`).
    pub fn unsharded() -> Self {
        Self {
            identity: None,
            terms: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
        }
    }

    /// Configs held only while their Lease names `identity`.
    pub fn sharded(identity: impl Into<String>) -> Self {
        Self {
            identity: Some(identity.into()),
            ..Self::unsharded()
        }
    }

    /// This replica's Lease identity; `None` without leader election.
    pub fn identity(&self) -> Option<&str> {
        self.identity.as_deref()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConfigKey, Term>> {
        self.terms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current term of `key`, if this replica holds it now.
    pub fn hold(&self, key: &ConfigKey) -> Option<Hold> {
        if self.identity.is_none() {
            return Some(Hold {
                key: key.clone(),
                term: 0,
                ended: None,
                report_only: false,
            });
        }
        let terms = self.lock();
        let term = terms.get(key).filter(|t| Instant::now() < t.deadline)?;
        Some(Hold {
            key: key.clone(),
            term: term.id,
            ended: Some(term.ended.subscribe()),
            report_only: false,
        })
    }

    /// For a resource whose config does not exist: no Lease names it, so
    /// nobody holds it, and every replica may write what the pass reports
    /// (ProviderConfigNotFound: the same status from each, so they agree).
    /// A pass with this hold sends nothing to Proxmox: once the config
    /// exists it stops, and the config's holder takes over.
    pub fn to_report(&self, key: &ConfigKey) -> Hold {
        Hold {
            key: key.clone(),
            term: 0,
            ended: None,
            report_only: true,
        }
    }

    /// Whether this replica holds `key` now.
    pub fn holds(&self, key: &ConfigKey) -> bool {
        self.hold(key).is_some()
    }

    /// Passes when `hold`'s term is still the current one and before its
    /// renew deadline: checked right before every write.
    pub fn fence(&self, hold: &Hold) -> Result<(), Error> {
        if self.identity.is_none() || hold.report_only {
            return Ok(());
        }
        let terms = self.lock();
        match terms.get(&hold.key) {
            Some(term) if term.id == hold.term && Instant::now() < term.deadline => Ok(()),
            Some(_) | None => Err(Error::Fenced {
                config: hold.key.to_string(),
            }),
        }
    }

    /// Whether this replica holds `key` now, in any term, before its
    /// deadline: the last check of each Proxmox write, made right before
    /// it is sent (a write that waited for the client's limiter, or whose
    /// process was paused, after its pass's fence).
    pub fn holds_now(&self, key: &ConfigKey) -> bool {
        if self.identity.is_none() {
            return true;
        }
        let now = Instant::now();
        self.lock().get(key).is_some_and(|t| now < t.deadline)
    }

    /// The configs held now, for metrics and the task watcher.
    pub fn held(&self) -> Vec<ConfigKey> {
        let now = Instant::now();
        self.lock()
            .iter()
            .filter(|(_, t)| now < t.deadline)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Starts a term of `key` valid until `deadline`; returns its number.
    fn begin(&self, key: &ConfigKey, deadline: Instant) -> u64 {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (ended, _) = watch::channel(false);
        let old = self.lock().insert(
            key.clone(),
            Term {
                id,
                deadline,
                ended,
            },
        );
        if let Some(old) = old {
            let _ = old.ended.send(true);
        }
        id
    }

    /// A renewal of term `id` of `key` succeeded: its deadline moves on.
    /// `false`: that term is no longer the current one.
    fn renewed(&self, key: &ConfigKey, id: u64, deadline: Instant) -> bool {
        match self.lock().get_mut(key) {
            Some(term) if term.id == id && Instant::now() < term.deadline => {
                term.deadline = deadline;
                true
            }
            Some(_) | None => false,
        }
    }

    /// Ends the term of `key`, cancelling its passes; whether there was one.
    fn end(&self, key: &ConfigKey) -> bool {
        match self.lock().remove(key) {
            Some(term) => {
                let _ = term.ended.send(true);
                true
            }
            None => false,
        }
    }

    /// The term number of `key`, if a term exists (past its deadline or not).
    fn term_of(&self, key: &ConfigKey) -> Option<(u64, Instant)> {
        self.lock().get(key).map(|t| (t.id, t.deadline))
    }

    /// The configs whose term is past its deadline.
    fn overdue(&self, now: Instant) -> Vec<ConfigKey> {
        self.lock()
            .iter()
            .filter(|(_, t)| now >= t.deadline)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The earliest deadline of a held term.
    fn next_deadline(&self) -> Option<Instant> {
        self.lock().values().map(|t| t.deadline).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProviderConfigKind;

    fn key(name: &str) -> ConfigKey {
        ConfigKey {
            kind: ProviderConfigKind::ClusterProviderConfig,
            namespace: String::new(),
            name: name.into(),
        }
    }

    #[test]
    fn without_leader_election_everything_is_held_for_good() {
        let shards = Shards::unsharded();
        let hold = shards.hold(&key("a")).expect("held");
        assert!(shards.fence(&hold).is_ok());
        assert!(!shards.end(&key("a")));
        assert!(shards.fence(&hold).is_ok());
    }

    #[test]
    fn a_config_is_held_only_in_its_term_and_before_its_deadline() {
        let shards = Shards::sharded("me");
        assert!(shards.hold(&key("a")).is_none(), "never acquired");
        let far = Instant::now() + Duration::from_secs(60);
        let id = shards.begin(&key("a"), far);
        let hold = shards.hold(&key("a")).expect("held");
        assert!(shards.fence(&hold).is_ok());
        assert!(shards.renewed(&key("a"), id, far));
        assert!(shards.end(&key("a")));
        assert!(shards.fence(&hold).is_err(), "the term ended");
        assert!(
            !shards.renewed(&key("a"), id, far),
            "an ended term stays ended"
        );
        shards.begin(&key("a"), far);
        assert!(
            shards.fence(&hold).is_err(),
            "a new term is not the old one"
        );
        assert!(shards.hold(&key("b")).is_none(), "per config");
    }

    #[test]
    fn a_term_past_its_deadline_fences_and_cannot_be_renewed() {
        let shards = Shards::sharded("me");
        let past = Instant::now();
        let id = shards.begin(&key("a"), past);
        assert!(shards.hold(&key("a")).is_none(), "past the deadline");
        assert!(!shards.renewed(&key("a"), id, past + Duration::from_secs(60)));
        assert_eq!(shards.overdue(Instant::now()), vec![key("a")]);
    }

    #[tokio::test]
    async fn ending_a_term_wakes_its_passes() {
        let shards = Shards::sharded("me");
        shards.begin(&key("a"), Instant::now() + Duration::from_secs(60));
        let hold = shards.hold(&key("a")).expect("held");
        let lost = tokio::spawn(async move { hold.lost().await });
        shards.end(&key("a"));
        lost.await.expect("woken");
    }
}
