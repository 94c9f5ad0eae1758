//! Disks: empty, imported from a Proxmox volume, or from a downloaded image.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::quantity::Quantity;
use crate::api::rules::{
    CHECKSUM_LENGTH, CHECKSUM_LENGTH_MESSAGE, DISK_SIZE_MAX, DISK_SIZE_MAX_MESSAGE,
    FILE_NAME_NOT_DEFAULT, FILE_NAME_NOT_DEFAULT_MESSAGE, HEX_CHECKSUM, HEX_CHECKSUM_MESSAGE,
    HTTP_URL, HTTP_URL_MESSAGE, NO_DOT_DOT, STORAGE_ID, STORAGE_ID_MESSAGE, URL_WITH_CHECKSUM,
    URL_WITH_CHECKSUM_MESSAGE, VOLUME_ID,
};

/// One disk of the VM.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(has(self.importFrom) && has(self.image))")
        .message("a disk takes one source: importFrom or image, not both"),
    validation = Rule::new("has(self.importFrom) || has(self.image) || has(self.size)")
        .message("an empty disk (no importFrom, no image) needs a size"),
    validation = Rule::new("!has(self.size) || !has(oldSelf.size) || !isQuantity(self.size) || !isQuantity(oldSelf.size) || quantity(self.size).compareTo(quantity(oldSelf.size)) >= 0")
        .message("disks can only grow: size cannot be made smaller")
)]
pub struct Disk {
    /// Bus and index: `scsi0`..`scsi30`, `virtio0`..`virtio15`,
    /// `sata0`..`sata5` or `ide0`..`ide3`.
    #[schemars(length(max = 8))]
    #[x_kube(validation = Rule::new("self.matches('^(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5]|ide[0-3])$')")
        .message("slot must be scsi0..scsi30, virtio0..virtio15, sata0..sata5 or ide0..ide3"))]
    pub slot: String,

    /// Proxmox storage that holds the disk, e.g. `local-lvm`. Changing it
    /// moves the disk there (online when the VM runs) and deletes the old
    /// volume.
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,

    /// Size as a Kubernetes quantity (e.g. `32Gi`). Required for an empty
    /// disk; for an imported disk, the size to grow it to (an image keeps its
    /// own size when this is left out). Proxmox allocates new empty disks in
    /// whole GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(DISK_SIZE_MAX).message(DISK_SIZE_MAX_MESSAGE))]
    pub size: Option<Quantity>,

    /// Import the disk from a volume already on Proxmox, such as
    /// `local:import/jammy.qcow2` (PVE 8.3 or later) or a template's disk
    /// `local-lvm:base-9000-disk-0` (create only). The disk of another VM
    /// (`vm-N-disk-K`) is imported only as that VM could be cloned: when it
    /// is a template, or the provider config's
    /// `clonePolicy.allowNonTemplates` names it; otherwise the resource is
    /// `NotATemplate` and nothing is imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 255))]
    #[x_kube(
        validation = Rule::new(VOLUME_ID)
            .message("must be a Proxmox volume ID such as local:import/jammy.qcow2 (absolute paths are not supported)"),
        validation = Rule::new(NO_DOT_DOT)
            .message("importFrom must not contain .. path parts")
    )]
    pub import_from: Option<String>,

    /// Download a disk image (e.g. a cloud image) into Proxmox storage once,
    /// then import it. The downloaded file is reused by every VM that names
    /// the same image (create only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<DiskImage>,
}

/// A disk image: a ProxmoxImage of this namespace (`name`), or one Proxmox
/// downloads for this VM with its download-url API (`url`, `checksum`,
/// `checksumAlgorithm`, `filename`, `storage`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.name) != has(self.url)")
        .message("an image is either a ProxmoxImage (name) or a download (url, checksum, checksumAlgorithm): exactly one of name and url"),
    validation = Rule::new(URL_WITH_CHECKSUM).message(URL_WITH_CHECKSUM_MESSAGE),
    validation = Rule::new("!has(self.name) || !has(self.filename)")
        .message("filename is only allowed with url: a ProxmoxImage names its own file"),
    validation = Rule::new(CHECKSUM_LENGTH).message(CHECKSUM_LENGTH_MESSAGE)
)]
pub struct DiskImage {
    /// A ProxmoxImage in this namespace (content `import`): the VM waits
    /// until its file is ready on the VM's node, then imports it.
    /// `storage` is the image's then, not this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')")
        .message("must be the name of a ProxmoxImage (a DNS subdomain)"))]
    pub name: Option<String>,

    /// http(s) URL of the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    #[x_kube(validation = Rule::new(HTTP_URL).message(HTTP_URL_MESSAGE))]
    pub url: Option<String>,

    /// Hex checksum of the file; Proxmox verifies it after the download.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    #[x_kube(validation = Rule::new(HEX_CHECKSUM).message(HEX_CHECKSUM_MESSAGE))]
    pub checksum: Option<String>,

    /// Algorithm of `checksum`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_algorithm: Option<ChecksumAlgorithm>,

    /// File name in the storage's `import/` directory. Defaults to the URL's
    /// file name plus the first 12 digits of the checksum, with the extension
    /// `.qcow2` unless the URL ends in `.raw` or `.vmdk`. Set it for raw
    /// images whose URL ends in `.img`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[x_kube(
        validation = Rule::new("self.matches('^[A-Za-z0-9][A-Za-z0-9._+=-]*[.](qcow2|raw|vmdk)$')")
            .message("must be a file name ending in .qcow2, .raw or .vmdk (letters, digits, . _ + = -)"),
        validation = Rule::new(FILE_NAME_NOT_DEFAULT).message(FILE_NAME_NOT_DEFAULT_MESSAGE)
    )]
    pub filename: Option<String>,

    /// File-based storage with the `import` content type that receives the
    /// download (PVE 8.4 or later). Not used with `name`.
    #[serde(default = "default_image_storage")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,
}

