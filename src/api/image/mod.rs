//! `ProxmoxImage`: a file Proxmox downloads once per storage (a cloud image,
//! an ISO, a container template) and that VMs and containers refer to by
//! name, optionally with a template VM per node that fleets clone.
//!
//! Namespaced, like ProxmoxVM, for three reasons: a VM refers to an image
//! of its own namespace only, so one team cannot make another's VMs boot
//! its files; the provider's namespaced mode (`--watch-namespace`, Roles
//! only) serves images as it serves VMs; and the image names the same
//! namespaced or cluster provider config its VMs use. The files an image
//! downloads belong to that one resource (their names carry a hash of its
//! namespace and name), so deleting an image never takes a file another
//! image or a VM's own `disks[].image` download still uses.

mod status;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use status::{
    ImageAtProvider, ImageLocation, ImageTask, ImageTaskAction, ImageTemplateStatus, LocationPhase,
    ProxmoxImageStatus,
};

use crate::api::managed::ManagedSpec;
use crate::api::rules::{
    CHECKSUM_LENGTH, CHECKSUM_LENGTH_MESSAGE, FILE_NAME_NOT_DEFAULT, FILE_NAME_NOT_DEFAULT_MESSAGE,
    HEX_CHECKSUM, HEX_CHECKSUM_MESSAGE, HTTP_URL, HTTP_URL_MESSAGE, NO_DOT_DOT, NODE_NAMES,
    OCI_REFERENCE, OCI_REFERENCE_MESSAGE, STORAGE_ID, STORAGE_ID_MESSAGE, URL_WITH_CHECKSUM,
    URL_WITH_CHECKSUM_MESSAGE, VOLUME_ID,
};
use crate::api::vm::ChecksumAlgorithm;

/// A file on Proxmox storage, downloaded once per storage and shared by the
/// VMs (`disks[].image.name`, `clone.image`) and containers that name it.
// The printer columns repeat `type_ = "string"`, which clippy mistakes for a
// duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "proxmox.m.crossplane.io",
    version = "v1alpha1",
    kind = "ProxmoxImage",
    plural = "proxmoximages",
    singular = "proxmoximage",
    namespaced,
    status = "ProxmoxImageStatus",
    derive = "PartialEq",
    shortname = "pimg",
    category = "crossplane",
    category = "managed",
    category = "proxmox",
    doc = "A disk image, ISO or container template on Proxmox storage, managed by crossplane-provider-proxmox.",
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
        name = "CONTENT",
        type_ = "string",
        json_path = ".spec.forProvider.content"
    ),
    printcolumn(
        name = "LOCATIONS",
        type_ = "string",
        json_path = ".status.atProvider.summary"
    ),
    printcolumn(
        name = "TEMPLATES",
        type_ = "string",
        json_path = ".status.atProvider.templateSummary"
    ),
    printcolumn(
        name = "USERS",
        type_ = "integer",
        json_path = ".status.atProvider.users"
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "VOLUME",
        type_ = "string",
        json_path = ".status.atProvider.volume",
        priority = 1
    ),
    printcolumn(
        name = "REASON",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='Synced')].reason",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxImageSpec {
    /// The file as it should be on Proxmox.
    pub for_provider: ImageParameters,

    /// `providerConfigRef` and `managementPolicies`, as every managed kind.
    #[serde(flatten)]
    pub managed: ManagedSpec,
}

/// What file, of which content type, on which storage and nodes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.source.oci) || self.content == 'vztmpl'")
        .message("an OCI image can only be a container template: content must be vztmpl"),
    validation = Rule::new("!has(self.template) || self.content == 'import'")
        .message("a template VM is made from a disk image: content must be import"),
    validation = Rule::new("!has(self.filename) || has(self.source.url) || has(self.source.oci)")
        .message("filename names the file a url is downloaded or an OCI image pulled to: it is only allowed with source.url or source.oci"),
    validation = Rule::new("!has(self.filename) || !has(self.source.oci) || self.filename.matches('^[A-Za-z0-9][A-Za-z0-9._-]*[.]tar$')")
        .message("an OCI image is pulled into a .tar file: filename must end in .tar (letters, digits, . _ -)"),
    validation = Rule::new("!has(self.filename) || self.content != 'import' || self.filename.matches('^[A-Za-z0-9][A-Za-z0-9._+=-]*[.](qcow2|raw|vmdk)$')")
        .message("an import file name must end in .qcow2, .raw or .vmdk (letters, digits, . _ + = -)"),
    validation = Rule::new("!has(self.filename) || self.content != 'iso' || self.filename.matches('^[A-Za-z0-9][A-Za-z0-9._+=-]*[.](iso|img)$')")
        .message("an iso file name must end in .iso or .img (letters, digits, . _ + = -)"),
    validation = Rule::new("!has(self.filename) || self.content != 'vztmpl' || self.filename.matches('^[A-Za-z0-9][A-Za-z0-9._+=-]*[.]tar([.](gz|xz|zst|bz2))?$')")
        .message("a vztmpl file name must end in .tar.gz, .tar.xz, .tar.zst, .tar.bz2 or .tar (PVE 9) (letters, digits, . _ + = -)")
)]
pub struct ImageParameters {
    /// Where the file comes from.
    pub source: ImageSource,

