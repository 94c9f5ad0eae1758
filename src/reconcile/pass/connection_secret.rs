//! The connection Secret (`spec.writeConnectionSecretToRef`): the VM's
//! VMID, node, addresses and cloud-init user, for whatever uses the VM.
//!
//! Written with server-side apply, so an unchanged Secret is a no-op (no new
//! resourceVersion, no watch event). It is owned by the ProxmoxVM (a
//! controller ownerReference), so a cluster's garbage collector removes it
//! with the resource, and labelled so the controller watches only its own
//! Secrets.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use crate::api::ProxmoxVM;
use crate::reconcile::runtime::settings::{COMPONENT, FIELD_MANAGER};

/// The label on connection Secrets (and the selector the controller watches
/// Secrets with).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", COMPONENT);

/// Crossplane's type for connection Secrets.
const SECRET_TYPE: &str = "connection.crossplane.io/v1alpha1";

/// The Secret to apply, or `None` when the VM asks for none.
pub fn secret(vm: &ProxmoxVM, data: &BTreeMap<String, String>) -> Option<Secret> {
    let name = vm
        .spec
        .write_connection_secret_to_ref
        .as_ref()?
        .name
        .clone();
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
    secret.metadata.namespace = vm.namespace();
    secret.metadata.labels = Some([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())].into());
    secret.metadata.owner_references = vm.controller_owner_ref(&()).map(|r| vec![r]);
    Some(secret)
}

/// Applies the connection Secret of `vm` with `data`.
pub async fn publish(
    kube: &kube::Client,
    vm: &ProxmoxVM,
    data: &BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let Some(secret) = secret(vm, data) else {
        return Ok(());
    };
    let name = secret.name_any();
    let mut body = serde_json::to_value(&secret).map_err(kube::Error::SerdeError)?;
    // Server-side apply wants the type information in the body.
    body["apiVersion"] = "v1".into();
    body["kind"] = "Secret".into();
    Api::<Secret>::namespaced(kube.clone(), &vm.namespace().unwrap_or_default())
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_labelled_and_typed() {
        let vm: ProxmoxVM = serde_json::from_value(serde_json::json!({
            "apiVersion": "proxmox.crossplane.io/v1alpha1",
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
        assert_eq!(s.data.unwrap()["vmid"].0, b"100");
        let mut no_ref = vm.clone();
        no_ref.spec.write_connection_secret_to_ref = None;
        assert!(secret(&no_ref, &data).is_none());
    }
}
