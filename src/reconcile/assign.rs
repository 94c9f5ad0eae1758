//! The glue between a pass and the [`Scheduler`]: what the pass reads for
//! the scheduler (cluster view, active tasks, the controller's cache of
//! ProxmoxVMs), and what it tells it afterwards (dispatched, released,
//! taken). The decisions themselves are in [`super::schedule`].

use std::collections::BTreeSet;

use kube::ResourceExt;

use super::context::Context;
use super::observe::Sources;
use super::plan::{
    Heavy, KubeWrite, Needs, Observation, Plan, PveCall, SlotGrant, Step, TemplateLookup, VmState,
};
use super::providers::{ConfigKey, Connection};
use super::schedule::{Candidates, LabelCounts, RunningTask, vmids};
use super::wake::vm_ref;
use crate::api::{ProxmoxVM, vm::TaskAction};

/// A slot this pass took, to be accounted for after the step.
#[derive(Clone, Debug)]
pub struct Taken {
    node: String,
    kind: Heavy,
}

/// Places the VM and takes its slot, as `needs` asks, into `obs`.
/// Returns the slot taken, if any.
pub async fn before_plan(
    ctx: &Context,
    from: Sources<'_>,
    conn: &Connection,
    vm: &ProxmoxVM,
    needs: &Needs,
    obs: &mut Observation,
) -> Result<Option<Taken>, pve_client::Error> {
    let uid = vm.uid().unwrap_or_default();
    let template_node = match &obs.template {
        Some(TemplateLookup::Found { node, .. }) => Some(node.clone()),
        _ => None,
    };
    if let (Some(request), Some(vmid)) = (&needs.placement, needs.vmid) {
        let view = from.view().await?;
        let labelled = label_counts(ctx, &conn.key, vm, request.spread_by.as_ref());
        let candidates = Candidates {
            view: &view,
            labelled: &labelled,
            template_node: template_node.as_deref(),
        };
        obs.placement = Some(
            ctx.scheduler
                .place(&conn.key, &uid, vmid, request, candidates),
        );
    }
    // A slot is taken only when a create or clone may follow: the VM was
    // looked up and is not there.
    let Some(request) = needs.slot.as_ref().filter(|_| obs.vm == VmState::Absent) else {
        return Ok(None);
    };
    let Some(node) = request.node.clone().or(template_node) else {
        return Ok(None);
    };
    let running = running_heavy(from.client, &node).await;
    let (grant, woken) = ctx.scheduler.acquire_slot(
        &conn.key,
        &node,
        (&uid, &vm_ref(vm)),
        (request.kind, &conn.limits),
        running.as_deref(),
    );
    for other in woken {
        ctx.waker.wake(other);
    }
    let taken = matches!(grant, SlotGrant::Granted { .. }).then(|| Taken {
        node: node.clone(),
        kind: request.kind,
    });
    obs.slot = Some(grant);
    Ok(taken)
}

/// The heavy tasks the node lists as running (the shared, batched active
/// list); `None` when it cannot be read.
async fn running_heavy(client: &pve_client::Client, node: &str) -> Option<Vec<RunningTask>> {
    let listed = client.active_tasks(node).await.ok()?;
    Some(
        listed
            .into_iter()
            .filter(|e| e.is_running())
            .filter_map(|e| {
                let kind = match e.task_type.as_deref()? {
                    "qmcreate" => Heavy::Import,
                    "qmclone" => Heavy::Clone,
                    _ => return None,
                };
                Some(RunningTask { upid: e.upid, kind })
            })
            .collect(),
    )
}

