//! The CustomResourceDefinitions, as served to `kubectl apply`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray,
};
use kube::CustomResourceExt;

use crate::api::{
    ClusterProviderConfig, ProviderConfig, ProxmoxContainer, ProxmoxImage, ProxmoxVM,
};

/// Every CRD this provider serves, in install order, each with the file name
/// it is committed under in `crds/`.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        (
            "proxmox.crossplane.io_clusterproviderconfigs.yaml",
            tidy(ClusterProviderConfig::crd()),
        ),
        (
            "proxmox.crossplane.io_providerconfigs.yaml",
            tidy(ProviderConfig::crd()),
        ),
        (
            "proxmox.crossplane.io_proxmoxvms.yaml",
            tidy(ProxmoxVM::crd()),
        ),
        (
            "proxmox.crossplane.io_proxmoximages.yaml",
            tidy(ProxmoxImage::crd()),
        ),
        (
            "proxmox.crossplane.io_proxmoxcontainers.yaml",
            tidy(ProxmoxContainer::crd()),
        ),
        (
            "proxmox.crossplane.io_proxmoxsecuritygroups.yaml",
            tidy(crate::api::ProxmoxSecurityGroup::crd()),
        ),
        (
            "proxmox.crossplane.io_proxmoxipsets.yaml",
            tidy(crate::api::ProxmoxIPSet::crd()),
        ),
    ]
}

/// Formats the API server knows for integers; schemars also writes
/// `uint32`/`uint16`, which the server accepts with a warning on every apply.
const KNOWN_INT_FORMATS: [&str; 2] = ["int32", "int64"];

/// Drops integer formats the API server does not know (the bounds are
/// expressed by `minimum`/`maximum` anyway).
fn tidy(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            drop_unknown_formats(schema);
        }
    }
    crd
}

fn drop_unknown_formats(schema: &mut JSONSchemaProps) {
    if schema.type_.as_deref() == Some("integer")
        && schema
            .format
            .as_deref()
            .is_some_and(|f| !KNOWN_INT_FORMATS.contains(&f))
    {
        schema.format = None;
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        drop_unknown_formats(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        drop_unknown_formats(items);
    }
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
