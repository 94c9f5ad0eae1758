//! Firmware and machine: `bios`, the EFI disk, the QEMU machine type, the
//! TPM state and the guest OS type.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::rules::{STORAGE_ID, STORAGE_ID_MESSAGE};

/// Firmware.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Bios {
    /// Legacy BIOS (Proxmox's default).
    SeaBIOS,
    /// UEFI. Declare `efiDisk` too: without one Proxmox boots from a
    /// temporary copy of the EFI vars and forgets boot entries and Secure
    /// Boot settings at every start.
    OVMF,
}

/// The disk holding the UEFI variables (`efidisk0`), created with the VM
/// (or added to it) on `storage`. Its layout and keys are fixed once it
/// exists: a different `type` or `preEnrolledKeys` is reported, not
/// applied (delete `efidisk0` in Proxmox to have the provider create a new
/// one).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!self.preEnrolledKeys || self.type == '4m'")
    .message("preEnrolledKeys (Secure Boot) needs type 4m; Proxmox ignores the keys with 2m"))]
pub struct EfiDisk {
    /// Storage for the EFI vars volume, e.g. `local-lvm`.
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,
    /// OVMF vars layout: `4m` (default; needed for Secure Boot) or the
    /// legacy `2m`.
    #[serde(default, rename = "type")]
    pub type_: EfiType,
    /// Enroll the distribution and Microsoft Secure Boot keys, so Secure
    /// Boot is on from the first start (Windows 11 wants it). Off: Secure
    /// Boot is off until keys are enrolled in the guest.
    #[serde(default)]
    pub pre_enrolled_keys: bool,
}

/// OVMF vars layouts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum EfiType {
    /// 4 MiB (recommended, Secure Boot capable).
    #[default]
    #[serde(rename = "4m")]
    FourMb,
    /// 2 MiB (legacy).
    #[serde(rename = "2m")]
    TwoMb,
}

/// The QEMU machine (chipset and version).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.viommu) || self.viommu != 'intel' || self.type == 'q35'")
    .message("the Intel vIOMMU needs machine type q35"))]
pub struct Machine {
    /// Chipset: `i440fx` (Proxmox's default) or `q35` (PCIe, needed for
    /// PCIe passthrough and recommended for Windows 11).
    #[serde(rename = "type")]
    pub type_: MachineType,
    /// Pin a QEMU machine version, e.g. `9.2` or `9.2+pve1`. Left out:
    /// the newest the node runs, and any pinned version counts as
    /// matching (Proxmox pins Windows guests' version when it creates
    /// them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 24))]
    #[x_kube(validation = Rule::new("self.matches('^[0-9]+([.][0-9]+)+([+]pve[0-9]+)?$')")
        .message("must be a QEMU machine version such as 9.2 or 9.2+pve1"))]
    pub version: Option<String>,
    /// A guest vIOMMU: `intel` (q35 only) or `virtio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub viommu: Option<Viommu>,
}

/// Chipsets.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MachineType {
    /// Intel 440FX (`pc`).
    I440fx,
    /// Intel Q35 (PCIe).
    Q35,
}

/// Guest vIOMMU models.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Viommu {
    /// Intel VT-d (q35 only).
    Intel,
    /// VirtIO IOMMU.
    Virtio,
}

/// A software TPM (`tpmstate0`), its state kept on `storage`. Created with
/// the VM (or added to it); its version cannot change afterwards.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TpmState {
    /// Storage for the TPM state volume, e.g. `local-lvm`.
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,
    /// TPM interface version: `v2.0` (default; Windows 11 needs it) or
    /// `v1.2`.
    #[serde(default)]
    pub version: TpmVersion,
}

/// TPM interface versions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum TpmVersion {
    /// TPM 2.0.
    #[default]
    #[serde(rename = "v2.0")]
    V2_0,
    /// TPM 1.2.
    #[serde(rename = "v1.2")]
    V1_2,
}

/// Guest operating systems Proxmox tunes the VM for (`ostype`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OsType {
    /// Linux 2.6 - 6.x kernels.
    L26,
    /// Linux 2.4.
    L24,
    /// Windows 11 / Server 2022 / 2025.
    Win11,
    /// Windows 10 / Server 2016 / 2019.
    Win10,
    /// Windows 8 / Server 2012.
    Win8,
    /// Windows 7 / Server 2008 R2.
    Win7,
    /// Windows Vista.
    Wvista,
    /// Windows Server 2008.
    W2k8,
    /// Windows Server 2003.
    W2k3,
    /// Windows 2000.
    W2k,
    /// Windows XP.
    Wxp,
    /// Solaris.
    Solaris,
    /// Anything else (Proxmox's default).
    Other,
}

impl OsType {
    /// The value of `ostype`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::L26 => "l26",
            Self::L24 => "l24",
            Self::Win11 => "win11",
            Self::Win10 => "win10",
            Self::Win8 => "win8",
            Self::Win7 => "win7",
            Self::Wvista => "wvista",
            Self::W2k8 => "w2k8",
            Self::W2k3 => "w2k3",
            Self::W2k => "w2k",
            Self::Wxp => "wxp",
            Self::Solaris => "solaris",
            Self::Other => "other",
        }
    }
}
