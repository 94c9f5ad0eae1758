//! Reservations: every decision the scheduler makes for a pass (a VMID,
//! a node, an import or clone slot) is made before the plan, from what the
//! pass observed, and written into the plan's [`Observation`] for the plan
//! to use as it is. After the step, [`Reserved::settle`] tells the scheduler
//! what became of them. The decisions themselves are in [`crate::reconcile::schedule`].

use std::borrow::Cow;

use kube::ResourceExt;

use pve_client::TaskListEntry;

use super::observe::Sources;
use super::observe::known::Known;
use crate::api::vm::VmRef;
use crate::api::{ProxmoxVM, vm::TaskAction};
use crate::reconcile::context::Context;
use crate::reconcile::identity::Identity;
use crate::reconcile::managed::reserve::allocate_vmid;
use crate::reconcile::providers::{ConfigKey, Connection};
use crate::reconcile::runtime::memory::Kept;
use crate::reconcile::schedule::{Candidates, LabelCounts, RunningTask, placement};
use crate::reconcile::vm::plan::{
    ActFailure, Done, Heavy, HostView, KubeWrite, Needs, Observation, Placement, Plan, PveCall,
    SlotGrant, Step, TemplateLookup, VmState, VmidGrant,
};

/// What the scheduler reserved for one pass, to be settled after its step.
#[must_use = "a reservation is settled after the step"]
#[derive(Debug)]
pub struct Reserved {
    /// The VMID reserved for the resource to record.
    vmid: Option<u32>,
    /// The slot granted for a create or clone.
    slot: Option<Slot>,
}

/// A slot granted to this pass.
#[derive(Clone, Debug)]
struct Slot {
    node: String,
    kind: Heavy,
}

/// Reserves what `needs` asks for, into `obs`: a VMID, a node, a slot.
pub async fn reserve(
    ctx: &Context,
    from: Sources<'_>,
    conn: &Connection,
    id: &Identity,
    needs: &Needs,
    obs: &mut Observation,
) -> Result<Reserved, pve_client::Error> {
    let mut reserved = Reserved::none();
    if needs.allocate_vmid {
        let grant = allocate_vmid(ctx, conn, id).await;
        if let VmidGrant::Reserved(vmid) = grant {
            reserved.vmid = Some(vmid);
            // Free on the cluster as just listed: no VM to look up until a
            // create is sent (which Proxmox refuses if the VMID was taken
            // meanwhile).
            // (No look of a guest another task could change: the mark is
            // now's.)
            ctx.memory.remember(
                &id.uid,
                &conn.key,
                Some(Kept::new(Known::absent(vmid))),
                ctx.memory.mark(),
            );
        }
        obs.allocated_vmid = Some(grant);
    }
    let template_node = match &obs.template {
        Some(TemplateLookup::Found { node, .. }) => Some(node.clone()),
        Some(
            TemplateLookup::NotFound | TemplateLookup::Ambiguous(_) | TemplateLookup::Coming { .. },
        )
        | None => None,
    };
    // A clone of an image's template goes where the template is ready;
    // with none ready on an allowed node there is nothing to place yet.
    let request = match (&needs.placement, &obs.image) {
        (Some(request), Some(image)) => {
            placement::among(request, &image.ready_nodes()).map(Cow::Owned)
        }
        (request, None) => request.as_ref().map(Cow::Borrowed),
        (None, Some(_)) => None,
    };
    if let (Some(request), Some(vmid)) = (request, needs.vmid) {
        let view = from.view().await?;
        let labelled = label_counts(ctx, &conn.key, id, request.spread_by.as_ref());
        let candidates = Candidates {
            view: &view,
            labelled: &labelled,
            template_node: template_node.as_deref(),
        };
        obs.placement = Some(
            ctx.scheduler
                .place(&conn.key, &id.uid, vmid, &request, candidates),
        );
    }
    obs.foreign_vnets = ctx.foreign_vnets(&id.namespace);
    if needs.host {
        obs.host = host(
            from,
            vm_spec_node(needs, obs, template_node.as_deref()),
            obs,
        )
        .await?;
        if let Some(host) = &mut obs.host {
            host.foreign_vnets = ctx.foreign_vnets(&id.namespace);
        }
    }
    // A slot is taken only when a create or clone may follow: the VM was
    // looked up and is not there.
    let Some(request) = needs.slot.as_ref().filter(|_| obs.vm == VmState::Absent) else {
        return Ok(reserved);
    };
    // An import's node: recorded, or placed this pass (see
    // `Ctx::creates_where_placed`); a clone's: its template's.
    let placed = match (&obs.placement, request.kind) {
        (Some(Placement::Chosen { node, .. }), Heavy::Import) => Some(node.clone()),
        (_, _) => None,
    };
    let Some(node) = request.node.clone().or(placed).or(template_node) else {
        return Ok(reserved);
    };
    let running = running_heavy(from.client, &node).await;
    let (grant, woken) = ctx.scheduler.acquire_slot(
        &conn.key,
        &node,
        (&id.uid, &id.object_ref()),
        (request.kind, &conn.limits),
        running.as_deref(),
    );
    wake(ctx, woken);
    if matches!(grant, SlotGrant::Granted { .. }) {
        reserved.slot = Some(Slot {
            node: node.clone(),
            kind: request.kind,
        });
    }
    obs.slot = Some(grant);
    Ok(reserved)
}

