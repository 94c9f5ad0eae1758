//! What the host names of a VM's disk image URLs resolve to, on the
//! provider's side, before a download of one may be sent (see
//! [`crate::reconcile::downloads::checked`]): no Proxmox request.

use std::collections::BTreeMap;

use crate::api::ProxmoxVM;
use crate::reconcile::downloads::{self, Source};
use crate::reconcile::providers::Connection;

/// URL → why it is refused, for each disk image URL whose host name
/// resolves to an address the config's `downloadPolicy` refuses. Looked up
/// only when `downloading` (an image volume is missing: a download may be
/// sent in this pass).
pub async fn resolved_refusals(
    vm: &ProxmoxVM,
    connection: &Connection,
    downloading: bool,
) -> BTreeMap<String, String> {
    let mut refused = BTreeMap::new();
    if !downloading {
        return refused;
    }
    for (i, disk) in vm.spec.for_provider.disks.iter().enumerate() {
        let Some(download) = disk.image.as_ref().and_then(|image| image.download()) else {
            continue;
        };
        // The host as written is judged by the plan (with the VM's node);
        // here only what it resolves to.
        if let Some(why) = downloads::checked(
            connection.downloads.as_ref(),
            &format!("spec.forProvider.disks[{i}].image.url"),
            Source::Url(download.url),
            &[],
            &connection.endpoint_host,
        )
        .await
        {
            refused.insert(download.url.to_owned(), why);
        }
    }
    refused
}
