//! The upload of a `customCloudInit` seed ISO: built here from the files
//! the plan carries, then sent as one multipart upload.

use pve_client::{Client, Upid};

use super::proxmox_failure;
use crate::reconcile::vm::nocloud::SeedFiles;
use crate::reconcile::vm::plan::ActFailure;

/// Builds the ISO and starts its upload (`imgcopy` task).
pub(super) async fn upload(
    client: &Client,
    node: &str,
    storage: &str,
    filename: &str,
    files: &SeedFiles,
) -> Result<Upid, ActFailure> {
    // The files themselves are never logged: `SeedFiles` shows sizes only.
    tracing::info!(
        node,
        storage,
        filename,
        ?files,
        "uploading a cloud-init seed ISO"
    );
    let iso = files
        .iso()
        .map_err(|e| ActFailure::Failed(format!("building the cloud-init seed ISO: {e}")))?;
    client
        .upload_iso(node, storage, filename, iso)
        .await
        .map_err(proxmox_failure)
}
