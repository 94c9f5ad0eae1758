//! `spec.forProvider` of a ProxmoxContainer: the container as it should be
//! on Proxmox.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::meta::LocalSecretKeySelector;
use crate::api::quantity::Quantity;
use crate::api::rules::{
    BRIDGE, BRIDGE_MESSAGE, DISK_SIZE_MAX, DISK_SIZE_MAX_MESSAGE, DNS_NAME, GATEWAY_NOT_OWN,
    GATEWAY_NOT_OWN_MESSAGE, IPV4, IPV4_CIDR_OR_DHCP, IPV6_CIDR_OR_AUTO, MEMORY_MAX,
    MEMORY_MAX_MESSAGE, MOUNT_PATH, MOUNT_PATH_MESSAGE, NO_CONTROL, NO_CONTROL_MESSAGE, NO_DOT_DOT,
    NODE_NAME, NODE_NAME_MESSAGE, NODE_NAMES, OCI_REFERENCE, OCI_REFERENCE_MESSAGE, SSH_KEYS,
    SSH_KEYS_MESSAGE, STORAGE_ID, STORAGE_ID_MESSAGE, TAGS, TAGS_MESSAGE, VNET_MESSAGE,
};
use crate::api::vm::PowerState;

/// The container as it should be on Proxmox. Fields marked "create only"
/// are used when the container is created and ignored afterwards.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(oldSelf.vmid) || (has(self.vmid) && self.vmid == oldSelf.vmid)")
        .message("vmid cannot be changed or removed once set: it names the container on Proxmox"),
    validation = Rule::new("!has(self.node) || !has(self.allowedNodes) || size(self.allowedNodes) == 0")
        .message("set node or allowedNodes, not both"),
    validation = Rule::new("!has(self.mountPoints) || self.mountPoints.all(m, self.mountPoints.exists_one(o, o.slot == m.slot))")
        .message("each mount point slot may appear only once"),
    validation = Rule::new("!has(self.networks) || self.networks.all(n, self.networks.exists_one(o, o.slot == n.slot))")
        .message("each network slot may appear only once"),
    validation = Rule::new("!has(self.networks) || self.networks.all(n, self.networks.exists_one(o, o.name == n.name))")
        .message("each network interface name may appear only once"),
    validation = Rule::new("has(self.template) != has(self.restore)")
        .message("a container is created from a template or restored from a backup: set exactly one of template and restore"),
    validation = Rule::new("has(self.restore) == has(oldSelf.restore)")
        .message("restore cannot be added or removed after the resource is created"),
    validation = Rule::new("!has(self.restore) || !has(self.mountPoints) || size(self.mountPoints) == 0")
        .message("a restored container gets its mount points from the archive: mountPoints cannot be set with restore"),
    validation = Rule::new("!has(self.restore) || ((!has(self.sshKeys) || size(self.sshKeys) == 0) && !has(self.passwordSecretRef))")
        .message("a restored container keeps the archive's root password and SSH keys: sshKeys and passwordSecretRef cannot be set with restore")
)]
pub struct ContainerParameters {
    /// Proxmox node to create the container on. When left out, the
    /// provider picks an online node among `allowedNodes` (all nodes if
    /// that list is empty) with the most free memory, as for ProxmoxVMs.
    /// Create only: containers are not migrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(NODE_NAME).message(NODE_NAME_MESSAGE))]
    pub node: Option<String>,

