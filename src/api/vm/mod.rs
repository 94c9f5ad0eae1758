//! `ProxmoxVM`: one Proxmox VE virtual machine, managed Crossplane-style.

mod cloud_init;
mod console;
mod devices;
mod disk;
mod firmware;
mod ha;
mod hardware;
mod lifecycle;
mod network;
mod nocloud;
mod observed;
mod params;
mod restore;
mod status;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

pub use cloud_init::{CloudInit, IpConfig};
pub use console::{SerialPort, Vga, VgaType};
pub use devices::{HotplugFeature, PciDevice, Rng, RngSource, UsbDevice};
pub use disk::{ChecksumAlgorithm, Disk, DiskImage, ImageDownload, file_stem};
pub use firmware::{
    Bios, EfiDisk, EfiType, Machine, MachineType, OsType, TpmState, TpmVersion, Viommu,
};
pub use ha::{HaState, HighAvailability, NodeAffinity};
pub use hardware::{Balloon, Hardware};
pub use lifecycle::{Lifecycle, Startup};
pub use network::{NetworkDevice, NetworkModel};
pub use nocloud::{CloudInitSource, CustomCloudInit, LocalConfigMapKeySelector};
pub use observed::{
    ObservedCloudInit, ObservedCpu, ObservedDisk, ObservedIpConfig, ObservedNetwork, VmObserved,
    quantity_of,
};
pub use params::{
    CloneSource, Cpu, GuestAgent, Placement, PlacementPolicy, PowerState, ScsiController,
    VmParameters,
};
pub use restore::{BackupReference, RestoreSource};
pub use status::{
    InFlightTask, ObservedState, ProxmoxVMStatus, TaskAction, TaskFailure, VmAtProvider,
};

use crate::api::managed::ManagedSpec;
use crate::api::meta::LocalSecretReference;

/// A Proxmox VE virtual machine: created from a cloud image (`disks[].image`),
/// an existing volume (`disks[].importFrom`) or a template (`clone`),
/// configured with cloud-init, started, observed and finally destroyed.
///
/// The VMID lives in the `crossplane.io/external-name` annotation. Set it to
/// an existing VMID with `managementPolicies: ["Observe"]` to observe a VM
/// this resource did not create.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxVM",
    plural = "proxmoxvms",
    singular = "proxmoxvm",
    namespaced,
    status = "ProxmoxVMStatus",
    derive = "PartialEq",
    shortname = "pvm",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A Proxmox VE virtual machine managed by crossplane-provider-proxmox.",
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
        name = "IP",
        type_ = "string",
        json_path = ".status.atProvider.ipAddress"
    ),
    printcolumn(
        name = "TASK",
        type_ = "string",
        json_path = ".status.atProvider.task.summary"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "LOCK",
        type_ = "string",
        json_path = ".status.atProvider.lock",
        priority = 1
    ),
    printcolumn(
        name = "REASON",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].reason",
        priority = 1
    ),
    printcolumn(
        name = "MESSAGE",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].message",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxVMSpec {
    /// The VM as it should be on Proxmox.
    pub for_provider: VmParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,

    /// Secret (in this namespace) to which the provider writes the VM's
    /// connection details: `vmid`, `node`, `ipAddress`, `ipAddresses`
    /// (comma-separated) and `user` (the cloud-init user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_connection_secret_to_ref: Option<LocalSecretReference>,
}

impl crate::api::meta::WritesConnectionSecret for ProxmoxVM {
    fn connection_secret_ref(&self) -> Option<&crate::api::meta::LocalSecretReference> {
        self.spec.write_connection_secret_to_ref.as_ref()
    }
}

impl ProxmoxVM {
    /// The value of an annotation.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    /// The VMID recorded in the `crossplane.io/external-name` annotation, raw.
    pub fn external_name(&self) -> Option<&str> {
        self.annotation(crate::api::meta::EXTERNAL_NAME)
    }
}

/// A reference to a ProxmoxVM, as its controller's triggers take it (its
/// cache holds VMs behind a `DeserializeGuard`): what the wakers and the
/// scheduler's slot queue carry.
pub type VmRef = kube::runtime::reflector::ObjectRef<kube::core::DeserializeGuard<ProxmoxVM>>;

/// The reference of a ProxmoxVM found in the cache or a watch event.
pub fn vm_ref(vm: &ProxmoxVM) -> VmRef {
    use kube::ResourceExt;
    let name = kube::runtime::reflector::ObjectRef::new(&vm.name_any());
    match vm.namespace() {
        Some(namespace) => name.within(&namespace),
        None => name,
    }
}
