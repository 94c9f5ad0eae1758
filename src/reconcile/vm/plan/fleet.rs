//! Clones of a ProxmoxImage's template (`clone.image`): which node's
//! template is cloned, whether the clone is linked, and what the VM waits
//! for until the template is there.
//!
//! The image's templates are written into its status by the fleet
//! controller (`reconcile::fleet`); the VM reads them from the
//! controller's cache of images ([`ImageLookup`]). Once the template on
//! the VM's node is ready, its VMID is looked up like `clone.templateVmid`
//! and the clone goes through the same path (slot, finalizer, task gate),
//! with every guarantee of that path.

use super::context::Ctx;
use super::decision::{Decision, Say};
use super::input::ImageLookup;
use super::output::Idle;
use crate::api::Reason;

/// What a clone of an image's template does next.
#[derive(Debug)]
pub(super) enum ImageClone {
    /// The template on the VM's node is ready: clone it (linked when
    /// `linkable` and the spec asks for a linked clone).
    Clone {
        /// The template's clones can be linked.
        linkable: bool,
    },
    /// No node is placed yet and the template is ready on an allowed
    /// node: placement picks one of those (see `pass::reserve`).
    Place,
    /// Nothing to clone yet; the image's status changing wakes the VM.
    Wait(Box<Decision>),
}

/// The next step of a clone of `image`'s template.
pub(super) fn image_clone(ctx: &Ctx, image: &str) -> ImageClone {
    let resource = format!("{}/{image}", ctx.id.namespace);
    let wait = |reason: Reason, why: String| {
        // Woken by the image's status changing; the resync is the fallback.
        let say = Say::synced(reason, why);
        ImageClone::Wait(Box::new(Decision::new(
            Idle::Wait,
            Some(ctx.resync_interval()),
            say,
        )))
    };
    let templates = match &ctx.obs.image {
        Some(ImageLookup::Templates(templates)) => templates,
        Some(ImageLookup::NotFound) | None => {
            return wait(
                Reason::ImageNotFound,
                format!(
                    "ProxmoxImage {resource} does not exist; the VM is cloned from its template once it exists and the template is ready"
                ),
            );
        }
        Some(ImageLookup::NoTemplate) => {
            return wait(
                Reason::ImageHasNoTemplate,
                format!(
                    "ProxmoxImage {resource} has no spec.forProvider.template, so there is nothing to clone: give it one, or import the image with disks[].image instead"
                ),
            );
        }
        Some(ImageLookup::Deleting) => {
            return wait(
                Reason::ImageNotReady,
                format!("ProxmoxImage {resource} is being deleted; nothing is cloned from it"),
            );
        }
    };
    let lookup = ctx.obs.image.as_ref();
    match ctx.placed_node() {
        Some(node) => {
            if let Some(template) = lookup.and_then(|l| l.ready_on(&node)) {
                return ImageClone::Clone {
                    linkable: template.linkable,
                };
            }
            if templates.iter().any(|t| t.node == node) {
                wait(
                    Reason::TemplateNotReady,
                    format!(
                        "the template of ProxmoxImage {resource} on node {node} is not ready yet; cloned as soon as it is"
                    ),
                )
            } else {
                wait(
                    Reason::ImageNotReady,
                    format!(
                        "ProxmoxImage {resource} has no template on node {node} yet (its file is not there yet, or the node is not one of the image's nodes)"
                    ),
                )
            }
        }
        None => {
            let ready = lookup.map(ImageLookup::ready_nodes).unwrap_or_default();
            if ready.iter().any(|n| ctx.allowed(n)) {
                return ImageClone::Place;
            }
            if templates.iter().any(|t| ctx.allowed(&t.node)) {
                wait(
                    Reason::TemplateNotReady,
                    format!(
                        "no template of ProxmoxImage {resource} is ready on an allowed node yet; the VM is placed on one as soon as one is"
                    ),
                )
            } else {
                wait(
                    Reason::ImageNotReady,
                    format!(
                        "ProxmoxImage {resource} has no template on an allowed node yet (its file is not there yet, or none of its nodes is allowed)"
                    ),
                )
            }
        }
    }
}

/// Whether a clone is a full copy: asked for (`clone.full`), or its
/// template's clones cannot be linked (its storage cannot snapshot, or the
/// image says `template.linked: false`).
pub(super) fn full(asked: bool, linkable: bool) -> bool {
    asked || !linkable
}