    /// Nodes the provider may place the container on when `node` is left
    /// out. Empty: any online node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    #[x_kube(validation = Rule::new(NODE_NAMES)
        .message("allowedNodes must be Proxmox node names (letters, digits and inner dashes)"))]
    pub allowed_nodes: Vec<String>,

    /// VMID (100-999999999). VMs and containers share one VMID space. Left
    /// out: the provider allocates the lowest free one of the provider
    /// config's `vmidRange` (counting VMs and containers) and records it in
    /// the `crossplane.io/external-name` annotation before creating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub vmid: Option<u32>,

    /// What the root filesystem is unpacked from. Create only. Exactly one
    /// of `template` and `restore`.
    #[serde(default, skip_serializing_if = "ContainerTemplate::is_empty")]
    pub template: ContainerTemplate,

    /// Create the container by restoring a vzdump backup archive of a
    /// container (`vzrestore`) instead of unpacking a template. Excludes
    /// `template`, `mountPoints`, `sshKeys` and `passwordSecretRef` (the
    /// archive brings them). Cannot be added, removed or changed after
    /// creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf")
        .message("the restore source cannot be changed after the resource is created"))]
    pub restore: Option<super::ContainerRestore>,

    /// The root filesystem. Create only (a size change is reported, not
    /// applied). For a restore, the storage the archive's root filesystem
    /// and mount points are restored to (their sizes are the archive's).
    pub rootfs: RootFs,

    /// Extra volumes mounted into the container (`mp0` ... `mp255`).
    /// Create only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub mount_points: Vec<MountPoint>,

    /// Run the container with its root user mapped to an unprivileged user
    /// on the host (Proxmox's recommendation). Create only: Proxmox cannot
    /// change it afterwards.
    #[serde(default = "yes")]
    pub unprivileged: bool,

    /// Container features. `nesting` is corrected when it drifts; Proxmox
    /// lets only root@pam change `keyctl` and `fuse` on an existing
    /// container, so a drift of those is reported, not corrected.
    #[serde(default)]
    pub features: ContainerFeatures,

    /// CPU.
    #[serde(default)]
    pub cpu: ContainerCpu,

    /// Memory, as a Kubernetes quantity (e.g. `512Mi`); at least 16Mi,
    /// rounded up to whole MiB.
    #[serde(default = "default_memory")]
    #[x_kube(
        validation = Rule::new("!isQuantity(self) || quantity(self).compareTo(quantity('16Mi')) >= 0")
            .message("memory must be at least 16Mi"),
        validation = Rule::new(MEMORY_MAX).message(MEMORY_MAX_MESSAGE)
    )]
    pub memory: Quantity,

    /// Swap, as a Kubernetes quantity (e.g. `512Mi`), rounded up to whole
    /// MiB. (A quantity here is positive: a container without swap is not
    /// expressible yet.)
    #[serde(default = "default_memory")]
    #[x_kube(validation = Rule::new(MEMORY_MAX).message(MEMORY_MAX_MESSAGE))]
    pub swap: Quantity,

    /// Host name inside the container. Left out: the resource's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(DNS_NAME).message("hostname must be a DNS name"))]
    pub hostname: Option<String>,

    /// Network interfaces (`net0` ... `net31`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub networks: Vec<ContainerNetwork>,

    /// DNS settings. Left out: the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<ContainerDns>,

    /// OpenSSH public keys for root. Create only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 4096)))]
    #[x_kube(validation = Rule::new(SSH_KEYS).message(SSH_KEYS_MESSAGE))]
    pub ssh_keys: Vec<String>,

    /// Secret key (in this namespace) holding root's password (at least 5
    /// characters). Sent once, with the create; never logged or written to
    /// the status. Create only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<LocalSecretKeySelector>,

    /// Start the container when its node boots (`onboot`).
    #[serde(default)]
    pub start_on_boot: bool,

    /// Whether the container should be running. `Stopped` shuts it down
    /// (its init is asked to stop, then it is stopped after 60 s).
    #[serde(default)]
    pub power_state: PowerState,

    /// Resource pool the container is in: created in it, and moved back
    /// into it (`allow-move`) when it is found in another; left out, the
    /// container's membership is left as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9_-]+$')")
        .message("pool must be a Proxmox pool ID (letters, digits, _ and -)"))]
    pub pool: Option<String>,

    /// Proxmox tags. Compared without regard to order or case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 64)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(TAGS).message(TAGS_MESSAGE)
    )]
    pub tags: Vec<String>,

    /// Notes. The provider appends a line marking the container as owned by
    /// this resource; a container without that line (or with another
    /// resource's) is never changed or deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    #[x_kube(validation = Rule::new("!self.contains('Managed by crossplane-provider-proxmox:')")
        .message("description cannot contain the provider's owner marker"))]
    pub description: Option<String>,

    /// The container's own Proxmox firewall: options and ordered rules (a
    /// rule may name a ProxmoxSecurityGroup or ProxmoxIPSet of this
    /// namespace). Left out: the provider does not touch the container's
    /// firewall. A NIC is filtered only with its own `firewall: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<crate::api::firewall::GuestFirewall>,
}

