//! `status` of a ProxmoxImage: where the file is, what each download is
//! doing, and the template VM on each node.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::managed::ManagedStatus;
use crate::api::task;

/// Observed state of a ProxmoxImage.
pub type ProxmoxImageStatus = ManagedStatus<ImageAtProvider>;

/// The file on each node and storage, and the templates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageAtProvider {
    /// Volume ID of the file, the same on every node:
    /// `<storage>:<content>/<file>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,

    /// One entry per node, or a single one for a shared storage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<ImageLocation>,

    /// `3/4 ready` for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,

    /// The template VM on each node (with `spec.forProvider.template`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<ImageTemplateStatus>,

    /// `2/4 ready` for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_summary: Option<String>,

    /// ProxmoxVMs and ProxmoxContainers that refer to the image (its
    /// templates not counted). The image is not deleted while any do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,

    /// Whether `volume` is a file this image downloaded (and deletes with
    /// itself), not an `importFrom` volume it only points to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub downloaded: bool,

    /// Files of previous sources (a new URL or checksum): deleted once the
    /// new file is ready everywhere and no VM is being created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_volumes: Vec<String>,
}

/// The file on one node's storage.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageLocation {
    /// Node (for a shared storage: the node that downloaded it).
    pub node: String,
    /// Storage.
    pub storage: String,
    /// Whether the storage is shared: this one entry serves every node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// Where the file is.
    pub phase: LocationPhase,
    /// The download or pull in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<ImageTask>,
    /// Size of the file in bytes, once there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Why the location is not ready (the last failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Consecutive failed downloads here; the retry waits 10 s doubling to
    /// 5 min after the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<u32>,
    /// When the last download here failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Time>,
    /// When this image wrote down, before sending it, that it was about to
    /// send its download or pull here; cleared once its task is recorded.
    /// Only a location with this set may take a task of its file found in
    /// the node's list as its own (a status write lost after the dispatch):
    /// an image that never sent anything owns nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sending: Option<Time>,
    /// Volumes this image's own download or pull wrote here (its task
    /// recorded and seen to succeed, or, after a lost status write, the one
    /// task of this provider for exactly that volume started since it wrote
    /// `sending`, whose log names its URL):
    /// the only files it is Ready on and deletes. A file of the same name
    /// it did not make is another's, reported `NotOwned` and left alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub made: Vec<String>,
}

/// Where the file is on one location.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum LocationPhase {
    /// Not there, nothing started yet.
    Pending,
    /// Being downloaded or pulled.
    Downloading,
    /// There, checksum verified.
    Ready,
    /// The last download failed; retried after a backoff.
    Failed,
    /// Being deleted (the image is being deleted).
    Deleting,
}

/// The template VM made from the image on one node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTemplateStatus {
    /// Node of the template.
    pub node: String,
    /// The ProxmoxVM (in the image's namespace, owned by the image) that
    /// manages the template.
    pub name: String,
    /// VMID of the template, once allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u32>,
    /// The template exists and can be cloned.
    pub ready: bool,
    /// Whether clones of this template can be linked (the template's
    /// storage can snapshot).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub linkable: bool,
}

/// What an image's task was started for (the names the VM's actions gave
/// them before images had their own list, so older statuses still read).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ImageTaskAction {
    /// Download (or OCI pull) of the file into storage.
    DownloadImage,
    /// Deletion of a file of a previous source.
    DeleteVolume,
}

impl ImageTaskAction {
    /// Words for events and condition messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::DownloadImage => "download of the disk image",
            Self::DeleteVolume => "deletion of a previous file",
        }
    }
}

/// A download or deletion a location of a ProxmoxImage waits for.
pub type ImageTask = task::InFlightTask<ImageTaskAction>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A location's task recorded while images used the VM's actions still
    /// reads: downloads and deletions kept their names.
    #[test]
    fn a_location_task_recorded_with_the_shared_actions_still_reads() {
        for (action, want) in [
            ("DownloadImage", ImageTaskAction::DownloadImage),
            ("DeleteVolume", ImageTaskAction::DeleteVolume),
        ] {
            let task = serde_json::json!({
                "upid": "UPID:pve:0000A1B2:0001C3D4:65000000:download:local:root@pam:",
                "action": action,
                "type": "download",
                "node": "pve",
                "target": "local:iso/a.img",
                "startedAt": "2026-01-01T00:00:00Z",
                "deadline": "2026-01-01T00:30:00Z",
                "summary": "download",
            });
            let read: ImageTask = serde_json::from_value(task)
                .unwrap_or_else(|e| panic!("{action} does not read: {e}"));
            assert_eq!(read.action, want);
        }
    }
}
