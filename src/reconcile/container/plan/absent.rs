//! A container that does not exist (yet, or any more): created, after its
//! OCI image is pulled; or, when the resource is being deleted, done.

use std::time::Duration;

use super::{Ctx, Observation, Plan, Step, TASK_FALLBACK, backoff, invalid_spec, limits};
use crate::api::condition::{ConditionStatus, ConditionType, Reason};
use crate::api::container::ContainerRestore;
use crate::api::image::ImageContent;
use crate::api::vm::ObservedState;
use crate::reconcile::common::grants::Placement;
use crate::reconcile::common::images::NamedImage;
use crate::reconcile::common::restore as shared;
use crate::reconcile::container::render;

/// How often a container waiting for its image looks again; the image's
/// progress wakes it sooner.
const IMAGE_RECHECK: Duration = Duration::from_secs(30);

/// When a create refused for a limit looks again (the node may grow, a
/// bridge may be added).
const LIMITS_RECHECK: Duration = Duration::from_secs(60);

/// The volume of the ProxmoxImage `name` on `node`, or why the container
/// waits (`ImageNotFound`, `ImageNotReady`) or is refused (`InvalidSpec`).
fn image_volume(
    cx: &Ctx<'_>,
    obs: &Observation,
    name: &str,
    node: &str,
) -> Result<String, (Reason, String)> {
    let ns = cx.ct.metadata.namespace.as_deref().unwrap_or_default();
    match &obs.image {
        None | Some(NamedImage::Unknown) => Err((
            Reason::ImageNotReady,
            format!("ProxmoxImage {ns}/{name} was not looked up yet"),
        )),
        Some(NamedImage::NotFound) => Err((
            Reason::ImageNotFound,
            format!(
                "ProxmoxImage {ns}/{name} does not exist; create it or fix template.image.name"
            ),
        )),
        Some(NamedImage::Found {
            content,
            deleting,
            volume,
            ready_on,
            shared_ready,
            summary,
        }) => {
            if *content != ImageContent::Vztmpl {
                return Err((
                    Reason::InvalidSpec,
                    format!(
                        "ProxmoxImage {ns}/{name} has content {}; a container is created only from an image of content vztmpl",
                        content.as_str()
                    ),
                ));
            }
            if *deleting {
                return Err((
                    Reason::ImageNotReady,
                    format!(
                        "ProxmoxImage {ns}/{name} is being deleted; a container that does not use it yet cannot start to"
                    ),
                ));
            }
            match volume {
                Some(volume) if *shared_ready || ready_on.contains(node) => Ok(volume.clone()),
                _ => Err((
                    Reason::ImageNotReady,
                    format!(
                        "waiting for ProxmoxImage {ns}/{name} to be ready on node {node} ({})",
                        summary.as_deref().unwrap_or("no location ready yet")
                    ),
                )),
            }
        }
    }
}

