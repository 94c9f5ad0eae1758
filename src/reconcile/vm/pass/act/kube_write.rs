//! Metadata writes: the external name and create annotations, the
//! finalizer (with the VMID when a create may follow). Each is a JSON merge patch carrying the resourceVersion the
//! pass read, so a write based on a stale object fails with 409 and two
//! writers can never both believe they recorded a VMID.

use crate::reconcile::common::finalizer::finalizers;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};

use crate::api::{ProxmoxVM, meta};
use crate::reconcile::identity::Identity;
use crate::reconcile::vm::plan::KubeWrite;

/// The merge patch for a write.
pub(super) fn patch(vm: &ProxmoxVM, write: &KubeWrite, now: Timestamp) -> Value {
    let now = now.to_string();
    let mut metadata = Map::new();
    metadata.insert(
        "resourceVersion".into(),
        json!(vm.resource_version().unwrap_or_default()),
    );
    let annotations = match write {
        KubeWrite::RecordExternalName {
            vmid,
            create_pending,
        } => {
            let mut a = json!({ meta::EXTERNAL_NAME: vmid.to_string() });
            if *create_pending {
                a[meta::EXTERNAL_CREATE_PENDING] = json!(now);
            }
            Some(a)
        }
        KubeWrite::ForgetExternalName => Some(json!({
            meta::EXTERNAL_NAME: null,
            meta::EXTERNAL_CREATE_PENDING: null,
            meta::EXTERNAL_CREATE_SUCCEEDED: null,
        })),
        KubeWrite::RecordCreateSucceeded => Some(json!({ meta::EXTERNAL_CREATE_SUCCEEDED: now })),
        KubeWrite::AddFinalizer | KubeWrite::RemoveFinalizer | KubeWrite::LateInitialize(_) => None,
    };
    if let Some(a) = annotations {
        metadata.insert("annotations".into(), a);
    }
    match write {
        // A create may be sent from now on, and deletion must then clean up
        // what it made: the finalizer goes on with the VMID, in the same
        // write (one patch, one pass and one watch event fewer per VM than
        // a write of its own; a resource deleted before its create is
        // released once its VM is seen absent).
        KubeWrite::RecordExternalName {
            create_pending: true,
            ..
        }
        | KubeWrite::AddFinalizer => {
            metadata.insert("finalizers".into(), json!(finalizers(&vm.metadata, true)));
        }
        KubeWrite::RemoveFinalizer => {
            metadata.insert("finalizers".into(), json!(finalizers(&vm.metadata, false)));
        }
        KubeWrite::LateInitialize(fields) => {
            return json!({ "metadata": metadata, "spec": { "forProvider": fields } });
        }
        KubeWrite::RecordExternalName {
            create_pending: false,
            ..
        }
        | KubeWrite::ForgetExternalName
        | KubeWrite::RecordCreateSucceeded => {}
    }
    json!({ "metadata": metadata })
}

/// Sends the write; returns the resourceVersion it produced.
pub(super) async fn apply(
    kube: &kube::Client,
    (vm, id): (&ProxmoxVM, &Identity),
    write: &KubeWrite,
    now: Timestamp,
) -> Result<Option<String>, kube::Error> {
    let api: Api<ProxmoxVM> = Api::namespaced(kube.clone(), &id.namespace);
    let body = patch(vm, write, now);
    tracing::debug!(vm = %id, write = write.name(), "writing metadata");
    // Spec fields filled in are recorded under a manager of their own: an
    // apply by the user's tool neither owns nor removes them.
    let params = match write {
        KubeWrite::LateInitialize(_) => PatchParams {
            field_manager: Some(crate::api::managed::LATE_INIT_MANAGER.into()),
            ..PatchParams::default()
        },
        KubeWrite::RecordExternalName { .. }
        | KubeWrite::ForgetExternalName
        | KubeWrite::AddFinalizer
        | KubeWrite::RecordCreateSucceeded
        | KubeWrite::RemoveFinalizer => PatchParams::default(),
    };
    api.patch(&id.name, &params, &Patch::Merge(&body))
        .await
        .map(|written| written.resource_version())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm() -> ProxmoxVM {
        let mut vm: ProxmoxVM = serde_json::from_value(json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {"name": "web", "namespace": "ns", "resourceVersion": "42",
                         "finalizers": ["other"]},
            "spec": {"forProvider": {}},
        }))
        .unwrap();
        vm.metadata.annotations = None;
        vm
    }

    #[test]
    fn every_write_carries_the_resource_version() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let record = patch(
            &vm(),
            &KubeWrite::RecordExternalName {
                vmid: 100,
                create_pending: true,
            },
            now,
        );
        assert_eq!(
            record,
            json!({"metadata": {"resourceVersion": "42", "annotations": {
                "crossplane.io/external-name": "100",
                "crossplane.io/external-create-pending": "2027-01-15T08:00:00Z",
            }, "finalizers": ["other", meta::FINALIZER]}})
        );
        let observed = patch(
            &vm(),
            &KubeWrite::RecordExternalName {
                vmid: 100,
                create_pending: false,
            },
            now,
        );
        assert!(
            observed["metadata"].get("finalizers").is_none(),
            "no create may follow: no finalizer"
        );
        let add = patch(&vm(), &KubeWrite::AddFinalizer, now);
        assert_eq!(
            add["metadata"]["finalizers"],
            json!(["other", meta::FINALIZER])
        );
        let mut ours = vm();
        ours.metadata.finalizers = Some(vec!["other".into(), meta::FINALIZER.into()]);
        let remove = patch(&ours, &KubeWrite::RemoveFinalizer, now);
        assert_eq!(remove["metadata"]["finalizers"], json!(["other"]));
        let forget = patch(&vm(), &KubeWrite::ForgetExternalName, now);
        assert!(forget["metadata"]["annotations"]["crossplane.io/external-name"].is_null());
        assert_eq!(forget["metadata"]["resourceVersion"], "42");
    }
}
