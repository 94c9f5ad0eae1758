//! Before a download of a VM's disk image may be sent: what the host names
//! of its URLs resolve to, on the provider's side (see
//! [`crate::reconcile::downloads::checked`], no Proxmox request), and
//! whether the next one fits in its storage ([`rooms`]).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use super::Sources;
use crate::api::ProxmoxVM;
use crate::api::vm::TaskAction;
use crate::reconcile::common::tasks::backoff;
use crate::reconcile::downloads::{self, Room, Source};
use crate::reconcile::providers::Connection;
use crate::reconcile::runtime::metrics::Metrics;
use crate::reconcile::vm::plan::{Needs, Observation};

/// URL → why it is refused, for each disk image URL whose host name
/// resolves to an address the config's `downloadPolicy` refuses. Looked up
/// only when `downloading` (an image volume is missing: a download may be
/// sent in this pass).
pub async fn resolved_refusals(
    vm: &ProxmoxVM,
    connection: &Connection,
    downloading: bool,
    metrics: &Metrics,
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
            metrics,
        )
        .await
        {
            refused.insert(download.url.to_owned(), why);
        }
    }
    refused
}

/// URL → the size Proxmox reports for it and the storage's free space (see
/// [`downloads::room`]), for the disk image the plan would download next:
/// the first whose volume is missing on its node. Asked only in a pass that
/// may send it: no task in flight, no download backoff to wait out, its URL
/// not refused; one `GET /nodes/{node}/query-url-metadata`, the free space
/// from the shared cluster view.
pub async fn rooms(
    vm: &ProxmoxVM,
    from: &Sources<'_>,
    needs: &Needs,
    observed: &Observation,
    now: Timestamp,
) -> BTreeMap<String, Room> {
    let mut rooms = BTreeMap::new();
    let status = vm.status.as_ref().map(|s| &s.at_provider);
    let backing_off = status
        .and_then(|s| s.last_failure.as_ref())
        .is_some_and(|f| f.action == TaskAction::DownloadImage && now < f.at.0 + backoff(f.count));
    if status.is_some_and(|s| s.task.is_some()) || backing_off {
        return rooms;
    }
    let next = vm
        .spec
        .for_provider
        .disks
        .iter()
        .filter_map(|d| d.image.as_ref())
        .filter_map(|image| Some((image.download()?, image.volume()?)))
        .find(|(_, volume)| observed.images.get(volume) == Some(&false));
    let Some((download, volume)) = next else {
        return rooms;
    };
    let Some(at) = needs.images.iter().find(|i| i.volume == volume) else {
        return rooms;
    };
    if observed.resolved_refusals.contains_key(download.url) {
        return rooms;
    }
    let Ok(view) = from.view().await else {
        return rooms;
    };
    if let Some(room) =
        downloads::room(from.client, &view, &at.node, &at.storage, download.url).await
    {
        rooms.insert(download.url.to_owned(), room);
    }
    rooms
}
