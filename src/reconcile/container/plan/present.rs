//! An existing container: waited for while PVE holds it, left alone when
//! it is not ours, else its drift corrected, its power state enforced, or
//! (on deletion) stopped and destroyed.

use std::time::Duration;

use pve_client::lxc::ContainerUpdate;

use super::{Ctx, Observation, Plan, Seen, Step, TASK_FALLBACK, WAIT, invalid_spec, reallocates};
use crate::api::condition::Reason;
use crate::api::meta::{self, ConfigUser};
use crate::api::vm::{ObservedState, PowerState};
use crate::reconcile::common::firewall::{self, FirewallNext};
use crate::reconcile::common::owner::{Ownership, Takeover, owner_of, takeover};
use crate::reconcile::common::restore;
use crate::reconcile::common::views::foreign_vnet;
use crate::reconcile::container::{late_init, render};

pub(super) fn plan(
    mut cx: Ctx<'_>,
    obs: &Observation,
    vmid: u32,
    seen: &Seen,
    deleting: bool,
    caps: meta::Capabilities,
) -> Plan {
    let lock = seen.config.lock().map(str::to_owned);
    cx.at().node = Some(seen.node.clone());
    cx.at().lock = lock.clone();
    cx.at().state = Some(if seen.running {
        ObservedState::Running
    } else {
        ObservedState::Stopped
    });
    cx.at().config = crate::reconcile::container::observed::config(&seen.config, seen.running);
    // While PVE creates it, the config holds only the lock: the marker
    // comes with the rest at the end of the create.
    if lock.as_deref() == Some("create") {
        cx.synced(
            true,
            Reason::WaitingForTask,
            "the container is being created (lock: create)",
        );
        cx.ready(false, Reason::Creating, "the container is being created");
        return cx.done(Step::Idle, WAIT);
    }
    let observed = seen.config.get("description");
    let ownership = owner_of(observed, &cx.id.uid);
    // Only observing: any container is described, none is changed (the
    // import flow's first step). Without Delete nothing is destroyed either.
    let observing = !caps.create && !caps.update && !caps.delete;
    match ownership {
        // Marked ours: a restore's proof has served.
        Ownership::Ours => cx.at().restored_vmid = None,
        Ownership::Foreign(_) | Ownership::Unmarked
            if !deleting && restored_here(&cx, vmid, caps.create) =>
        {
            return claim(cx, seen, vmid);
        }
        Ownership::Foreign(_) if reallocates(&mut cx, vmid, deleting, caps.create) => {
            // Another resource's container (of another provider config of
            // the same cluster) took the VMID allocated to this one.
            return cx.done(Step::ForgetVmid(vmid), Duration::ZERO);
        }
        Ownership::Foreign(_) | Ownership::Unmarked if observing => {}
        other => {
            // Not described: it is not this resource's.
            cx.at().config = Default::default();
            let guest = format!("container {vmid} on node {}", seen.node);
            let adopt = cx.ct.adopt_requested();
            let why = match takeover(&guest, &other, observed, adopt, &render::marker(cx.id)) {
                Takeover::Adopt(description) if caps.update && !deleting => {
                    return adoption(cx, seen, vmid, description);
                }
                Takeover::Adopt(_) => format!(
                    "{guest} was not created by this resource; taking it over ({}) writes its owner marker, which managementPolicies without Update do not allow",
                    meta::ADOPT
                ),
                Takeover::Refuse(why) => why,
            };
            return not_ours(cx, &why, deleting, obs.poll);
        }
    }
    if !deleting
        && cx.ct.spec.managed.late_initializes()
        && let Some(fields) =
            late_init::fields(&cx.ct.spec.for_provider, &cx.status.at_provider.config)
    {
        cx.synced(
            true,
            Reason::ReconcileSuccess,
            "filling unset spec.forProvider fields from the container (LateInitialize)",
        );
        return cx.done(Step::LateInitialize(Box::new(fields)), Duration::ZERO);
    }
    if let Some(lock) = lock {
        cx.synced(
            false,
            Reason::VmLocked,
            &format!("the container is locked ({lock})"),
        );
        return cx.done(Step::Idle, Duration::from_secs(5));
    }
    let node = seen.node.clone();
    if deleting {
        cx.ready(false, Reason::Deleting, "the container is being destroyed");
        if !caps.delete {
            return cx.done(Step::RemoveFinalizer, Duration::ZERO);
        }
        if seen.running {
            cx.synced(
                true,
                Reason::Deleting,
                "stopping the container to destroy it",
            );
            return cx.done(Step::Stop { node, vmid }, TASK_FALLBACK);
        }
        cx.synced(true, Reason::Deleting, "destroying the container");
        return cx.done(Step::Destroy { node, vmid }, TASK_FALLBACK);
    }
    // A NIC on another namespace's VNet: nothing of the spec is carried
    // out (a NIC changed onto it would put the container on another
    // team's network) until it names its own.
    let foreign: Vec<String> = (cx.ct.spec.for_provider.networks.iter().enumerate())
        .filter(|(_, nic)| obs.foreign_vnets.contains(&nic.bridge))
        .map(|(i, nic)| foreign_vnet(i, &nic.bridge))
        .collect();
    if !foreign.is_empty() {
        let why = format!(
            "refused: {}; nothing of the spec is changed on the container until it names its own",
            foreign.join("; ")
        );
        cx.synced(false, Reason::BridgeNotFound, &why);
        return cx.done(Step::Idle, obs.poll);
    }
    if let Some(view) = &obs.firewall {
        cx.at().firewall = Some(firewall::observed(view));
    }
    if let (true, Some(fw), Some(view)) = (
        caps.update,
        cx.ct.spec.for_provider.firewall.as_ref(),
        &obs.firewall,
    ) {
        let guest = format!("container {vmid}");
        match firewall::next(fw, view, &cx.id.namespace, &guest) {
            Some(FirewallNext::Write(doing, call)) => {
                cx.synced(true, Reason::ReconcileSuccess, &doing);
                return cx.done(Step::Firewall { node, vmid, call }, Duration::ZERO);
            }
            Some(not_yet @ (FirewallNext::Waiting(_) | FirewallNext::Refused(_))) => {
                // Nothing of the firewall is written, and the container
                // is not started without it. Waiting for a reference that
                // exists is not a failure (its Ready wakes the container).
                let (synced, why) = match not_yet {
                    FirewallNext::Waiting(why) => (true, why),
                    FirewallNext::Refused(why) | FirewallNext::Write(why, _) => (false, why),
                };
                cx.synced(synced, Reason::ReferenceNotReady, &why);
                cx.ready(false, Reason::Unavailable, &why);
                return cx.done(Step::Idle, obs.poll);
            }
            None => {}
        }
    }
    let spec = &cx.ct.spec.for_provider;
    let drift = match render::drift(spec, cx.id, &seen.config) {
        Ok(drift) => drift,
        Err(invalid) => return invalid_spec(cx, &invalid, obs.poll),
    };
    cx.at().unmanaged_drift = drift.unmanaged.clone();
    if let (true, Some(wanted), Some(member_of)) = (caps.update, &spec.pool, &obs.pool)
        && member_of.as_ref() != Some(wanted)
    {
        let note = match member_of {
            Some(from) => format!("moving the container from pool {from} into pool {wanted}"),
            None => format!("adding the container to pool {wanted}"),
        };
        cx.synced(true, Reason::ReconcileSuccess, &note);
        let step = Step::MovePool {
            pool: wanted.clone(),
            vmid,
            allow_move: member_of.is_some(),
        };
        return cx.done(step, Duration::ZERO);
    }
    if caps.update && !drift.update.is_empty() {
        let keys: Vec<&str> = drift
            .update
            .set
            .keys()
            .chain(drift.update.delete.iter())
            .map(String::as_str)
            .collect();
        let note = format!("correcting {}", keys.join(", "));
        cx.event(false, "Configured", note.clone());
        cx.synced(true, Reason::ReconcileSuccess, &note);
        return cx.done(
            Step::Configure {
                node,
                vmid,
                update: drift.update,
            },
            Duration::ZERO,
        );
    }
    let want_running = spec.power_state == PowerState::Running;
    if caps.update && want_running != seen.running {
        let step = if want_running {
            Step::Start { node, vmid }
        } else {
            Step::Shutdown { node, vmid }
        };
        cx.synced(true, Reason::ReconcileSuccess, "changing the power state");
        cx.ready(
            false,
            Reason::Unavailable,
            "not in the requested power state yet",
        );
        return cx.done(step, TASK_FALLBACK);
    }
    let message = if drift.unmanaged.is_empty() {
        String::new()
    } else {
        drift.unmanaged.join("; ")
    };
    cx.synced(true, Reason::ReconcileSuccess, &message);
    if want_running == seen.running {
        cx.ready(true, Reason::Available, "");
    } else {
        cx.ready(
            false,
            Reason::Unavailable,
            "not in the requested power state (Update not allowed)",
        );
    }
    cx.done(Step::Idle, obs.poll)
}

