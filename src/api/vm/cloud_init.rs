//! Cloud-init: user, password, SSH keys, addresses, DNS.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::api::meta::LocalSecretKeySelector;
use crate::api::rules::{
    DNS_NAME, IPV4, IPV4_CIDR_OR_DHCP, IPV6, IPV6_CIDR_OR_AUTO, SSH_KEYS, SSH_KEYS_MESSAGE,
    STORAGE_ID, STORAGE_ID_MESSAGE,
};

/// Cloud-init settings Proxmox hands to the guest on its cloud-init drive.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CloudInit {
    /// User to create (cloud-init `ciuser`). Left out: the image's default user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z_][a-z0-9_-]*[$]?$')")
        .message("must be a Linux user name (lower-case letters, digits, _ and -)"))]
    pub user: Option<String>,

    /// Secret key (in this namespace) holding the user's password. Proxmox
    /// stores it hashed. Changing the Secret re-applies it (takes effect at
    /// the guest's next boot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_secret_ref: Option<LocalSecretKeySelector>,

    /// SSH public keys for the user, one per item, in OpenSSH format.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(max = 16384)))]
    #[x_kube(validation = Rule::new(SSH_KEYS).message(SSH_KEYS_MESSAGE))]
    pub ssh_keys: Vec<String>,

    /// Address settings per network device (`interface: net0` ...). Devices
    /// without an entry use DHCP for IPv4.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["interface".into()]))]
    pub ip_configs: Vec<IpConfig>,

    /// DNS servers (IP addresses). Left out, together with `searchDomain`:
    /// the Proxmox host's settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3), inner(length(max = 45)))]
    #[x_kube(validation = Rule::new("self.all(n, isIP(n))")
        .message("nameservers must be IP addresses"))]
    pub nameservers: Vec<String>,

    /// DNS search domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(DNS_NAME)
        .message("searchDomain must be a DNS domain such as example.com"))]
    pub search_domain: Option<String>,

    /// Storage for the cloud-init drive (a 4 MiB volume).
    #[serde(default = "default_storage")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,

    /// Slot of the cloud-init drive.
    #[serde(default = "default_drive_slot")]
    #[schemars(length(max = 8))]
    #[x_kube(validation = Rule::new("self.matches('^(ide[0-3]|sata[0-5]|scsi([0-9]|[12][0-9]|30))$')")
        .message("driveSlot must be ide0..ide3, sata0..sata5 or scsi0..scsi30"))]
    pub drive_slot: String,
}

fn default_storage() -> String {
    "local-lvm".into()
}

fn default_drive_slot() -> String {
    "ide2".into()
}

/// Addresses for one network device.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.gateway) || (has(self.ip) && self.ip != 'dhcp')")
        .message("gateway needs a static ip (with dhcp the gateway comes from DHCP)"),
    validation = Rule::new("!has(self.gateway6) || (has(self.ip6) && self.ip6 != 'dhcp' && self.ip6 != 'auto')")
        .message("gateway6 needs a static ip6")
)]
pub struct IpConfig {
    /// Network device slot this applies to: `net0` ... `net31`.
    #[schemars(length(max = 5))]
    #[x_kube(validation = Rule::new("self.matches('^net([0-9]|[12][0-9]|3[01])$')")
        .message("interface must be net0 ... net31"))]
    pub interface: String,

    /// IPv4 address with prefix length (`10.0.0.5/24`) or `dhcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 18))]
    #[x_kube(validation = Rule::new(IPV4_CIDR_OR_DHCP)
        .message("ip must be dhcp or an IPv4 address with prefix length, such as 10.0.0.5/24"))]
    pub ip: Option<String>,

    /// IPv4 gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 15))]
    #[x_kube(validation = Rule::new(IPV4)
        .message("gateway must be an IPv4 address"))]
    pub gateway: Option<String>,

    /// IPv6 address with prefix length (`fd00::5/64`), `dhcp` or `auto` (SLAAC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 43))]
    #[x_kube(validation = Rule::new(IPV6_CIDR_OR_AUTO)
        .message("ip6 must be dhcp, auto or an IPv6 address with prefix length, such as fd00::5/64"))]
    pub ip6: Option<String>,

    /// IPv6 gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 39))]
    #[x_kube(validation = Rule::new(IPV6)
        .message("gateway6 must be an IPv6 address"))]
    pub gateway6: Option<String>,
}
