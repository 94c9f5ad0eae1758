//! Kubernetes events about the provider's objects (ProxmoxVMs, provider
//! configs), as core v1 `Event` objects.
//!
//! Crossplane grants providers `events` in the core group only, and kube's
//! `Recorder` posts `events.k8s.io/v1`; so this small publisher writes core
//! events itself, correlated the way client-go's recorders do
//! ([`correlate`]): a repeat patches the `count` of the event it repeats,
//! similar events of one object and reason are combined into one, and a
//! token bucket per object and type drops what exceeds 25 writes at once
//! and one per 5 minutes after that. Publishing never fails a pass: errors
//! are logged and counted, and so are dropped events.

pub mod correlate;

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use self::correlate::{Correlator, Occurrence, Outcome, Series, Write};
use super::common::event;
use super::error::is_not_found;
use crate::reconcile::runtime::metrics::{EventWrite, Metrics};
use crate::reconcile::runtime::settings::COMPONENT;

/// Longest message kept (the API server's events stay readable).
const MAX_MESSAGE: usize = 1024;

/// Where events about cluster-scoped objects go (as with client-go).
const CLUSTER_EVENTS_NAMESPACE: &str = "default";

/// Publishes events.
#[derive(Clone)]
pub struct Events {
    kube: kube::Client,
    instance: String,
    metrics: Arc<Metrics>,
    correlator: Arc<Mutex<Correlator>>,
}

impl Events {
    /// A publisher reporting as `instance` (the pod's identity).
    pub fn new(kube: kube::Client, instance: String, metrics: Arc<Metrics>) -> Self {
        Self {
            kube,
            instance,
            metrics,
            correlator: Arc::default(),
        }
    }

    /// Publishes `event` about `object`; failures are logged and counted
    /// only.
    pub async fn publish<K>(&self, object: &K, event: &event::Event)
    where
        K: Resource<DynamicType = ()>,
    {
        if let Err(e) = self.try_publish(object, event).await {
            self.metrics.event_failed();
            tracing::warn!(
                object = %object.name_any(), reason = event.reason, error = %e,
                "cannot publish an event"
            );
        }
    }

    /// Publishes `event` about `object` unless this process published an
    /// identical one already (same reason and message): an announcement
    /// that a plan finds to make on every pass, said once.
    pub async fn publish_once<K>(&self, object: &K, event: &event::Event)
    where
        K: Resource<DynamicType = ()>,
    {
        let uid = object.uid().unwrap_or_default();
        if self.correlator().seen(&occurrence(&uid, event)) {
            return;
        }
        self.publish(object, event).await;
    }

    async fn try_publish<K>(&self, object: &K, event: &event::Event) -> Result<(), kube::Error>
    where
        K: Resource<DynamicType = ()>,
    {
        let uid = object.uid().unwrap_or_default();
        let now = Timestamp::now();
        let outcome = self.correlator().correlate(&occurrence(&uid, event), now);
        let (series, write) = match outcome {
            Outcome::Write(series, write) => (series, write),
            Outcome::Dropped => {
                self.metrics.event_written(EventWrite::Dropped);
                tracing::debug!(object = %object.name_any(), reason = event.reason, "event dropped by the per-object rate limit");
                return Ok(());
            }
        };
        let namespace = object
            .namespace()
            .unwrap_or_else(|| CLUSTER_EVENTS_NAMESPACE.to_owned());
        let api: Api<Event> = Api::namespaced(self.kube.clone(), &namespace);
        let message = truncate(&write.message);
        if let Some(name) = &write.name {
            let patch = json!({
                "count": write.count,
                "lastTimestamp": Time(now),
                "message": message,
            });
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.metrics.event_written(EventWrite::Patch);
                    return Ok(());
                }
                // Expired (the API server keeps events an hour) or deleted:
                // created again, with the count so far (as client-go).
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let body = self.event(object, event, &write, message, &namespace, now);
        let created = api.create(&PostParams::default(), &body).await?;
        self.metrics.event_written(EventWrite::Create);
        self.remember(&series, created.name_any());
        Ok(())
    }

    fn correlator(&self) -> std::sync::MutexGuard<'_, Correlator> {
        // A panic while holding the lock leaves the tables consistent
        // enough: at worst one event is created twice.
        self.correlator
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn remember(&self, series: &Series, name: String) {
        self.correlator().created(series, name);
    }

    fn event<K>(
        &self,
        object: &K,
        event: &event::Event,
        write: &Write,
        message: String,
        namespace: &str,
        now: Timestamp,
    ) -> Event
    where
        K: Resource<DynamicType = ()>,
    {
        let name = object.name_any();
        Event {
            metadata: ObjectMeta {
                // Like kubectl and client-go: the object's name and a unique suffix.
                name: Some(format!(
                    "{name}.{:x}",
                    now.as_nanosecond().unsigned_abs() ^ u128::from(rand::random::<u32>())
                )),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(K::api_version(&()).into_owned()),
                kind: Some(K::kind(&()).into_owned()),
                name: Some(name),
                namespace: object.namespace(),
                uid: object.uid(),
                resource_version: object.resource_version(),
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
            first_timestamp: Some(Time(write.first)),
            last_timestamp: Some(Time(now)),
            count: Some(write.count),
            ..Event::default()
        }
    }
}

/// `event` about the object with UID `uid`, as the correlator sees it.
fn occurrence<'a>(uid: &'a str, event: &'a event::Event) -> Occurrence<'a> {
    Occurrence {
        object: uid,
        warning: event.warning,
        reason: event.reason,
        message: &event.note,
    }
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
}
