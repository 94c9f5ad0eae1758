//! A ProxmoxImage as the image cache shows it to the kinds that name one
//! (a VM's disk or clone, a container's template): read from memory, no
//! request.

use sha2::Digest;

/// The label the template VMs an image owns carry (with an
/// ownerReference to it): the fleet sets it, the image reads it to tell
/// its templates from the VMs that use it.
pub const IMAGE_LABEL: &str = "proxmox.crossplane.io/image";

/// Longest name that is also a Proxmox VM name (a DNS label's length).
pub const MAX_NAME: usize = 63;

/// `text` as it is, or cut to fit 63 characters with 8 hex digits of its
/// SHA-256 appended (so two long names that share a prefix differ).
pub fn shorten(text: &str) -> String {
    if text.len() <= MAX_NAME {
        return text.to_owned();
    }
    let digest = sha2::Sha256::digest(text.as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = MAX_NAME - hash.len() - 1;
    let prefix = text[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}")
}

/// The value of [`IMAGE_LABEL`] for `image`.
pub fn label_value(image: &str) -> String {
    shorten(image)
}

/// The ProxmoxImage named by `clone.image`, as the controller's cache of
/// images shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageLookup {
    /// No ProxmoxImage of that name in the VM's namespace.
    NotFound,
    /// It has no `spec.forProvider.template`.
    NoTemplate,
    /// It is being deleted: nothing new is cloned from it.
    Deleting,
    /// Its templates, as `status.atProvider.templates` lists them.
    Templates(Vec<ImageTemplate>),
}

impl ImageLookup {
    /// The nodes where the image's template can be cloned.
    pub fn ready_nodes(&self) -> Vec<String> {
        match self {
            Self::Templates(templates) => templates
                .iter()
                .filter(|t| t.ready && t.vmid.is_some())
                .map(|t| t.node.clone())
                .collect(),
            Self::NotFound | Self::NoTemplate | Self::Deleting => vec![],
        }
    }

    /// The template on `node`, if it can be cloned.
    pub fn ready_on(&self, node: &str) -> Option<&ImageTemplate> {
        match self {
            Self::Templates(templates) => templates
                .iter()
                .find(|t| t.node == node && t.ready && t.vmid.is_some()),
            Self::NotFound | Self::NoTemplate | Self::Deleting => None,
        }
    }
}

/// One node's template of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageTemplate {
    /// The node.
    pub node: String,
    /// The template's VMID, once known.
    pub vmid: Option<u32>,
    /// It is a template and can be cloned.
    pub ready: bool,
    /// Its clones can be linked.
    pub linkable: bool,
}

/// A ProxmoxImage a disk names, as the image controller's cache shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamedImage {
    /// The cache has not listed yet.
    Unknown,
    /// No such ProxmoxImage in the VM's namespace.
    NotFound,
    /// The image.
    Found {
        /// Its content type (only `import` can be a disk).
        content: crate::api::image::ImageContent,
        /// It is being deleted.
        deleting: bool,
        /// Its volume ID.
        volume: Option<String>,
        /// The nodes where its file is ready.
        ready_on: std::collections::BTreeSet<String>,
        /// Its file is ready on a shared storage (every node).
        shared_ready: bool,
        /// Its `summary` (`2/3 ready`).
        summary: Option<String>,
    },
}

impl NamedImage {
    /// Whether a disk could be imported from it on some node (the pass
    /// then reads it afresh before the plan decides).
    pub fn usable(&self) -> bool {
        match self {
            Self::Found {
                deleting,
                ready_on,
                shared_ready,
                ..
            } => !deleting && (*shared_ready || !ready_on.is_empty()),
            Self::Unknown | Self::NotFound => false,
        }
    }

    /// The image as the cache holds it.
    pub fn of(image: &crate::api::ProxmoxImage) -> Self {
        let at = image.status.as_ref().map(|s| &s.at_provider);
        let ready = |l: &&crate::api::image::ImageLocation| {
            l.phase == crate::api::image::LocationPhase::Ready
        };
        let locations = at.map(|a| a.locations.as_slice()).unwrap_or_default();
        Self::Found {
            content: image.spec.for_provider.content,
            deleting: image.metadata.deletion_timestamp.is_some(),
            volume: at.and_then(|a| a.volume.clone()),
            ready_on: locations
                .iter()
                .filter(ready)
                .map(|l| l.node.clone())
                .collect(),
            shared_ready: locations.iter().filter(ready).any(|l| l.shared),
            summary: at.and_then(|a| a.summary.clone()),
        }
    }
}
