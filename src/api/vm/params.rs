//! `spec.forProvider`: the VM as it should be on Proxmox.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CloudInit, Disk, Hardware, Lifecycle, NetworkDevice};
use crate::api::quantity::Quantity;
use crate::api::rules::{
    DNS_NAME, MEMORY_MAX, MEMORY_MAX_MESSAGE, NODE_NAME, NODE_NAME_MESSAGE, NODE_NAMES, STORAGE_ID,
    STORAGE_ID_MESSAGE, TAGS, TAGS_MESSAGE,
};

/// The VM as it should be on Proxmox. Fields left out are not managed
/// (except where a default is shown); fields marked "create only" are used
/// when the VM is created and ignored afterwards.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(oldSelf.vmid) || (has(self.vmid) && self.vmid == oldSelf.vmid)")
        .message("vmid cannot be changed or removed once set: it names the VM on Proxmox"),
    validation = Rule::new("!has(oldSelf.node) || has(self.node)")
        .message("node cannot be removed once set; change it to migrate the VM"),
    validation = Rule::new("has(self.clone) == has(oldSelf.clone)")
        .message("clone cannot be added or removed after the resource is created"),
    validation = Rule::new("!has(self.clone) || !has(self.disks) || self.disks.all(d, !has(d.importFrom) && !has(d.image))")
        .message("a cloned VM gets its disks from the template: disks may grow them (size) or add empty disks, but cannot set importFrom or image"),
    validation = Rule::new("has(self.restore) == has(oldSelf.restore)")
        .message("restore cannot be added or removed after the resource is created"),
    validation = Rule::new("!has(self.restore) || !has(self.clone)")
        .message("restore and clone are two ways to create the VM: set one of them"),
    validation = Rule::new("!has(self.restore) || !has(self.disks) || self.disks.all(d, !has(d.importFrom) && !has(d.image))")
        .message("a restored VM gets its disks from the archive: disks may grow them (size) or add empty disks, but cannot set importFrom or image"),
    validation = Rule::new("!has(self.node) || !has(self.allowedNodes) || size(self.allowedNodes) == 0 || self.node in self.allowedNodes")
        .message("node must be one of allowedNodes"),
    validation = Rule::new("!has(self.cloudInit) || !has(self.cloudInit.driveSlot) || !has(self.disks) || !self.disks.exists(d, d.slot == self.cloudInit.driveSlot)")
        .message("cloudInit.driveSlot is already used by a disk; pick another slot (default ide2)"),
    validation = Rule::new("!has(self.ha) || !has(self.ha.state) || self.ha.state == 'ignored' || (self.ha.state == 'stopped') == (has(self.powerState) && self.powerState == 'Stopped')")
        .message("ha.state started needs powerState Running and stopped needs powerState Stopped (HA keeps the VM in its state)"),
    validation = Rule::new("!has(self.ha) || !has(self.ha.nodeAffinity) || has(self.node) || (has(self.allowedNodes) && size(self.allowedNodes) > 0)")
        .message("ha.nodeAffinity keeps the VM on allowedNodes (or node): set one of them"),
    validation = Rule::new("!has(self.customCloudInit) || !has(self.cloudInit)")
        .message("customCloudInit replaces cloudInit: set one of them"),
    validation = Rule::new("!has(self.customCloudInit) || !has(self.customCloudInit.driveSlot) || !has(self.disks) || !self.disks.exists(d, d.slot == self.customCloudInit.driveSlot)")
        .message("customCloudInit.driveSlot is already used by a disk; pick another slot (default ide2)"),
    validation = Rule::new("!has(self.efiDisk) || (has(self.bios) && self.bios == 'OVMF')")
        .message("efiDisk needs bios: OVMF (SeaBIOS has no EFI variables)"),
    validation = Rule::new("!has(self.template) || !self.template || self.powerState == 'Stopped'")
        .message("a template never runs: set powerState: Stopped together with template: true"),
    validation = Rule::new("!has(oldSelf.template) || !oldSelf.template || (has(self.template) && self.template)")
        .message("template cannot be unset: Proxmox cannot turn a template back into a VM"),
    validation = Rule::new("!has(self.balloon) || !has(self.balloon.minimum) || !isQuantity(self.balloon.minimum) || !isQuantity(self.memory) || quantity(self.balloon.minimum).compareTo(quantity(self.memory)) <= 0")
        .message("balloon.minimum cannot be more than memory"),
    validation = Rule::new("!has(self.pciDevices) || !self.pciDevices.exists(d, has(d.pcie) && d.pcie) || (has(self.machine) && self.machine.type == 'q35')")
        .message("pcie passthrough needs machine type q35"),
    validation = Rule::new("!has(self.hotplug) || !self.hotplug.exists(f, f == 'memory') || (has(self.cpu.numa) && self.cpu.numa)")
        .message("memory hotplug needs cpu.numa: true")
)]
pub struct VmParameters {
    /// Proxmox node to create the VM on. When left out, the provider picks an
    /// online node among `allowedNodes` (all nodes if that list is empty) as
    /// `placement` says (default: the most free memory, counting VMs it is
    /// placing but Proxmox does not show yet). Changing it migrates the VM
    /// there (online when it runs, its node-local disks copied along); a VM
    /// that HA, its load balancer or a person moved elsewhere while `node`
    /// stayed the same is followed, not moved back. Cannot be removed once
    /// set. Disks imported from node-local storage
    /// (`importFrom: local:import/...`) need `node`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(NODE_NAME).message(NODE_NAME_MESSAGE))]
    pub node: Option<String>,