/// The node the VM is on or is to be created on: where it is, else
/// `spec.node` or its recorded placement, else what placement chose, else
/// (a clone) the template's node.
fn vm_spec_node(needs: &Needs, obs: &Observation, template_node: Option<&str>) -> Option<String> {
    match &obs.vm {
        VmState::Present(vm) => Some(vm.node.clone()),
        VmState::Absent => needs
            .active_tasks_on
            .clone()
            .or_else(|| match &obs.placement {
                Some(Placement::Chosen { node, .. }) => Some(node.clone()),
                Some(Placement::NoNode { .. }) | None => None,
            })
            .or_else(|| template_node.map(str::to_owned)),
        // Not looked at this pass (its task runs): where it was placed.
        VmState::Unknown => needs.active_tasks_on.clone(),
    }
}

/// What `node` has, from the shared cluster view (for an existing VM, the
/// last one read: no request); for a VM still to be created, its bridges too (read once per node and interval, see
/// [`crate::reconcile::inventory::Inventory::bridges`]). Bridges that
/// cannot be read are `None`: the create is not held up for them.
async fn host(
    from: Sources<'_>,
    node: Option<String>,
    obs: &Observation,
) -> Result<Option<HostView>, pve_client::Error> {
    let Some(node) = node else { return Ok(None) };
    // A create is checked against a view of at most one poll interval; an
    // existing VM (the thin-storage Warning) takes the last one read by
    // anyone, and costs no request.
    let view = match obs.vm {
        VmState::Absent => from.view().await?,
        VmState::Present(_) | VmState::Unknown => match from.inventory.last_view(from.key).await {
            Some(view) => view,
            None => return Ok(None),
        },
    };
    let Some(seen) = view.nodes.iter().find(|n| n.name == node) else {
        return Ok(None);
    };
    let bridges = match obs.vm {
        VmState::Absent => match from.inventory.bridges(from.key, from.client, &node).await {
            Ok(bridges) => Some(bridges.as_ref().clone()),
            Err(e) => {
                tracing::warn!(%node, error = %e, "cannot read the node's bridges; NICs are not checked against them");
                None
            }
        },
        VmState::Present(_) | VmState::Unknown => None,
    };
    Ok(Some(HostView {
        cpus: seen.cpus,
        memory: seen.max_memory,
        storages: view.storages.get(&node).cloned().unwrap_or_default(),
        untagged_vnets: bridges.as_ref().map(|b| b.1.clone()).unwrap_or_default(),
        bridges: bridges.map(|b| b.0),
        foreign_vnets: Default::default(),
        node,
    }))
}

/// The heavy tasks the node lists as running (the shared, batched active
/// list); `None` when it cannot be read.
async fn running_heavy(client: &pve_client::Client, node: &str) -> Option<Vec<RunningTask>> {
    // A task dispatched since the list was fetched holds its slot anyway
    // (see `schedule::slots`): any recent list will do.
    let listed = client.latest_tasks(node).await.ok()?;
    Some(
        listed
            .iter()
            .filter_map(TaskListEntry::running_upid)
            .filter_map(|upid| {
                let kind = Heavy::of_task(upid.task_type())?;
                Some(RunningTask { upid, kind })
            })
            .collect(),
    )
}

