//! `spec.forProvider.customCloudInit`: cloud-init data of the user's own,
//! from Secrets or ConfigMaps, handed to the guest on a NoCloud seed ISO.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::meta::LocalSecretKeySelector;
use crate::api::rules::{SECRET_NAME, STORAGE_ID, STORAGE_ID_MESSAGE};

/// Cloud-init data written as is: the provider builds a NoCloud seed ISO
/// (volume label `cidata`, files `user-data`, `meta-data`,
/// `network-config`, `vendor-data`), uploads it to `storage` as
/// `crossplane-ci-<VMID>-<digest>.iso` and attaches it as a CD-ROM on
/// `driveSlot`. When the data changes, a new ISO replaces the old one; the
/// guest reads it at its next boot (listed in `pendingChanges` until then).
/// The ISO is deleted with the VM. Proxmox's own cloud-init drive
/// (`cloudInit`) cannot be used alongside. Needs
/// `Datastore.AllocateTemplate` on the storage to upload, and
/// `Datastore.Allocate` there to delete.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.userData) || has(self.metaData) || has(self.networkConfig) || has(self.vendorData)")
        .message("customCloudInit needs at least one of userData, metaData, networkConfig, vendorData")
)]
pub struct CustomCloudInit {
    /// `user-data` (`#cloud-config ...`, a script, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<CloudInitSource>,

    /// `meta-data`. Left out: `instance-id` (the data's digest, so that
    /// cloud-init runs again when the data changes) and `local-hostname`
    /// (the VM's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_data: Option<CloudInitSource>,

    /// `network-config` (version 1 or 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_config: Option<CloudInitSource>,

    /// `vendor-data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_data: Option<CloudInitSource>,

    /// Storage the ISO is uploaded to; it must allow the `iso` content type.
    #[serde(default = "default_storage")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,

    /// CD-ROM slot of the ISO.
    #[serde(default = "default_drive_slot")]
    #[schemars(length(max = 6))]
    #[x_kube(validation = Rule::new("self.matches('^(ide[0-3]|sata[0-5])$')")
        .message("driveSlot must be ide0..ide3 or sata0..sata5"))]
    pub drive_slot: String,
}

fn default_storage() -> String {
    "local".into()
}

fn default_drive_slot() -> String {
    "ide2".into()
}

/// One file's content: a key of a Secret or of a ConfigMap in the
/// ProxmoxVM's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.secretKeyRef) != has(self.configMapKeyRef)")
        .message("set exactly one of secretKeyRef and configMapKeyRef")
)]
pub struct CloudInitSource {
    /// A Secret key (for data with passwords or keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<LocalSecretKeySelector>,
    /// A ConfigMap key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<LocalConfigMapKeySelector>,
}

/// One key of a ConfigMap in the same namespace as the referring resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
pub struct LocalConfigMapKeySelector {
    /// Name of the ConfigMap.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(SECRET_NAME).message("must be a ConfigMap name: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"))]
    pub name: String,
    /// Key within the ConfigMap's data.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

impl CustomCloudInit {
    /// Each configured file name with its source.
    pub fn sources(&self) -> Vec<(&'static str, &CloudInitSource)> {
        [
            ("meta-data", &self.meta_data),
            ("network-config", &self.network_config),
            ("user-data", &self.user_data),
            ("vendor-data", &self.vendor_data),
        ]
        .into_iter()
        .filter_map(|(name, source)| source.as_ref().map(|s| (name, s)))
        .collect()
    }
}