    /// Proxmox content type of the file: `import` (a disk image VMs import
    /// or clone, PVE 8.4 or later), `iso` (an installer or seed ISO) or
    /// `vztmpl` (a container template).
    pub content: ImageContent,

    /// File-based storage that receives the file; it must have the content
    /// type enabled. A storage shared by several nodes (NFS, CephFS) gets
    /// one download for all of them.
    #[serde(default = "default_storage")]
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,

    /// Nodes the file must be on. Left out: every online node of the
    /// cluster when the image is created (a node added later is added when
    /// a VM is placed there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 63)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new(NODE_NAMES)
            .message("nodes must be Proxmox node names (letters, digits and inner dashes)")
    )]
    pub nodes: Vec<String>,

    /// File name on the storage (`source.url` or `source.oci`; an OCI
    /// pull's ends in `.tar`). Left out: derived from the source and this
    /// resource, so two images never share a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    #[x_kube(validation = Rule::new(FILE_NAME_NOT_DEFAULT).message(FILE_NAME_NOT_DEFAULT_MESSAGE))]
    pub filename: Option<String>,

    /// Make a template VM from the image on each of its nodes: VMs with
    /// `clone.image` naming this image start as a clone of the template on
    /// their node (about a second for a linked clone) instead of importing
    /// the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<ImageTemplate>,
}

fn default_storage() -> String {
    "local".into()
}

/// Where an image's file comes from: exactly one of `url`, `importFrom`,
/// `oci`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.url), has(self.importFrom), has(self.oci)].filter(x, x).size() == 1")
        .message("exactly one of url, importFrom and oci must be set"),
    validation = Rule::new(URL_WITH_CHECKSUM).message(URL_WITH_CHECKSUM_MESSAGE),
    validation = Rule::new(CHECKSUM_LENGTH).message(CHECKSUM_LENGTH_MESSAGE)
)]
pub struct ImageSource {
    /// http(s) URL Proxmox downloads the file from (download-url). A new
    /// URL or checksum downloads the new file; the old one is deleted once
    /// no VM being created needs it.
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

    /// A volume that already exists on each node, e.g.
    /// `local:import/noble.qcow2`: nothing is downloaded and nothing is
    /// deleted with the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 3, max = 255))]
    #[x_kube(
        validation = Rule::new(VOLUME_ID)
            .message("must be a Proxmox volume ID such as local:import/noble.qcow2"),
        validation = Rule::new(NO_DOT_DOT).message("importFrom must not contain .. path parts")
    )]
    pub import_from: Option<String>,

    /// An OCI image reference such as `docker.io/library/alpine:3.20`
    /// (with a tag), pulled by Proxmox (oci-registry-pull, PVE 9.1 or
    /// later) into a container template `<storage>:vztmpl/<file>.tar`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    #[x_kube(validation = Rule::new(OCI_REFERENCE).message(OCI_REFERENCE_MESSAGE))]
    pub oci: Option<String>,
}

/// Proxmox storage content types an image can have.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImageContent {
    /// A disk image VMs import (`<storage>:import/<file>`).
    Import,
    /// An ISO image (`<storage>:iso/<file>`).
    Iso,
    /// A container template (`<storage>:vztmpl/<file>`).
    Vztmpl,
}

impl ImageContent {
    /// Proxmox's name of the content type (`content` of download-url).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Import => "import",
            Self::Iso => "iso",
            Self::Vztmpl => "vztmpl",
        }
    }
}

/// The template VM made from an image on each of its nodes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImageTemplate {
    /// Storage of the template's disk, e.g. `local-lvm`. Linked clones need
    /// a storage that can snapshot (LVM-thin, ZFS, Ceph RBD, qcow2 on a
    /// directory); clones on others are full copies.
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new(STORAGE_ID).message(STORAGE_ID_MESSAGE))]
    pub storage: String,

    /// Whether clones of the template may be linked: a VM asks for a
    /// linked clone with `clone.full: false` (`clone.full` defaults to a
    /// full copy, as for every clone); with `false` every clone is a full
    /// copy. A linked clone depends on the template's base disk, which then
    /// stays until the last clone is gone.
    #[serde(default = "yes")]
    pub linked: bool,
}

fn yes() -> bool {
    true
}
