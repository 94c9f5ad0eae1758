//! The CustomResourceDefinitions, as served to `kubectl apply`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::api::{ClusterProviderConfig, ProviderConfig, ProxmoxVM};

/// Every CRD this provider serves, in install order, each with the file name
/// it is committed under in `crds/`.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        (
            "proxmox.crossplane.io_clusterproviderconfigs.yaml",
            ClusterProviderConfig::crd(),
        ),
        (
            "proxmox.crossplane.io_providerconfigs.yaml",
            ProviderConfig::crd(),
        ),
        ("proxmox.crossplane.io_proxmoxvms.yaml", ProxmoxVM::crd()),
    ]
}

/// One CRD as a YAML document (without the `---` separator).
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(crd)
}

/// All CRDs as one multi-document YAML stream.
pub fn all_yaml() -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for (_, crd) in all() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}