fn yes() -> bool {
    true
}

fn default_memory() -> Quantity {
    Quantity("512Mi".into())
}

/// The template a container's root filesystem is unpacked from: exactly
/// one of `volume`, `oci` and `image`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.volume), has(self.oci), has(self.image)].filter(x, x).size() == 1")
        .message("template needs exactly one of volume, oci and image")
)]
pub struct ContainerTemplate {
    /// A container template volume that exists on the node, e.g.
    /// `local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    #[x_kube(
        validation = Rule::new("self.matches('^[a-zA-Z][a-zA-Z0-9._-]*[a-zA-Z0-9]:vztmpl/[^/]+$')")
            .message("volume must be a container template volume such as local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"),
        validation = Rule::new(NO_DOT_DOT).message("volume must not contain .. path parts"),
        validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE)
    )]
    pub volume: Option<String>,

    /// An OCI image the provider pulls into the node's storage first (PVE
    /// 9.1 or later), once per node and reference: the pulled file is
    /// reused by every container naming the same image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciImage>,

    /// A ProxmoxImage of the container's namespace with content `vztmpl`:
    /// the container waits until its file is ready on the container's
    /// node, is created from its volume, and holds the image (it is not
    /// deleted while the container names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ContainerImage>,
}

impl ContainerTemplate {
    /// None of the three: the spec has no `template` (it restores).
    pub fn is_empty(&self) -> bool {
        self.volume.is_none() && self.oci.is_none() && self.image.is_none()
    }
}

/// A ProxmoxImage a container is created from.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerImage {
    /// The ProxmoxImage's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// An OCI image from a registry.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OciImage {
    /// Image reference with a tag, e.g. `docker.io/library/alpine:3.20`.
    #[schemars(length(max = 255))]
    #[x_kube(validation = Rule::new(OCI_REFERENCE).message(OCI_REFERENCE_MESSAGE))]
    pub reference: String,

    /// File-based storage holding container templates (`vztmpl`) to pull
    /// into.
    #[serde(default = "default_oci_storage")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,
}

fn default_oci_storage() -> String {
    "local".into()
}

/// The root filesystem.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RootFs {
    /// Storage to allocate it on (one that holds container directories,
    /// `rootdir`).
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,

    /// Size, as a Kubernetes quantity, rounded up to whole GiB.
    #[x_kube(
        validation = Rule::new("!isQuantity(self) || quantity(self).compareTo(quantity('1Gi')) >= 0")
            .message("rootfs.size must be at least 1Gi"),
        validation = Rule::new(DISK_SIZE_MAX).message(DISK_SIZE_MAX_MESSAGE)
    )]
    pub size: Quantity,
}

/// A volume mounted into the container.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MountPoint {
    /// Slot: `mp0` ... `mp255`.
    #[schemars(length(max = 5))]
    #[x_kube(validation = Rule::new("self.matches('^mp([0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])$')")
        .message("slot must be mp0 ... mp255"))]
    pub slot: String,

    /// Storage to allocate it on.
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,

    /// Size, rounded up to whole GiB.
    #[x_kube(
        validation = Rule::new("!isQuantity(self) || quantity(self).compareTo(quantity('1Gi')) >= 0")
            .message("size must be at least 1Gi"),
        validation = Rule::new(DISK_SIZE_MAX).message(DISK_SIZE_MAX_MESSAGE)
    )]
    pub size: Quantity,

    /// Absolute path inside the container, e.g. `/data`: no `..` parts
    /// (Proxmox would mount outside the directory named) and no control
    /// characters (a newline would add a line to the container's config).
    #[schemars(length(max = 255))]
    #[x_kube(
        validation = Rule::new(MOUNT_PATH).message(MOUNT_PATH_MESSAGE),
        validation = Rule::new(NO_DOT_DOT).message("path must not contain .. parts"),
        validation = Rule::new(NO_CONTROL).message(NO_CONTROL_MESSAGE)
    )]
    pub path: String,
}

