//! A container that does not exist (yet, or any more): created, after its
//! OCI image is pulled; or, when the resource is being deleted, done.

use std::time::Duration;

use super::{Ctx, Observation, Plan, Step, TASK_FALLBACK, backoff, invalid_spec};
use crate::api::condition::Reason;
use crate::api::vm::ObservedState;
use crate::reconcile::container::render;
use crate::reconcile::plan::Placement;

pub(super) fn plan(
    mut cx: Ctx<'_>,
    obs: &Observation,
    vmid: u32,
    deleting: bool,
    create: bool,
) -> Plan {
    cx.at().state = Some(ObservedState::Absent);
    cx.at().lock = None;
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
    let Some(volume) = render::template_volume(&spec.template) else {
        cx.synced(false, Reason::InvalidSpec, "template needs volume or oci");
        return cx.done(Step::Idle, obs.poll);
    };
    cx.ready(false, Reason::Creating, "the container is being created");
    if let Some(oci) = &spec.template.oci {
        match obs.template_present {
            Some(true) => {}
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
    if let Some(Err(why)) = &obs.password {
        let why = why.clone();
        cx.synced(false, Reason::SecretNotFound, &why);
        return cx.done(Step::Idle, Duration::from_secs(30));
    }
    match render::create(spec, cx.id, vmid, volume.clone()) {
        Ok(create) => {
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