/// A file name's stem as Proxmox keeps it (it normalises names the same
/// way, s/[^a-zA-Z0-9_.-]/_/g), starting with a letter or digit, at most
/// 150 characters.
pub fn file_stem(stem: &str) -> String {
    let mut stem: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !stem.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        stem.insert_str(0, "image");
    }
    stem.truncate(150);
    stem
}

/// The download form of a [`DiskImage`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageDownload<'a> {
    /// URL.
    pub url: &'a str,
    /// Checksum.
    pub checksum: &'a str,
    /// Its algorithm.
    pub algorithm: ChecksumAlgorithm,
}

fn default_image_storage() -> String {
    "local".into()
}

/// Checksum algorithms Proxmox's download-url accepts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChecksumAlgorithm {
    /// MD5 (32 hex digits).
    Md5,
    /// SHA-1 (40 hex digits).
    Sha1,
    /// SHA-224 (56 hex digits).
    Sha224,
    /// SHA-256 (64 hex digits).
    Sha256,
    /// SHA-384 (96 hex digits).
    Sha384,
    /// SHA-512 (128 hex digits).
    Sha512,
}

impl ChecksumAlgorithm {
    /// The value of Proxmox's `checksum-algorithm` parameter.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Md5 => "md5",
            Self::Sha1 => "sha1",
            Self::Sha224 => "sha224",
            Self::Sha256 => "sha256",
            Self::Sha384 => "sha384",
            Self::Sha512 => "sha512",
        }
    }
}

impl DiskImage {
    /// The URL, checksum and algorithm of the download form; `None` for a
    /// ProxmoxImage (`name`).
    pub fn download(&self) -> Option<ImageDownload<'_>> {
        Some(ImageDownload {
            url: self.url.as_deref()?,
            checksum: self.checksum.as_deref()?,
            algorithm: self.checksum_algorithm?,
        })
    }

    /// The file name in `<storage>/import/` of the download form:
    /// `filename`, or one derived from the URL and checksum so different
    /// images never share a file and the same image is downloaded once.
    pub fn file_name(&self) -> Option<String> {
        let d = self.download()?;
        if let Some(name) = &self.filename {
            return Some(name.clone());
        }
        let path = d.url.split(['?', '#']).next().unwrap_or_default();
        let base = path.rsplit('/').next().unwrap_or_default();
        let (stem, ext) = match base.rsplit_once('.') {
            Some((stem, ext @ ("qcow2" | "raw" | "vmdk"))) => (stem, ext),
            Some((stem, _)) => (stem, "qcow2"),
            None => (base, "qcow2"),
        };
        let stem = file_stem(stem);
        let digest: String = d.checksum.chars().take(12).collect();
        Some(format!("{stem}-{}.{ext}", digest.to_ascii_lowercase()))
    }

    /// The Proxmox volume ID of the downloaded file of the download form:
    /// `<storage>:import/<file>`.
    pub fn volume(&self) -> Option<String> {
        Some(format!("{}:import/{}", self.storage, self.file_name()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(url: &str, filename: Option<&str>) -> DiskImage {
        DiskImage {
            name: None,
            url: Some(url.into()),
            checksum: Some("ABCDEF0123456789".repeat(4)),
            checksum_algorithm: Some(ChecksumAlgorithm::Sha256),
            filename: filename.map(Into::into),
            storage: "local".into(),
        }
    }

    #[test]
    fn derives_a_content_addressed_file_name() {
        let cases = [
            (
                "https://cloud-images.example/jammy/current/jammy-server-cloudimg-amd64.img",
                "jammy-server-cloudimg-amd64-abcdef012345.qcow2",
            ),
            ("https://x.example/disk.raw?sig=1", "disk-abcdef012345.raw"),
            ("https://x.example/a%20b.vmdk", "a_20b-abcdef012345.vmdk"),
            ("https://x.example/", "image-abcdef012345.qcow2"),
        ];
        for (url, want) in cases {
            assert_eq!(image(url, None).file_name().as_deref(), Some(want), "{url}");
        }
    }

    #[test]
    fn explicit_file_name_wins() {
        let img = image("https://x.example/a.img", Some("noble.raw"));
        assert_eq!(img.volume().as_deref(), Some("local:import/noble.raw"));
    }
}
