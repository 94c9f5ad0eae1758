//! The connection Secret (`spec.writeConnectionSecretToRef`) of any kind
//! that has one ([`WritesConnectionSecret`]): a guest's VMID, node and
//! addresses, for whatever uses it; the data is the kind's plan's.
//!
//! Written with server-side apply, so an unchanged Secret is a no-op (no new
//! resourceVersion, no watch event). It is owned by the resource (a
//! controller ownerReference), so a cluster's garbage collector removes it
//! with the resource, and labelled so the controller watches only its own
//! Secrets.
//!
//! Only a Secret this resource owns (its controller ownerReference holds the
//! resource's UID) or one that does not exist yet is written: a new one is
//! created first (empty, so a Secret made meanwhile by someone else is a
//! conflict, not a takeover), then its data applied. Another resource's
//! Secret, or any other existing one, is left as it is and reported on the
//! resource (see [`publish`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::condition::find;
use crate::api::meta::WritesConnectionSecret;
use crate::api::{Condition, ConditionStatus, ConditionType, Reason, set_condition};
use crate::reconcile::identity::Identity;
use crate::reconcile::runtime::settings::{COMPONENT, FIELD_MANAGER};

/// The label on connection Secrets (and the selector the controller watches
/// Secrets with).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", COMPONENT);

/// Crossplane's type for connection Secrets.
const SECRET_TYPE: &str = "connection.crossplane.io/v1alpha1";

/// The Secret to apply, or `None` when the resource asks for none.
pub fn secret<K>(obj: &K, data: &BTreeMap<String, String>) -> Option<Secret>
where
    K: Resource<DynamicType = ()> + WritesConnectionSecret,
{
    let name = obj.connection_secret_ref()?.name.clone();
    let mut secret = Secret {
        type_: Some(SECRET_TYPE.to_owned()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    };
    secret.metadata.name = Some(name);
    secret.metadata.namespace = obj.namespace();
    secret.metadata.labels = Some([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())].into());
    secret.metadata.owner_references = obj.controller_owner_ref(&()).map(|r| vec![r]);
    Some(secret)
}

/// Writes the connection Secret of `obj` with `data`, if it is this
/// resource's to write. `Ok(Some(why))`: it is not (another resource's
/// Secret, or one made by someone else), and nothing was written.
pub async fn publish<K>(
    kube: &kube::Client,
    (obj, id): (&K, &Identity),
    data: &BTreeMap<String, String>,
) -> Result<Option<String>, kube::Error>
where
    K: Resource<DynamicType = ()> + WritesConnectionSecret,
{
    let Some(secret) = secret(obj, data) else {
        return Ok(None);
    };
    let name = secret.name_any();
    let uid = id.uid.as_str();
    let api = Api::<Secret>::namespaced(kube.clone(), &id.namespace);
    let existing = match api.get_opt(&name).await? {
        Some(existing) => existing,
        None => {
            // Reserve the name: an empty Secret of ours, or a 409 when
            // someone else's appeared meanwhile.
            let mut empty = secret.clone();
            empty.data = None;
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PostParams::default()
            };
            match api.create(&params, &empty).await {
                Ok(created) => created,
                // Made meanwhile: judged like one found (gone again: the
                // pass fails and is retried).
                Err(kube::Error::Api(status)) if status.code == 409 => api.get(&name).await?,
                Err(e) => return Err(e),
            }
        }
    };
    if let Some(why) = not_ours(&existing, uid) {
        return Ok(Some(format!(
            "the connection Secret {name} (writeConnectionSecretToRef) {why}; it is left as it is: name a Secret that does not exist yet"
        )));
    }
    let mut body = serde_json::to_value(&secret).map_err(kube::Error::SerdeError)?;
    // Server-side apply wants the type information in the body.
    body["apiVersion"] = "v1".into();
    body["kind"] = "Secret".into();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| None)
}

/// The conditions once the connection Secret was not written because it is
/// not this resource's (`why`): Synced=False `ConnectionSecretConflict`
/// naming it, unless Synced already says something is wrong with the
/// guest, whose message then ends with it. Ready is left as planned.
pub fn refused(
    conditions: &mut Vec<Condition>,
    (generation, now): (Option<i64>, Timestamp),
    why: &str,
) {
    let synced = find(conditions, ConditionType::Synced);
    let (reason, message) = match synced {
        Some(c) if c.status == ConditionStatus::False => (
            c.reason.clone(),
            format!("{}; also: {why}", c.message.as_deref().unwrap_or_default()),
        ),
        Some(c) => (
            Reason::ConnectionSecretConflict.as_str().to_owned(),
            format!(
                "{why} (the guest itself: {})",
                c.message.as_deref().unwrap_or("as planned")
            ),
        ),
        None => (
            Reason::ConnectionSecretConflict.as_str().to_owned(),
            why.to_owned(),
        ),
    };
    let mut condition = Condition::new(
        ConditionType::Synced,
        ConditionStatus::False,
        Reason::ConnectionSecretConflict,
        message,
        Time(now),
    );
    condition.reason = reason;
    condition.observed_generation = generation;
    set_condition(conditions, condition);
}

/// Why an existing Secret is not the resource `uid`'s to write, if it is
/// not: its controller ownerReference must hold that UID.
fn not_ours(existing: &Secret, uid: &str) -> Option<String> {
    let controller = existing
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    match controller {
        Some(owner) if !uid.is_empty() && owner.uid == uid => None,
        Some(owner) => Some(format!(
            "belongs to {} {} (uid {})",
            owner.kind, owner.name, owner.uid
        )),
        None => Some("exists and was not made by this resource".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProxmoxVM;

    #[test]
    fn owned_labelled_and_typed() {
        let vm: ProxmoxVM = serde_json::from_value(serde_json::json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u-1"},
            "spec": {"forProvider": {}, "writeConnectionSecretToRef": {"name": "web-conn"}},
        }))
        .unwrap();
        let data = [("vmid".to_owned(), "100".to_owned())].into();
        let s = secret(&vm, &data).unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("web-conn"));
        let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ProxmoxVM", "u-1")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(s.data.as_ref().unwrap()["vmid"].0, b"100");
        let mut no_ref = vm.clone();
        no_ref.spec.write_connection_secret_to_ref = None;
        assert!(secret(&no_ref, &data).is_none());

        assert_eq!(not_ours(&s, "u-1"), None, "ours");
        let theirs = not_ours(&s, "u-2").unwrap();
        assert!(theirs.contains("ProxmoxVM web (uid u-1)"), "{theirs}");
        let unowned = Secret::default();
        assert!(
            not_ours(&unowned, "u-1")
                .unwrap()
                .contains("not made by this resource")
        );
        assert!(not_ours(&s, "").is_some(), "an empty UID owns nothing");
    }
}
