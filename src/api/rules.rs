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
