//! `ProxmoxContainer`: one Proxmox VE LXC container, managed
//! Crossplane-style like a ProxmoxVM, from a container template volume or
//! an OCI image (PVE 9.1+).

mod params;
mod status;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

pub use params::{
    ContainerCpu, ContainerDns, ContainerFeatures, ContainerImage, ContainerNetwork,
    ContainerParameters, ContainerTemplate, MountPoint, OciImage, RootFs,
};
pub use status::{ContainerAtProvider, ProxmoxContainerStatus};

use crate::api::meta::{ManagementPolicy, ProviderConfigReference, default_management_policies};

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
    group = "proxmox.crossplane.io",
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

    /// Which provider config (Proxmox endpoint and credentials) to use.
    /// Defaults to the ClusterProviderConfig named `default`.
    #[serde(default)]
    pub provider_config_ref: ProviderConfigReference,

    /// What the provider may do: any of Observe, Create, Update, Delete,
    /// LateInitialize, or "*" (everything, the default). Without Delete the
    /// container is left on Proxmox when this resource is deleted; [] pauses
    /// the resource.
    #[serde(default = "default_management_policies")]
    #[schemars(length(max = 6))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new("!self.exists(p, p == '*') || size(self) == 1")
            .message("\"*\" already allows everything and cannot be combined with other policies"),
        validation = Rule::new("size(self) == 0 || self.exists(p, p == 'Observe' || p == '*')")
            .message("managementPolicies must include Observe (the provider cannot work without reading the container); use [] to pause")
    )]
    pub management_policies: Vec<ManagementPolicy>,
}