    /// Nodes the provider may place the VM on when `node` is left out.
    /// Empty: any online node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(NODE_NAMES)
            .message("allowedNodes must be Proxmox node names (letters, digits and inner dashes)")
    )]
    pub allowed_nodes: Vec<String>,

    /// How the provider picks a node when `node` is left out. A clone goes
    /// to its template's node when that node is allowed (a clone to another
    /// node needs shared storage).
    #[serde(default)]
    pub placement: Placement,

    /// VMID (100 to 999999999). When left out, the provider takes the next
    /// free VMID from Proxmox and records it in the
    /// `crossplane.io/external-name` annotation before creating the VM.
    /// Cannot change once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub vmid: Option<u32>,

    /// VM name (a DNS name, also the cloud-init hostname). Defaults to
    /// `metadata.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(DNS_NAME)
        .message("must be a DNS name: letters, digits, dashes and dots, not starting or ending with a dash"))]
    pub name: Option<String>,

    /// Virtual CPUs.
    #[serde(default)]
    pub cpu: Cpu,

    /// Memory, as a Kubernetes quantity (e.g. `2Gi`); at least 16Mi. Proxmox
    /// counts whole MiB, so the value is rounded up to one.
    #[serde(default = "default_memory")]
    #[x_kube(
        validation = Rule::new("!isQuantity(self) || quantity(self).compareTo(quantity('16Mi')) >= 0")
            .message("memory must be at least 16Mi"),
        validation = Rule::new(MEMORY_MAX).message(MEMORY_MAX_MESSAGE)
    )]
    pub memory: Quantity,

    /// Disks, by slot. The first disk is the boot disk. Each disk is created
    /// empty (give `size`), imported from a volume already on Proxmox
    /// (`importFrom`) or from a cloud image the provider downloads (`image`).
    /// Disks only grow: a smaller `size` than the disk has is reported, not
    /// applied. Disks removed from this list are left on the VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["slot".into()]))]
    pub disks: Vec<Disk>,

    /// Create the VM by cloning a template instead of creating it from
    /// disks. Cannot be added, removed or changed after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf")
        .message("the clone source cannot be changed after the resource is created"))]
    pub clone: Option<CloneSource>,

    /// Create the VM by restoring a vzdump backup archive (`qmrestore`)
    /// instead of creating it from disks. Excludes `clone` and disks with
    /// `importFrom` or `image`. Cannot be added, removed or changed after
    /// creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf")
        .message("the restore source cannot be changed after the resource is created"))]
    pub restore: Option<super::RestoreSource>,

    /// Network devices, by slot (`net0` ... `net31`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["slot".into()]))]
    pub networks: Vec<NetworkDevice>,

    /// Cloud-init settings. The provider adds a cloud-init drive when the VM
    /// has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<CloudInit>,

    /// QEMU guest agent. When enabled and running in the guest, the VM's IP
    /// addresses appear in `status.atProvider.ipAddresses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<GuestAgent>,

    /// Whether the VM should be running. `Stopped` shuts it down gracefully
    /// (then stops it if shutdown times out).
    #[serde(default)]
    pub power_state: PowerState,

    /// Proxmox tags. Compared without regard to order or case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 64)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(TAGS).message(TAGS_MESSAGE)
    )]
    pub tags: Vec<String>,

    /// VM description (notes). The provider appends a line marking the VM as
    /// owned by this resource; keep that line if you edit the notes in Proxmox.
    /// The notes may not contain such a line themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 7680))]
    #[x_kube(validation = Rule::new("!self.contains('Managed by crossplane-provider-proxmox:')")
        .message("description must not contain the owner marker \"Managed by crossplane-provider-proxmox:\": the provider adds that line itself"))]
    pub description: Option<String>,

    /// Resource pool the VM is in: created in it, and moved back into it
    /// (`allow-move`) when it is found in another; left out, the VM's
    /// membership is left as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9_-]+$')")
        .message("pool must be a Proxmox pool ID (letters, digits, _ and -)"))]
    pub pool: Option<String>,

    /// Start the VM when its node boots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_boot: Option<bool>,

    /// SCSI controller model. Left out: `virtio-scsi-single` at creation,
    /// not managed afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scsi_controller: Option<ScsiController>,

    /// Register the VM as a Proxmox HA resource (see `ha.state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<super::HighAvailability>,

    /// The VM's own Proxmox firewall: options and ordered rules (a rule
    /// may name a ProxmoxSecurityGroup or ProxmoxIPSet of this
    /// namespace). Left out: the provider does not touch the VM's
    /// firewall. A NIC is filtered only with its own `firewall: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<crate::api::firewall::GuestFirewall>,

    /// Cloud-init data of your own from Secrets or ConfigMaps, on a NoCloud
    /// seed ISO (see `customCloudInit.userData`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_cloud_init: Option<super::CustomCloudInit>,
    /// Firmware, machine, console and devices (see hardware.rs).
    #[serde(flatten)]
    pub hardware: Hardware,

    /// Protection, startup order, template (see lifecycle.rs).
    #[serde(flatten)]
    pub lifecycle: Lifecycle,
}