/// For `SpreadByLabel`: per node, the other ProxmoxVMs of this config with
/// the same label value (by the node their status records).
fn label_counts(
    ctx: &Context,
    key: &ConfigKey,
    id: &Identity,
    spread_by: Option<&(String, String)>,
) -> LabelCounts {
    let mut counts = LabelCounts::new();
    let Some((label, value)) = spread_by else {
        return counts;
    };
    let me = Some(id.uid.clone());
    for other in ctx.store.state() {
        let Ok(other) = &other.0 else { continue };
        let same = other
            .labels()
            .get(label)
            .map(String::as_str)
            .unwrap_or_default()
            == value;
        if other.uid() == me || !same || ConfigKey::of(other) != *key {
            continue;
        }
        if let Some(node) = other
            .status
            .as_ref()
            .and_then(|s| s.at_provider.node.clone())
        {
            *counts.entry(node).or_default() += 1;
        }
    }
    counts
}

fn wake(ctx: &Context, who: Vec<VmRef>) {
    for vm in who {
        ctx.waker.wake(vm);
    }
}

impl Reserved {
    /// Nothing reserved (the pass could not observe).
    pub fn none() -> Self {
        Self {
            vmid: None,
            slot: None,
        }
    }

    /// Tells the scheduler what became of this pass's reservations and
    /// what the step did: a granted slot is taken by the task it started or
    /// given back; a reserved VMID is kept once recorded, else given back;
    /// a heavy task the pass saw end frees its slot.
    pub fn settle(
        self,
        ctx: &Context,
        conn: &Connection,
        (vm, id): (&ProxmoxVM, &Identity),
        plan: &Plan,
        outcome: &Result<Done, ActFailure>,
    ) {
        let key = &conn.key;
        let uid = id.uid.as_str();
        let started = match outcome {
            Ok(Done::Started(upid)) => Some(upid),
            Ok(Done::Nothing | Done::Written(_)) | Err(_) => None,
        };
        let ok = outcome.is_ok();
        if let Some(slot) = &self.slot {
            let dispatched_heavy = match (&plan.step, slot.kind) {
                (Step::Pve(PveCall::CreateVm { .. }), Heavy::Import)
                | (Step::Pve(PveCall::CloneVm { .. }), Heavy::Clone) => started,
                (
                    Step::Pve(_)
                    | Step::Kube(_)
                    | Step::Ha(_)
                    | Step::Firewall(_)
                    | Step::Pool(_)
                    | Step::Idle(_),
                    _,
                ) => None,
            };
            match dispatched_heavy {
                Some(upid) => ctx.scheduler.dispatched(key, &slot.node, uid, upid),
                None => wake(
                    ctx,
                    ctx.scheduler
                        .release_slot(key, &slot.node, uid, &conn.limits),
                ),
            }
        }
        if let (Some(upid), Step::Pve(PveCall::CreateVm { node, .. })) = (started, &plan.step)
            && self.slot.is_none()
        {
            ctx.scheduler.light_task(key, node, upid);
        }
        // The heavy task this pass saw end gives its slot back at once:
        // consumed, or left to the next pass while its creation is recorded
        // first (`plan::converge::record_creation_first`; the task is still
        // recorded, the step records the creation).
        let ended = match (&plan.finished_task, &plan.step) {
            (Some(done), _) => Some(done.type_.as_str()),
            (None, Step::Kube(KubeWrite::RecordCreateSucceeded)) => plan
                .status
                .at_provider
                .task
                .as_ref()
                .map(|t| t.type_.as_str()),
            (None, _) => None,
        };
        if let Some(ended) = ended
            && let Some(task) = vm.status.as_ref().and_then(|s| s.at_provider.task.as_ref())
            && matches!(task.action, TaskAction::Create | TaskAction::Clone)
            && ended == task.type_
        {
            wake(
                ctx,
                ctx.scheduler
                    .release_slot(key, &task.node, uid, &conn.limits),
            );
        }
        if let Some(vmid) = self.vmid {
            let recorded = ok
                && plan.step
                    == Step::Kube(KubeWrite::RecordExternalName {
                        vmid,
                        create_pending: true,
                    });
            if !recorded {
                ctx.scheduler.release_vmid(key, uid);
            }
        }
        if ok && plan.step == Step::Kube(KubeWrite::ForgetExternalName) {
            if let Some(vmid) = vm.external_name().and_then(|v| v.parse().ok()) {
                ctx.scheduler.vmid_taken(key, vmid);
            }
            ctx.scheduler.release_vmid(key, uid);
        }
        if ok && plan.step == Step::Kube(KubeWrite::RemoveFinalizer) {
            ctx.scheduler.forget(key, uid);
        }
    }
}
