//! Kubernetes events about ProxmoxVMs, as core v1 `Event` objects.
//!
//! Crossplane grants providers `events` in the core group only, and kube's
//! `Recorder` posts `events.k8s.io/v1`; so this small publisher writes core
//! events itself. A repeat of the same event (same resource, type, reason and
//! message) within an hour bumps `count` and `lastTimestamp` of the
//! first instead of adding another. Publishing never fails a pass: errors are
//! logged and counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::error::is_not_found;
use super::metrics::Metrics;
use super::plan;
use super::settings::COMPONENT;
use crate::api::ProxmoxVM;

/// Repeats within this window are aggregated into one event.
const AGGREGATE_FOR: Duration = Duration::from_secs(3600);
/// Longest message kept (the API server's events stay readable).
const MAX_MESSAGE: usize = 1024;

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Key {
    uid: String,
    warning: bool,
    reason: &'static str,
    message: String,
}

#[derive(Clone, Debug)]
struct Sent {
    name: String,
    count: i32,
    last: Timestamp,
}

/// Publishes events about ProxmoxVMs.
#[derive(Clone)]
pub struct Events {
    kube: kube::Client,
    instance: String,
    metrics: Arc<Metrics>,
    sent: Arc<Mutex<HashMap<Key, Sent>>>,
}

impl Events {
    /// A publisher reporting as `instance` (the pod's identity).
    pub fn new(kube: kube::Client, instance: String, metrics: Arc<Metrics>) -> Self {
        Self {
            kube,
            instance,
            metrics,
            sent: Arc::default(),
        }
    }

    /// Publishes `event` about `vm`; failures are logged and counted only.
    pub async fn publish(&self, vm: &ProxmoxVM, event: &plan::Event) {
        if let Err(e) = self.try_publish(vm, event).await {
            self.metrics.event_failed();
            tracing::warn!(
                vm = %vm.name_any(), reason = event.reason, error = %e,
                "cannot publish an event"
            );
        }
    }

    async fn try_publish(&self, vm: &ProxmoxVM, event: &plan::Event) -> Result<(), kube::Error> {
        let namespace = vm.namespace().unwrap_or_default();
        let message = truncate(&event.note);
        let key = Key {
            uid: vm.uid().unwrap_or_default(),
            warning: event.warning,
            reason: event.reason,
            message: message.clone(),
        };
        let now = Timestamp::now();
        let api: Api<Event> = Api::namespaced(self.kube.clone(), &namespace);
        if let Some(sent) = self.recent(&key, now) {
            let count = sent.count.saturating_add(1);
            let patch = json!({"count": count, "lastTimestamp": Time(now)});
            match api
                .patch(&sent.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.remember(
                        key,
                        Sent {
                            count,
                            last: now,
                            ..sent
                        },
                    );
                    return Ok(());
                }
                // Expired or deleted meanwhile: create a new one.
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let body = self.event(vm, event, message, now);
        let created = api.create(&PostParams::default(), &body).await?;
        self.remember(
            key,
            Sent {
                name: created.name_any(),
                count: 1,
                last: now,
            },
        );
        Ok(())
    }

    fn recent(&self, key: &Key, now: Timestamp) -> Option<Sent> {
        let sent = self.sent.lock().expect("event cache poisoned");
        sent.get(key).filter(|s| within(s.last, now)).cloned()
    }

    fn remember(&self, key: Key, sent: Sent) {
        let mut map = self.sent.lock().expect("event cache poisoned");
        let now = sent.last;
        map.retain(|_, s| within(s.last, now));
        map.insert(key, sent);
    }

    fn event(&self, vm: &ProxmoxVM, event: &plan::Event, message: String, now: Timestamp) -> Event {
        let name = vm.name_any();
        Event {
            metadata: ObjectMeta {
                // Like kubectl and client-go: the object's name and a unique suffix.
                name: Some(format!(
                    "{name}.{:x}",
                    now.as_nanosecond().unsigned_abs() ^ u128::from(rand::random::<u32>())
                )),
                namespace: vm.namespace(),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(ProxmoxVM::api_version(&()).into_owned()),
                kind: Some(ProxmoxVM::kind(&()).into_owned()),
                name: Some(name),
                namespace: vm.namespace(),
                uid: vm.uid(),
                resource_version: vm.resource_version(),
                field_path: None,
            },
            reason: Some(event.reason.to_owned()),
            message: Some(message),
            type_: Some(if event.warning { "Warning" } else { "Normal" }.to_owned()),
            source: Some(EventSource {
                component: Some(COMPONENT.to_owned()),
                host: None,
            }),
            reporting_component: Some(COMPONENT.to_owned()),
            reporting_instance: Some(self.instance.clone()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            ..Event::default()
        }
    }
}

fn within(last: Timestamp, now: Timestamp) -> bool {
    now.duration_since(last)
        .try_into()
        .is_ok_and(|d: Duration| d < AGGREGATE_FOR)
}

fn truncate(text: &str) -> String {
    if text.len() <= MAX_MESSAGE {
        return text.to_owned();
    }
    let mut end = MAX_MESSAGE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_MESSAGE);
        let cut = truncate(&long);
        assert!(cut.len() <= MAX_MESSAGE + "…".len());
        assert!(cut.ends_with('…'));
        assert_eq!(truncate("short"), "short");
    }

    #[test]
    fn aggregation_window() {
        let t0 = Timestamp::from_second(1_000_000).unwrap();
        let later = Timestamp::from_second(1_000_000 + 3599).unwrap();
        let much_later = Timestamp::from_second(1_000_000 + 3600).unwrap();
        assert!(within(t0, later));
        assert!(!within(t0, much_later));
    }
}
