//! CEL rules several fields share, with the messages people read when
//! `kubectl apply` refuses a value.

/// A Proxmox storage ID (pve-storage's `pve-storage-id`).
pub const STORAGE_ID: &str = "self.matches('^[a-zA-Z][a-zA-Z0-9._-]*[a-zA-Z0-9]$')";
/// Why a storage ID was refused.
pub const STORAGE_ID_MESSAGE: &str = "must be a Proxmox storage ID such as local-lvm";

/// A Kubernetes object name (DNS-1123 subdomain), as Secrets need.
pub const SECRET_NAME: &str =
    "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')";
/// Why a Secret name was refused.
pub const SECRET_NAME_MESSAGE: &str = "must be a Secret name: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit";

/// A DNS name (a VM name, a search domain, a template's name).
pub const DNS_NAME: &str = "self.matches('^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?[.])*[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$')";

/// Proxmox tags (pve-common's `pve-tag`), one list item each.
pub const TAGS: &str = "self.all(t, t.matches('^[a-zA-Z0-9_][a-zA-Z0-9_+.-]*$'))";
/// Why a tag was refused.
pub const TAGS_MESSAGE: &str =
    "tags contain letters, digits, _ + - and ., and start with a letter, digit or _";

/// A Linux bridge name (`vmbr0`).
pub const BRIDGE: &str = "self.matches('^[a-zA-Z][a-zA-Z0-9_.-]*$')";
/// Why a bridge name was refused.
pub const BRIDGE_MESSAGE: &str = "must be a Linux bridge name such as vmbr0";

/// The message for `vnet` on a NIC: users send `vnet=` where Proxmox wants
/// `bridge=<vnet>`.
pub const VNET_MESSAGE: &str = "vnet is not a NIC option: Proxmox attaches a NIC to an SDN VNet with bridge set to the VNet's ID (a ProxmoxVNet's status.atProvider.id); write it in bridge";

/// A download's source, shared by a disk's own `image` and a ProxmoxImage's
/// `source`: an http(s) URL.
pub const HTTP_URL: &str = "self.matches('^https?://[^\\\\s]+$')";
/// Why [`HTTP_URL`] refused a value.
pub const HTTP_URL_MESSAGE: &str = "must be an http:// or https:// URL";
/// A hex checksum.
pub const HEX_CHECKSUM: &str = "self.matches('^[0-9a-fA-F]+$')";
/// Why [`HEX_CHECKSUM`] refused a value.
pub const HEX_CHECKSUM_MESSAGE: &str = "must be a hex checksum";
/// `checksum` as long as `checksumAlgorithm`'s digests (on the object that
/// has both).
pub const CHECKSUM_LENGTH: &str = "!has(self.checksum) || size(self.checksum) == {'md5': 32, 'sha1': 40, 'sha224': 56, 'sha256': 64, 'sha384': 96, 'sha512': 128}[self.checksumAlgorithm]";
/// Why [`CHECKSUM_LENGTH`] refused a value.
pub const CHECKSUM_LENGTH_MESSAGE: &str =
    "checksum length does not match checksumAlgorithm (sha256 has 64 hex digits)";
/// `url`, `checksum` and `checksumAlgorithm` come together.
pub const URL_WITH_CHECKSUM: &str =
    "has(self.url) == has(self.checksum) && has(self.checksum) == has(self.checksumAlgorithm)";
/// Why [`URL_WITH_CHECKSUM`] refused a value.
pub const URL_WITH_CHECKSUM_MESSAGE: &str =
    "url needs checksum and checksumAlgorithm, and they are only allowed with url";

/// A Proxmox node name (pve-common's `pve-node`): it becomes a URL path
/// segment (`/nodes/{node}/...`), so `..` or `/` must never get through.
pub const NODE_NAME: &str = "self.matches('^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$')";
/// Why a node name was refused.
pub const NODE_NAME_MESSAGE: &str =
    "must be a Proxmox node name (letters, digits and inner dashes)";
/// A list of node names.
pub const NODE_NAMES: &str = "self.all(n, n.matches('^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$'))";

/// A Proxmox volume ID (`storage:path`): a storage ID, then a path without
/// spaces, commas or semicolons (a property string would split there).
pub const VOLUME_ID: &str = "self.matches('^[a-zA-Z][a-zA-Z0-9._-]*[a-zA-Z0-9]:[^\\\\s,;]+$')";
/// A path (a volume ID's or a mount point's) without `..` parts: Proxmox
/// resolves some volume paths on the host's file system.
pub const NO_DOT_DOT: &str = "!self.matches('(^|[:/])[.][.](/|$)')";
/// No control characters (newlines above all: Proxmox writes the value
/// into a config file line by line, so a newline would add a config line).
pub const NO_CONTROL: &str = "!self.matches('[[:cntrl:]]')";
/// Why [`NO_CONTROL`] refused a value.
pub const NO_CONTROL_MESSAGE: &str =
    "must not contain control characters such as newlines (Proxmox writes it into a config line)";

/// A mount point path inside a guest: absolute, not `/`, no commas (the
/// property string's separator).
pub const MOUNT_PATH: &str = "self.matches('^/[^,]*$') && self != '/'";
/// Why [`MOUNT_PATH`] refused a value.
pub const MOUNT_PATH_MESSAGE: &str = "path must be absolute, not / and without commas";