/// For `SpreadByLabel`: per node, the other ProxmoxVMs of this config with
/// the same label value (by the node their status records).
fn label_counts(
    ctx: &Context,
    key: &ConfigKey,
    vm: &ProxmoxVM,
    spread_by: Option<&(String, String)>,
) -> LabelCounts {
    let mut counts = LabelCounts::new();
    let Some((label, value)) = spread_by else {
        return counts;
    };
    let me = vm.uid();
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

/// The step to carry out for the plan's: an allocation becomes the record
/// of the VMID the scheduler gave.
pub async fn resolve(
    ctx: &Context,
    from: Sources<'_>,
    conn: &Connection,
    vm: &ProxmoxVM,
    step: &Step,
) -> Result<Step, String> {
    if *step != Step::Kube(KubeWrite::AllocateVmid) {
        return Ok(step.clone());
    }
    let next_id = ctx
        .inventory
        .next_id(&conn.key, from.client)
        .await
        .map_err(|e| format!("cannot read the cluster's next-id range: {e}"))?;
    let range = vmids::range(conn.vmid_range, next_id);
    let view = from
        .view()
        .await
        .map_err(|e| format!("cannot list the cluster's VMIDs: {e}"))?;
    let mut used: BTreeSet<u32> = view.vmids.clone();
    used.extend(recorded_vmids(ctx, &conn.key));
    let uid = vm.uid().unwrap_or_default();
    let vmid = ctx
        .scheduler
        .allocate_vmid(&conn.key, &uid, range.clone(), &used)
        .ok_or_else(|| {
            format!(
                "no free VMID in {}..={} (every one is used on the cluster or by a ProxmoxVM)",
                range.start(),
                range.end()
            )
        })?;
    ctx.metrics.vmid_allocated();
    Ok(Step::Kube(KubeWrite::RecordExternalName {
        vmid,
        create_pending: true,
    }))
}

/// VMIDs recorded in the external-name annotation of ProxmoxVMs of this
/// config.
fn recorded_vmids(ctx: &Context, key: &ConfigKey) -> impl Iterator<Item = u32> {
    let key = key.clone();
    ctx.store.state().into_iter().filter_map(move |obj| {
        let vm = obj.0.as_ref().ok()?;
        if ConfigKey::of(vm) != key {
            return None;
        }
        vm.external_name()?.parse().ok()
    })
}

fn wake(ctx: &Context, who: Vec<super::wake::VmRef>) {
    for vm in who {
        ctx.waker.wake(vm);
    }
}

/// What the scheduler learns from the step and its outcome.
pub fn after_act(
    ctx: &Context,
    conn: &Connection,
    vm: &ProxmoxVM,
    plan: &Plan,
    taken: Option<&Taken>,
    started: Option<&str>,
    ok: bool,
) {
    let key = &conn.key;
    let uid = vm.uid().unwrap_or_default();
    if let Some(t) = taken {
        let heavy_dispatch = matches!(
            (&plan.step, t.kind),
            (Step::Pve(PveCall::CreateVm { .. }), Heavy::Import)
                | (Step::Pve(PveCall::CloneVm { .. }), Heavy::Clone)
        );
        match started.filter(|_| heavy_dispatch) {
            Some(upid) => ctx.scheduler.dispatched(key, &t.node, &uid, upid),
            None => wake(
                ctx,
                ctx.scheduler.release_slot(key, &t.node, &uid, &conn.limits),
            ),
        }
    }
    if let (Some(upid), Step::Pve(PveCall::CreateVm { node, .. })) = (started, &plan.step)
        && taken.is_none()
    {
        ctx.scheduler.light_task(key, node, upid);
    }
    // The heavy task this pass saw end gives its slot back at once.
    if let Some(done) = &plan.finished_task
        && let Some(task) = vm.status.as_ref().and_then(|s| s.at_provider.task.as_ref())
        && matches!(task.action, TaskAction::Create | TaskAction::Clone)
        && done.type_ == task.type_
    {
        wake(
            ctx,
            ctx.scheduler
                .release_slot(key, &task.node, &uid, &conn.limits),
        );
    }
    match &plan.step {
        Step::Kube(KubeWrite::AllocateVmid) if !ok => ctx.scheduler.release_vmid(key, &uid),
        Step::Kube(KubeWrite::ForgetExternalName) if ok => {
            if let Some(vmid) = vm.external_name().and_then(|v| v.parse().ok()) {
                ctx.scheduler.vmid_taken(key, vmid);
            }
            ctx.scheduler.release_vmid(key, &uid);
        }
        Step::Kube(KubeWrite::RemoveFinalizer) if ok => ctx.scheduler.forget(key, &uid),
        _ => {}
    }
}
