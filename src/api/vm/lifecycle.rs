//! How Proxmox treats the VM as a whole (flattened into
//! `spec.forProvider`): protection, the start order at node boot, and
//! conversion into a template.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Protection, startup order, template.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// Proxmox's protection flag: the VM and its disks cannot be removed
    /// (by anyone) while it is set. The provider clears it only to destroy
    /// a VM it created when this resource is deleted (and its
    /// managementPolicies include Delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<bool>,

    /// Start (and stop) order at node boot, among VMs with `onBoot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<Startup>,

    /// Convert the VM into a template once it is created and configured
    /// (needs `powerState: Stopped`; cannot be undone). Other ProxmoxVMs
    /// then clone it by `clone.templateName` or `clone.templateVmid`.
    /// Deleting this resource while linked clones of the template exist
    /// waits (Synced=False, TemplateInUse) until they are gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<bool>,

    /// When this resource is deleted, stop the running VM at once (as
    /// pulling its power) instead of asking the guest to shut down. The
    /// default (false) asks the guest, waits the provider config's
    /// `tasks.shutdownTimeout`, then stops it. For VMs whose guest has
    /// nothing to save, a stop is quicker and never times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_on_delete: Option<bool>,
}

/// Start order at node boot (`startup`): lower orders start first and stop
/// last; VMs without an order start after those with one.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Startup {
    /// Position in the start order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 999_999))]
    pub order: Option<u32>,
    /// Seconds to wait after starting this VM before starting the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 86_400))]
    pub up: Option<u32>,
    /// Seconds to wait for this VM to shut down (at node shutdown) before
    /// stopping the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 86_400))]
    pub down: Option<u32>,
}