/// A file name on a storage: no directory part, not `.` or `..`.
pub const FILE_NAME: &str = "self.matches('^[A-Za-z0-9][A-Za-z0-9._+=-]*$')";
/// Why [`FILE_NAME`] refused a value.
pub const FILE_NAME_MESSAGE: &str =
    "must be a file name: letters, digits and . _ + = -, starting with a letter or digit";

/// An IPv4 address with prefix length, or `dhcp`.
pub const IPV4_CIDR_OR_DHCP: &str =
    "self == 'dhcp' || (isCIDR(self) && cidr(self).ip().family() == 4)";
/// An IPv4 address.
pub const IPV4: &str = "isIP(self) && ip(self).family() == 4";
/// An IPv6 address with prefix length, `dhcp` or `auto` (SLAAC).
pub const IPV6_CIDR_OR_AUTO: &str =
    "self == 'dhcp' || self == 'auto' || (isCIDR(self) && cidr(self).ip().family() == 6)";
/// An IPv6 address.
pub const IPV6: &str = "isIP(self) && ip(self).family() == 6";
/// On an interface with `ip` and `gateway`: the gateway is not the
/// interface's own address (a route to itself, no way out).
pub const GATEWAY_NOT_OWN: &str =
    "!has(self.gateway) || !has(self.ip) || !self.ip.startsWith(self.gateway + '/')";
/// Why [`GATEWAY_NOT_OWN`] refused a value.
pub const GATEWAY_NOT_OWN_MESSAGE: &str =
    "gateway is the interface's own address (ip): name the router of the subnet";
/// The same for `ip6` and `gateway6`.
pub const GATEWAY6_NOT_OWN: &str =
    "!has(self.gateway6) || !has(self.ip6) || !self.ip6.startsWith(self.gateway6 + '/')";
/// Why [`GATEWAY6_NOT_OWN`] refused a value.
pub const GATEWAY6_NOT_OWN_MESSAGE: &str =
    "gateway6 is the interface's own address (ip6): name the router of the subnet";

/// The largest disk or volume a spec may ask for: no Proxmox storage is
/// this big, so a larger size is a typo, not a plan (the provider still
/// checks each storage's free space before creating).
pub const DISK_SIZE_MAX: &str =
    "!isQuantity(self) || quantity(self).compareTo(quantity('1Pi')) <= 0";
/// Why [`DISK_SIZE_MAX`] refused a value.
pub const DISK_SIZE_MAX_MESSAGE: &str = "must be at most 1Pi";
/// The most memory a spec may ask for: more than any node has (the
/// provider checks the chosen node's memory before creating).
pub const MEMORY_MAX: &str = "!isQuantity(self) || quantity(self).compareTo(quantity('64Ti')) <= 0";
/// Why [`MEMORY_MAX`] refused a value.
pub const MEMORY_MAX_MESSAGE: &str = "must be at most 64Ti";

/// The most bytes a password read from a Secret may have: Proxmox takes a
/// request body of at most 64 KiB (larger is answered 413), and no
/// password needs more than this; a longer one is a condition naming the
/// field instead of a request Proxmox refuses.
pub const PASSWORD_MAX_BYTES: usize = 4096;

/// An OCI image reference with a tag (`docker.io/library/alpine:3.20`),
/// optionally with a registry host and port.
pub const OCI_REFERENCE: &str = "self.matches('^([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|[-]*)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|[-]*)[a-z0-9]+)*)*:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$')";
/// Why [`OCI_REFERENCE`] refused a value.
pub const OCI_REFERENCE_MESSAGE: &str =
    "reference must name an image with a tag, e.g. docker.io/library/alpine:3.20";

/// OpenSSH public keys, one per list item and each on one line (a newline
/// would add a key nobody named).
pub const SSH_KEYS: &str = "self.all(k, k.matches('^(ssh-|ecdsa-|sk-)[A-Za-z0-9@.-]+ [A-Za-z0-9+/=]+( [^\\\\r\\\\n]*)?$'))";
/// Why [`SSH_KEYS`] refused a value.
pub const SSH_KEYS_MESSAGE: &str =
    "each item must be one OpenSSH public key on one line, such as 'ssh-ed25519 AAAA... user@host'";

/// A file name a person gives (`filename`) is never one the provider gives
/// by default to another resource's file: those end in `-<8 hex>` (a
/// ProxmoxImage's, a hash of its namespace and name) or `-<12 hex>` (a
/// VM disk's own download, the checksum's start; a container's OCI pull, a
/// hash of the reference) before the extension, or start with
/// `crossplane-ci-` (a VM's cloud-init seed). Naming one would make the
/// resource use, and perhaps delete, a file another made.
pub const FILE_NAME_NOT_DEFAULT: &str = "!self.matches('-([0-9a-f]{8}|[0-9a-f]{12})[.][A-Za-z0-9.]+$') && !self.startsWith('crossplane-ci-')";
/// Why [`FILE_NAME_NOT_DEFAULT`] refused a value.
pub const FILE_NAME_NOT_DEFAULT_MESSAGE: &str = "filename must not be one the provider gives other resources' files (ending in -<8 or 12 hex digits> before the extension, or starting with crossplane-ci-): leave it out for a name of this resource's own";
