//! What the ProxmoxVMs said over the run: their `Synced` condition, polled
//! every second and recorded at each change, as a user watching
//! `kubectl get pvm -o wide` would see it (a change shorter than a second
//! may be missed; nothing is invented).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::ListParams;
use tokio::sync::watch;

use super::k8s;

/// A `Synced` condition as first seen.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Since the run started.
    pub at: Duration,
    pub resource: String,
    pub reason: String,
    pub message: String,
}

/// Records the changes in the background until [`Observer::stop`].
pub struct Observer {
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    pub fn start(ns: &str, started: Instant) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = watch::channel(false);
        let api = k8s::vms(ns);
        let record = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut last: BTreeMap<String, (String, String)> = BTreeMap::new();
            loop {
                // While the apiserver restarts there is nothing to see.
                if let Ok(list) = api.list(&ListParams::default()).await {
                    for object in list.items {
                        let object = serde_json::to_value(&object).unwrap_or_default();
                        let Some(synced) = k8s::condition(&object, "Synced") else {
                            continue;
                        };
                        let now = (
                            synced["reason"].as_str().unwrap_or_default().to_owned(),
                            synced["message"].as_str().unwrap_or_default().to_owned(),
                        );
                        let resource = k8s::name(&object).to_owned();
                        if last.get(&resource) != Some(&now) {
                            record.lock().unwrap_or_else(|p| p.into_inner()).push(Seen {
                                at: started.elapsed(),
                                resource: resource.clone(),
                                reason: now.0.clone(),
                                message: now.1.clone(),
                            });
                            last.insert(resource, now);
                        }
                    }
                }
                tokio::select! {
                    _ = stopped.changed() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
        Self { seen, stop, task }
    }

    /// Stops watching; returns everything seen, in order.
    pub async fn stop(self) -> Vec<Seen> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.clone()
    }
}

/// How long each resource was seen in `reason`, summed: (resource, time).
pub fn time_in(seen: &[Seen], reason: &str, end: Duration) -> Vec<(String, Duration)> {
    let mut totals: BTreeMap<&str, Duration> = BTreeMap::new();
    for (i, s) in seen.iter().enumerate() {
        if s.reason != reason {
            continue;
        }
        let until = seen[i + 1..]
            .iter()
            .find(|n| n.resource == s.resource)
            .map_or(end, |n| n.at);
        *totals.entry(&s.resource).or_default() += until.saturating_sub(s.at);
    }
    let mut totals: Vec<(String, Duration)> =
        totals.into_iter().map(|(r, d)| (r.to_owned(), d)).collect();
    totals.sort_by_key(|t| std::cmp::Reverse(t.1));
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(at: u64, resource: &str, reason: &str) -> Seen {
        Seen {
            at: Duration::from_secs(at),
            resource: resource.into(),
            reason: reason.into(),
            message: String::new(),
        }
    }

    #[test]
    fn time_in_a_reason_runs_until_the_resource_changes_again() {
        let log = [
            seen(0, "a", "WaitingForCapacity"),
            seen(2, "b", "WaitingForCapacity"),
            seen(5, "a", "ImportingDisk"),
            seen(8, "a", "WaitingForCapacity"),
            seen(9, "a", "ReconcileSuccess"),
        ];
        let totals = time_in(&log, "WaitingForCapacity", Duration::from_secs(20));
        assert_eq!(
            totals,
            [
                ("b".to_owned(), Duration::from_secs(18)),
                ("a".to_owned(), Duration::from_secs(6))
            ]
        );
    }
}
