//! Disks that name a ProxmoxImage (`disks[].image.name`): the create waits
//! until the image's file is ready on the VM's node, then imports it
//! (`import-from`) as `importFrom` does.
//!
//! Placement needs nothing of its own: the image controller adds the node
//! a VM is placed on (recorded in its status before anything is created)
//! to the image's locations, so wherever the VM lands the file comes
//! there (on a shared storage it is everywhere at once).

use std::time::Duration;

use super::context::Ctx;
use super::decision::{Decision, Say};
use super::input::NamedImage;
use super::output::Idle;
use crate::api::Reason;
use crate::api::image::ImageContent;

/// How often a VM waiting for an image looks again; the image's progress
/// wakes it sooner (the image controller wakes the VMs that name it).
const IMAGE_RECHECK: Duration = Duration::from_secs(30);

/// Waits for the first named image not ready on `node`; `None` when all are.
pub(super) fn named(ctx: &Ctx, node: &str) -> Option<Decision> {
    for (slot, name) in ctx
        .spec
        .disks
        .iter()
        .filter_map(|d| Some((d.slot.as_str(), d.image.as_ref()?.name.as_deref()?)))
    {
        let ns = ctx.vm.metadata.namespace.as_deref().unwrap_or_default();
        let wait = |reason: Reason, why: String, after: Duration| {
            Some(Decision::new(
                Idle::Wait,
                Some(after),
                Say::synced(reason, why),
            ))
        };
        match ctx.obs.named_images.get(name) {
            None | Some(NamedImage::Unknown) => {
                return wait(
                    Reason::ImageNotReady,
                    format!("disk {slot}: ProxmoxImage {ns}/{name} was not looked up yet"),
                    ctx.timing.poll_interval,
                );
            }
            Some(NamedImage::NotFound) => {
                return wait(
                    Reason::ImageNotFound,
                    format!(
                        "disk {slot}: ProxmoxImage {ns}/{name} does not exist; create it or fix disks[].image.name"
                    ),
                    IMAGE_RECHECK,
                );
            }
            Some(NamedImage::Found {
                content,
                deleting,
                ready_on,
                shared_ready,
                summary,
                volume,
            }) => {
                if *content != ImageContent::Import {
                    return wait(
                        Reason::InvalidSpec,
                        format!(
                            "disk {slot}: ProxmoxImage {ns}/{name} has content {}; a disk imports only an image of content import",
                            content.as_str()
                        ),
                        IMAGE_RECHECK,
                    );
                }
                if *deleting {
                    // A VM that has not started to use the image never
                    // starts once it is being deleted (its file goes).
                    return wait(
                        Reason::ImageNotReady,
                        format!(
                            "disk {slot}: ProxmoxImage {ns}/{name} is being deleted; a VM that does not use it yet cannot start to"
                        ),
                        IMAGE_RECHECK,
                    );
                }
                let ready = (*shared_ready || ready_on.contains(node)) && volume.is_some();
                if !ready {
                    return wait(
                        Reason::ImageNotReady,
                        format!(
                            "disk {slot}: waiting for ProxmoxImage {ns}/{name} to be ready on node {node} ({})",
                            summary.as_deref().unwrap_or("no location ready yet")
                        ),
                        IMAGE_RECHECK,
                    );
                }
            }
        }
    }
    None
}