pub(super) fn plan(
    mut cx: Ctx<'_>,
    obs: &Observation,
    vmid: u32,
    deleting: bool,
    create: bool,
) -> Plan {
    cx.at().state = Some(ObservedState::Absent);
    cx.at().lock = None;
    cx.at().config = Default::default();
    if deleting {
        cx.ready(false, Reason::Deleting, "the container is gone");
        return cx.done(Step::RemoveFinalizer, Duration::ZERO);
    }
    if !create {
        cx.synced(
            false,
            Reason::ReconcileError,
            &format!("container {vmid} does not exist and the policies do not allow creating it"),
        );
        cx.ready(false, Reason::Unavailable, "the container does not exist");
        return cx.done(Step::Idle, obs.poll);
    }
    // A backoff after a failed create or pull is waited out.
    if let Some(f) = &cx.status.at_provider.last_failure {
        let wait = backoff(f.count);
        let since = Duration::try_from(cx.now.duration_since(f.at.0)).unwrap_or_default();
        if since < wait {
            return cx.done(Step::Idle, wait - since);
        }
    }
    let spec = &cx.ct.spec.for_provider;
    let node = match (&spec.node, &obs.placement) {
        (Some(node), _) => node.clone(),
        (None, Some(Placement::Chosen { node, .. })) => node.clone(),
        (None, Some(Placement::NoNode { why, .. })) => {
            let why = why.clone();
            cx.synced(false, Reason::ExceedsNodeLimits, &why);
            return cx.done(Step::Idle, Duration::from_secs(30));
        }
        (None, None) => {
            cx.synced(false, Reason::ReconcileError, "no node could be chosen");
            return cx.done(Step::Idle, Duration::from_secs(30));
        }
    };
    if let Some(why) = limits::not_allowed(spec, &obs.policy).or(obs.download_refused.clone()) {
        cx.synced(false, Reason::NotAllowed, &why);
        return cx.done(Step::Idle, obs.poll);
    }
    let host = obs.host.as_ref().filter(|h| h.node == node);
    if let Some((reason, why)) = host.and_then(|h| limits::on_node(spec, h)) {
        cx.synced(false, reason, &why);
        return cx.done(Step::Idle, LIMITS_RECHECK);
    }
    if let Some(restore) = &spec.restore {
        return restoring(cx, obs, (vmid, node), restore);
    }
    let from_image = match &spec.template.image {
        Some(image) => match image_volume(&cx, obs, &image.name, &node) {
            Ok(volume) => Some(volume),
            Err((reason, why)) => {
                // Recorded so the image brings its file to this node.
                cx.at().node = Some(node.clone());
                cx.synced(false, reason, &why);
                return cx.done(Step::Idle, IMAGE_RECHECK);
            }
        },
        None => None,
    };
    let Some(volume) = from_image.or_else(|| render::template_volume(&spec.template)) else {
        cx.synced(false, Reason::InvalidSpec, "template needs volume or oci");
        return cx.done(Step::Idle, obs.poll);
    };
    cx.ready(false, Reason::Creating, "the container is being created");
    if let Some(oci) = &spec.template.oci {
        match obs.template_present {
            Some(true) => {}
            Some(false) if obs.oci_unsupported.is_some() => {
                let version = obs.oci_unsupported.as_deref().unwrap_or_default();
                cx.synced(
                    false,
                    Reason::OciNeedsPve91,
                    &format!(
                        "pulling an OCI image (spec.forProvider.template.oci) needs oci-registry-pull, which Proxmox VE has since 9.1; the cluster runs {version}: upgrade it, or use template.volume or template.image; nothing is sent"
                    ),
                );
                return cx.done(Step::Idle, obs.poll);
            }
            Some(false) => {
                cx.at().node = Some(node.clone());
                cx.at().template_volume = Some(volume.clone());
                cx.synced(
                    true,
                    Reason::DownloadingImage,
                    &format!("pulling {} into {volume}", oci.reference),
                );
                return cx.done(
                    Step::Pull {
                        node,
                        storage: oci.storage.clone(),
                        pull: render::oci_pull(oci),
                    },
                    TASK_FALLBACK,
                );
            }
            None => {
                cx.synced(
                    false,
                    Reason::ReconcileError,
                    &format!("cannot tell whether {volume} is on {node}"),
                );
                return cx.done(Step::Idle, Duration::from_secs(10));
            }
        }
    }
    if let Some(Err((reason, why))) = &obs.password {
        let why = why.clone();
        cx.synced(false, *reason, &why);
        return cx.done(Step::Idle, Duration::from_secs(30));
    }
    match render::create(spec, cx.id, vmid, volume.clone()) {
        Ok(create) => {
            if let Some(why) = host.and_then(|h| limits::overprovisioned(spec, h)) {
                cx.set(
                    ConditionStatus::True,
                    ConditionType::Warning,
                    Reason::Overprovisioned,
                    &why,
                );
            }
            cx.at().node = Some(node.clone());
            cx.at().template_volume = Some(volume);
            cx.synced(
                true,
                Reason::Creating,
                &format!("creating container {vmid} on {node}"),
            );
            cx.done(
                Step::Create {
                    node,
                    create: Box::new(create),
                },
                TASK_FALLBACK,
            )
        }
        Err(invalid) => invalid_spec(cx, &invalid, obs.poll),
    }
}

/// The create of a container with `restore`: the archive (waited for while
/// its ProxmoxBackup is not Ready), then one `vzrestore` into the recorded
/// VMID, never with `force` (Proxmox refuses an existing VMID).
fn restoring(
    mut cx: Ctx<'_>,
    obs: &Observation,
    (vmid, node): (u32, String),
    restore: &ContainerRestore,
) -> Plan {
    // A proof from an earlier restore does not vouch for the next one.
    cx.at().restored_vmid = None;
    let source = shared::Source {
        archive: restore.archive.as_deref(),
        backup_ref: restore.backup_ref.as_ref().map(|r| r.name.as_str()),
    };
    let ns = cx.id.namespace.clone();
    let archive = match shared::archive(source, obs.backup.as_ref(), &ns, "the container") {
        Ok(archive) => archive,
        Err(why) => {
            cx.synced(false, Reason::BackupNotReady, &why);
            cx.ready(false, Reason::Creating, &why);
            return cx.done(Step::Idle, shared::BACKUP_RECHECK);
        }
    };
    cx.ready(false, Reason::Creating, "the container is being restored");
    cx.at().node = Some(node.clone());
    cx.synced(
        true,
        Reason::Creating,
        &format!("restoring {archive} into container {vmid} on {node}"),
    );
    let restore = render::restore(&cx.ct.spec.for_provider, cx.id, vmid, archive);
    cx.done(
        Step::Restore {
            node,
            restore: Box::new(restore),
        },
        TASK_FALLBACK,
    )
}
