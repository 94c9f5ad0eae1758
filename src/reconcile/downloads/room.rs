//! Whether a download fits where it goes: the size Proxmox reports for the
//! URL against the storage's free space, so a file that would fill the
//! storage (often the node's root file system) is not sent. For every kind
//! that downloads (a ProxmoxImage, a VM's own `disks[].image`).

use std::time::Duration;

use pve_client::Client;

use crate::reconcile::inventory::ClusterView;

/// What a download needs and what the storage has, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    /// The size Proxmox reports for the URL (`query-url-metadata`).
    pub size: u64,
    /// The storage's free space on the node.
    pub avail: u64,
}

impl Room {
    /// Why the download named by `field` is not sent to `storage` on
    /// `node` (both sizes named; looked at again `again` later), or `None`
    /// when it fits.
    pub fn shortfall(
        &self,
        field: &str,
        storage: &str,
        node: &str,
        again: Duration,
    ) -> Option<String> {
        (self.size > self.avail).then(|| {
            format!(
                "{field}: Proxmox reports {} bytes for the file and storage {storage} on node {node} has {} bytes free; nothing is downloaded (free space there or choose another storage); checking again in {}s",
                self.size,
                self.avail,
                again.as_secs()
            )
        })
    }
}

/// The size Proxmox reports for `url` (one `GET
/// /nodes/{node}/query-url-metadata`, a `HEAD` from the node) and the
/// storage's free space as the cluster view shows it (no request), or
/// `None` when either is unknown: no `Content-Length`, a server that
/// refuses `HEAD`, or the query failing go on as before, to the download.
/// Asked only in a pass that would send the download.
pub async fn room(
    client: &Client,
    view: &ClusterView,
    node: &str,
    storage: &str,
    url: &str,
) -> Option<Room> {
    let seen = view.storages.get(node)?.get(storage)?;
    // A storage whose size the view does not tell (inactive) is not judged.
    let avail = (seen.total > 0).then(|| seen.total.saturating_sub(seen.used))?;
    match client.query_url_metadata(node, url, None).await {
        Ok(meta) => meta.size.map(|size| Room { size, avail }),
        Err(e) => {
            tracing::debug!(node, error = %e, "query-url-metadata failed; the download goes on");
            None
        }
    }
}