fn default_memory() -> Quantity {
    Quantity("1Gi".into())
}

/// Virtual CPUs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    /// Cores per socket.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 512))]
    pub cores: u32,
    /// Sockets.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 16))]
    pub sockets: u32,
    /// CPU model, e.g. `host`, `x86-64-v2-AES`, `kvm64`. Left out: Proxmox's
    /// default, not managed.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9_.+-]+$')")
        .message("cpu.type must be a QEMU CPU model such as host, x86-64-v2-AES or kvm64"))]
    pub type_: Option<String>,
    /// CPU flags to turn on (`+aes`) or off (`-pcid`), from the set
    /// Proxmox allows per VM: aes, amd-no-ssb, amd-ssbd, hv-evmcs,
    /// hv-tlbflush, ibpb, md-clear, nested-virt (PVE 9.1+), pcid, pdpe1gb,
    /// spec-ctrl, ssbd, virt-ssbd. Left out: not managed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 13), inner(length(max = 16)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new("self.all(f, f.matches('^[+-](aes|amd-no-ssb|amd-ssbd|hv-evmcs|hv-tlbflush|ibpb|md-clear|nested-virt|pcid|pdpe1gb|spec-ctrl|ssbd|virt-ssbd)$'))")
            .message("each flag is + or - followed by one Proxmox allows per VM (aes, amd-no-ssb, amd-ssbd, hv-evmcs, hv-tlbflush, ibpb, md-clear, nested-virt, pcid, pdpe1gb, spec-ctrl, ssbd, virt-ssbd)")
    )]
    pub flags: Vec<String>,
    /// Emulate NUMA (needed for memory hot-plug). Left out: not managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<bool>,
}

fn one() -> u32 {
    1
}