/// Container features.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerFeatures {
    /// Allow nested containers (and a working systemd in recent
    /// distributions).
    #[serde(default)]
    pub nesting: bool,
    /// Allow the keyctl() system call (Docker inside unprivileged
    /// containers).
    #[serde(default)]
    pub keyctl: bool,
    /// Allow FUSE file systems.
    #[serde(default)]
    pub fuse: bool,
}

/// CPU of a container.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerCpu {
    /// CPU cores the container may use.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 8192))]
    pub cores: u32,
}

impl Default for ContainerCpu {
    fn default() -> Self {
        Self { cores: 1 }
    }
}

fn one() -> u32 {
    1
}

/// One network interface of a container.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.gateway) || (has(self.ip) && self.ip != 'dhcp')")
        .message("gateway needs a static ip"),
    validation = Rule::new(GATEWAY_NOT_OWN).message(GATEWAY_NOT_OWN_MESSAGE)
)]
pub struct ContainerNetwork {
    /// Slot: `net0` ... `net31`.
    #[schemars(length(max = 5))]
    #[x_kube(validation = Rule::new("self.matches('^net([0-9]|[12][0-9]|3[01])$')")
        .message("slot must be net0 ... net31"))]
    pub slot: String,

    /// Interface name inside the container, e.g. `eth0`.
    #[schemars(length(max = 15))]
    #[x_kube(validation = Rule::new("self.matches('^[a-zA-Z][a-zA-Z0-9_.-]*$')")
        .message("name must be an interface name such as eth0"))]
    pub name: String,

    /// Bridge to attach to, e.g. `vmbr0`.
    #[schemars(length(max = 15))]
    #[x_kube(validation = Rule::new(BRIDGE).message(BRIDGE_MESSAGE))]
    pub bridge: String,

    /// VLAN tag (1-4094). Left out: untagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<u16>,

    /// IPv4: `dhcp` or an address with prefix length (`10.0.0.5/24`).
    /// Left out: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 18))]
    #[x_kube(validation = Rule::new(IPV4_CIDR_OR_DHCP)
        .message("ip must be dhcp or an IPv4 address with prefix length such as 10.0.0.5/24"))]
    pub ip: Option<String>,

    /// IPv4 gateway (with a static `ip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 15))]
    #[x_kube(validation = Rule::new(IPV4)
        .message("gateway must be an IPv4 address"))]
    pub gateway: Option<String>,

    /// IPv6: `dhcp`, `auto` (SLAAC) or an address with prefix length.
    /// Left out: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 43))]
    #[x_kube(validation = Rule::new(IPV6_CIDR_OR_AUTO)
        .message("ip6 must be dhcp, auto or an IPv6 address with prefix length"))]
    pub ip6: Option<String>,

    /// Enable the Proxmox firewall on this interface.
    #[serde(default)]
    pub firewall: bool,

    /// Not a Proxmox NIC option, refused with a hint: Proxmox puts a NIC
    /// on an SDN VNet with `bridge: <the VNet's ID>` (a ProxmoxVNet's
    /// `status.atProvider.id`); `vnet=` gets a 400 from Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("false").message(VNET_MESSAGE))]
    pub vnet: Option<String>,
}

/// DNS settings of a container.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerDns {
    /// Name server addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3), inner(length(max = 45)))]
    #[x_kube(validation = Rule::new("self.all(s, isIP(s))")
        .message("nameservers must be IP addresses"))]
    pub nameservers: Vec<String>,

    /// DNS search domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(DNS_NAME).message("searchDomain must be a DNS name"))]
    pub search_domain: Option<String>,
}
