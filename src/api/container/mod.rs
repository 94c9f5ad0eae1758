//! `ProxmoxContainer`: one Proxmox VE LXC container, managed
//! Crossplane-style like a ProxmoxVM, from a container template volume or
//! an OCI image (PVE 9.1+).

mod observed;
mod params;
mod restore;
mod status;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

pub use observed::{
    ContainerObserved, ObservedContainerCpu, ObservedContainerDns, ObservedContainerNetwork,
    ObservedFeatures, ObservedMountPoint, ObservedRootFs,
};
pub use params::{
    ContainerCpu, ContainerDns, ContainerFeatures, ContainerImage, ContainerNetwork,
    ContainerParameters, ContainerTemplate, MountPoint, OciImage, RootFs,
};
pub use restore::ContainerRestore;
pub use status::{
    ContainerAtProvider, ContainerTask, ContainerTaskAction, ContainerTaskFailure,
    ProxmoxContainerStatus,
};

use crate::api::managed::ManagedSpec;
use crate::api::meta::{LocalSecretReference, WritesConnectionSecret};

/// A Proxmox VE LXC container: created from a template volume or an OCI
/// image, configured, started, observed and finally destroyed.
///
/// The VMID lives in the `crossplane.io/external-name` annotation, written
/// before the create is sent; VMs and containers share the VMID space.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxContainer",
    plural = "proxmoxcontainers",
    singular = "proxmoxcontainer",
    namespaced,
    status = "ProxmoxContainerStatus",
    derive = "PartialEq",
    shortname = "pct",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A Proxmox VE LXC container managed by crossplane-provider-proxmox.",
    printcolumn(
        name = "VMID",
        type_ = "string",
        json_path = ".metadata.annotations.crossplane\\.io/external-name"
    ),
    printcolumn(name = "NODE", type_ = "string", json_path = ".status.atProvider.node"),
    printcolumn(
        name = "STATE",
        type_ = "string",
        json_path = ".status.atProvider.state"
    ),
    printcolumn(
        name = "READY",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Ready')].status"
    ),
    printcolumn(
        name = "SYNCED",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].status"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "TASK",
        type_ = "string",
        json_path = ".status.atProvider.task.summary",
        priority = 1
    ),
    printcolumn(
        name = "REASON",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].reason",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxContainerSpec {
    /// The container as it should be on Proxmox.
    pub for_provider: ContainerParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,

    /// Secret (in this namespace) to which the provider writes the
    /// container's connection details: `vmid`, `node`, `hostname`,
    /// `ipAddress` and `ipAddresses` (comma-separated; the static
    /// addresses of its interfaces, without prefix length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secret_to_ref: Option<LocalSecretReference>,
}

impl WritesConnectionSecret for ProxmoxContainer {
    fn connection_secret_ref(&self) -> Option<&LocalSecretReference> {
        self.spec.write_connection_secret_to_ref.as_ref()
    }
}

/// A reference to a ProxmoxContainer, as its controller's triggers take it.
pub type CtRef =
    kube::runtime::reflector::ObjectRef<kube::core::DeserializeGuard<ProxmoxContainer>>;