impl Default for Cpu {
    fn default() -> Self {
        Self {
            cores: 1,
            sockets: 1,
            type_: None,
            flags: Vec::new(),
            numa: None,
        }
    }
}

/// A template to clone.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.templateVmid), has(self.templateName), has(self.image)].filter(x, x).size() == 1")
        .message("name the template by exactly one of templateVmid, templateName or image"),
    validation = Rule::new("self.full || !has(self.storage)")
        .message("storage can only be set for full clones (a linked clone stays on the template's storage)")
)]
pub struct CloneSource {
    /// VMID of the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub template_vmid: Option<u32>,
    /// Name of the template; it must be unique in the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(validation = Rule::new(DNS_NAME)
        .message("templateName must be a Proxmox VM name (a DNS name: letters, digits, dashes and dots)"))]
    pub template_name: Option<String>,
    /// Name of a ProxmoxImage of this namespace with
    /// `spec.forProvider.template`: the VM is a clone of that image's
    /// template on its node (with `node` left out, placement picks among
    /// the allowed nodes where the template is ready). Linked with
    /// `full: false` when the template's storage can snapshot, else a full
    /// copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(DNS_NAME)
        .message("image must be the name of a ProxmoxImage (a DNS subdomain name)"))]
    pub image: Option<String>,
    /// Full copy (default) or linked clone (fast, shares the template's
    /// base disk).
    #[serde(default = "yes")]
    pub full: bool,
    /// Storage for the copied disks (full clones only). Left out: the
    /// template's storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: Option<String>,
}

fn yes() -> bool {
    true
}

/// QEMU guest agent settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct GuestAgent {
    /// Enable the agent device (the guest must run qemu-guest-agent).
    #[serde(default = "yes")]
    pub enabled: bool,
}

/// How a node is chosen for a VM without `node`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.policy == 'SpreadByLabel' ? has(self.labelKey) : !has(self.labelKey)")
        .message("labelKey is required with policy SpreadByLabel and only allowed with it")
)]
pub struct Placement {
    /// `MostFreeMemory` (default): the online node with the most memory left
    /// after the VMs it runs and those being placed on it. `FewestVms`: the
    /// node with the fewest VMs. `SpreadByLabel`: the node with the fewest
    /// ProxmoxVMs that share this resource's value of `labelKey` (ties go to
    /// the most free memory).
    #[serde(default)]
    pub policy: PlacementPolicy,
    /// The label whose ProxmoxVMs `SpreadByLabel` spreads (e.g. `app`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub label_key: Option<String>,
}

/// Placement policies.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum PlacementPolicy {
    /// Most free memory.
    #[default]
    MostFreeMemory,
    /// Fewest VMs.
    FewestVms,
    /// Fewest ProxmoxVMs sharing the value of `labelKey`.
    SpreadByLabel,
}

/// Requested power state.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum PowerState {
    /// Keep the VM running.
    #[default]
    Running,
    /// Keep the VM stopped.
    Stopped,
}

/// SCSI controller models Proxmox offers.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ScsiController {
    /// LSI 53C895A (Proxmox's own default; slow).
    #[serde(rename = "lsi")]
    Lsi,
    /// LSI 53C810.
    #[serde(rename = "lsi53c810")]
    Lsi53c810,
    /// VirtIO SCSI, one controller for all disks.
    #[serde(rename = "virtio-scsi-pci")]
    VirtioScsiPci,
    /// VirtIO SCSI, one controller per disk (recommended).
    #[serde(rename = "virtio-scsi-single")]
    VirtioScsiSingle,
    /// MegaRAID SAS 8708EM2.
    #[serde(rename = "megasas")]
    Megasas,
    /// VMware PVSCSI.
    #[serde(rename = "pvscsi")]
    Pvscsi,
}

impl ScsiController {
    /// The value Proxmox uses for `scsihw`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lsi => "lsi",
            Self::Lsi53c810 => "lsi53c810",
            Self::VirtioScsiPci => "virtio-scsi-pci",
            Self::VirtioScsiSingle => "virtio-scsi-single",
            Self::Megasas => "megasas",
            Self::Pvscsi => "pvscsi",
        }
    }
}