fn not_ours(mut cx: Ctx<'_>, why: &str, deleting: bool, poll: Duration) -> Plan {
    cx.synced(false, Reason::NotOwned, why);
    cx.ready(false, Reason::Unavailable, why);
    if deleting {
        return cx.done(Step::RemoveFinalizer, Duration::ZERO);
    }
    cx.done(Step::Idle, poll)
}

/// Whether this resource's own restore task made the container at `vmid`
/// (`status.atProvider.restoredVmid`, recorded with the task's end).
fn restored_here(cx: &Ctx<'_>, vmid: u32, create: bool) -> bool {
    let restoring = cx.ct.spec.for_provider.restore.is_some();
    restore::proven(restoring, create, cx.status.at_provider.restored_vmid, vmid)
}

/// The container this resource restored whose notes still carry the
/// archive's marker (or none): its owner marker is written over it, after
/// the notes the spec declares or the archive's, based on the digest read.
fn claim(mut cx: Ctx<'_>, seen: &Seen, vmid: u32) -> Plan {
    let note = format!("writing the owner marker of restored container {vmid}");
    cx.synced(true, Reason::ReconcileSuccess, &note);
    let description = restore::claimed_description(
        cx.ct.spec.for_provider.description.as_deref(),
        seen.config.get("description"),
        &render::marker(cx.id),
    );
    write_description(cx, seen, vmid, description)
}

/// Takes over an unmarked container the resource asked for: one config
/// update writing the owner marker after its notes, based on the digest
/// read. From the next pass on the container is this resource's, as if it
/// had created it.
fn adoption(mut cx: Ctx<'_>, seen: &Seen, vmid: u32, description: String) -> Plan {
    let note = format!(
        "taking over container {vmid} on node {} ({}=true): writing this resource's owner marker into its notes",
        seen.node,
        meta::ADOPT
    );
    cx.event(false, "Adopting", note.clone());
    cx.synced(true, Reason::ReconcileSuccess, &note);
    write_description(cx, seen, vmid, description)
}

/// One config update writing `description` (with the owner marker), based
/// on the digest read.
fn write_description(cx: Ctx<'_>, seen: &Seen, vmid: u32, description: String) -> Plan {
    let update = ContainerUpdate {
        set: [("description".to_owned(), description)].into(),
        delete: vec![],
        digest: seen.config.digest.clone(),
    };
    cx.done(
        Step::Configure {
            node: seen.node.clone(),
            vmid,
            update,
        },
        Duration::ZERO,
    )
}
