//! One ProxmoxContainer pass, as one line: hold → connect → observe and
//! reserve → plan → act → settle → report (status, events) → requeue.
//!
//! Every decision is the pure [`plan`]'s or the shared scheduler's (a VMID,
//! a node), made before the plan. The observation asks Proxmox only what
//! the next decision needs: the recorded task (batched per node by the
//! client), the container's config and status, the node's active tasks
//! (shared), and before a create from an OCI image the storage's
//! templates.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use pve_client::lxc::ContainerConfig;
use pve_client::{ErrorClass, TaskObservation, TaskOutcome, Upid};

use super::plan::{self, Container, Observation, Outcome, Plan, Seen, Step, TaskSeen};
use super::{connection, known, render};
use crate::api::condition::Reason;
use crate::api::meta;
use crate::api::rules::PASSWORD_MAX_BYTES;
use crate::api::vm::PlacementPolicy;
use crate::api::{ProxmoxContainer, ProxmoxContainerStatus};
use crate::reconcile::common::grants::{Placement, PlacementRequest};
use crate::reconcile::common::look::Depth;
use crate::reconcile::common::views::HostView;
use crate::reconcile::common::{finalizer, provider};
use crate::reconcile::context::Context;
use crate::reconcile::downloads;
use crate::reconcile::error::{Error, is_forbidden, is_not_found};
use crate::reconcile::identity::Identity;
use crate::reconcile::inventory::ClusterView;
use crate::reconcile::managed::envelope::{self, run_held};
use crate::reconcile::managed::guest_firewall;
use crate::reconcile::managed::reserve::allocate_vmid;
use crate::reconcile::managed::status::apply_on;
use crate::reconcile::managed::{connection_secret, fresh, pools};
use crate::reconcile::providers::{ConfigKey, Connection, secret_value};
use crate::reconcile::runtime::memory::Kept;
use crate::reconcile::runtime::queue::turns::Turn;
use crate::reconcile::runtime::shards::Hold;
use crate::reconcile::schedule::{Candidates, LabelCounts};

/// Task types of a container's own tasks (pve-container), which hold any
/// other dispatch while the node lists one as running.
const CONTAINER_TASKS: &[&str] = &[
    "vzcreate",
    "vzrestore",
    "vzstart",
    "vzstop",
    "vzshutdown",
    "vzreboot",
    "vzdestroy",
    "vzmigrate",
    "vzdump",
];

/// The controller's reconcile function for ProxmoxContainers.
pub async fn reconcile(
    obj: Arc<DeserializeGuard<ProxmoxContainer>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let cached = match &obj.0 {
        Ok(ct) => ct,
        // Written around the schema: nothing can be decided from it.
        Err(e) => {
            tracing::warn!(error = %e, "unreadable ProxmoxContainer");
            return Ok(Action::await_change());
        }
    };
    let Some(id) = Identity::of(&cached.metadata) else {
        return Ok(Action::await_change());
    };
    // As this replica last wrote it (the cache may lag that write).
    let api: Api<ProxmoxContainer> = Api::namespaced(ctx.kube.clone(), &id.namespace);
    let ct = match fresh::current(cached, &api, &ctx.memory).await {
        Ok(Some(ct)) => ct,
        Ok(None) => return Ok(Action::await_change()),
        Err(e) => {
            tracing::warn!(container = %id, error = %e, "cannot read the resource");
            return Ok(Action::requeue(ctx.memory.failed(&id.uid)));
        }
    };
    let ct = &ct;
    let hold = match envelope::hold(&ctx, &ConfigKey::of(ct)) {
        Ok(hold) => hold,
        Err(action) => {
            // Not run here now (another replica holds its config, or the
            // configs are not listed yet): a turn kept for it goes on.
            ctx.queue.forget(&id.uid);
            return Ok(action);
        }
    };
    // A pass that must wait ends here; the container is woken when its
    // turn comes.
    let waker = ctx.container_waker.clone();
    let me = ObjectRef::new(&id.name).within(&id.namespace);
    let _admitted = match ctx
        .queue
        .turn(&id.uid, false, &ctx.metrics, move || waker.wake(me))
        .await
    {
        Turn::Now(admitted) => admitted,
        Turn::Later => return Ok(Action::await_change()),
    };
    let span = tracing::info_span!("reconcile", container = %id);
    let result = run_held(
        &hold,
        tracing::Instrument::instrument(pass(ct, &id, &ctx, &hold), span),
    )
    .await;
    // A pass ran: a reconcile request is answered.
    let result = match result {
        Ok(requeue) => answer(ct, &id, &ctx, &hold).await.map(|()| requeue),
        failed => failed,
    };
    match result {
        Ok(requeue) => {
            ctx.memory.succeeded(&id.uid);
            Ok(Action::requeue(requeue))
        }
        // Another replica holds the config now: gaining it again wakes
        // this resource.
        Err(Error::Fenced { .. }) => Ok(Action::await_change()),
        Err(e) => {
            tracing::warn!(container = %id, error = %e, "pass failed");
            Ok(Action::requeue(ctx.memory.failed(&id.uid)))
        }
    }
}

/// Echoes a `crossplane.io/reconcile-requested-at` request once a pass ran.
async fn answer(
    ct: &ProxmoxContainer,
    id: &Identity,
    ctx: &Context,
    hold: &Hold,
) -> Result<(), Error> {
    ctx.shards.fence(hold)?;
    let api = Api::<ProxmoxContainer>::namespaced(ctx.kube.clone(), &id.namespace);
    crate::reconcile::managed::status::echo_request(&api, ct).await
}

/// Failed passes are requeued by [`reconcile`] itself.
pub fn error_policy(
    _obj: Arc<DeserializeGuard<ProxmoxContainer>>,
    _error: &Error,
    _ctx: Arc<Context>,
) -> Action {
    Action::requeue(Duration::from_secs(10))
}

/// Why the observation stopped short.
enum Failure {
    Kube(kube::Error),
    /// Proxmox could not be asked: reported on the resource, not a
    /// controller error.
    Pve(pve_client::Error),
}

impl From<kube::Error> for Failure {
    fn from(e: kube::Error) -> Self {
        Self::Kube(e)
    }
}

impl From<pve_client::Error> for Failure {
    fn from(e: pve_client::Error) -> Self {
        Self::Pve(e)
    }
}

async fn pass(
    ct: &ProxmoxContainer,
    id: &Identity,
    ctx: &Context,
    hold: &Hold,
) -> Result<Duration, Error> {
    // Connecting may mark the config in use (a write to it).
    ctx.shards.fence(hold)?;
    // A config or Secret the RBAC does not let it read: said as for every kind.
    let connection = provider::refused_as_state(ctx.providers.connect(ct).await)?;
    // The config exists after all: its holder takes over.
    if hold.report_only() && connection.is_ok() {
        return Err(Error::Fenced {
            config: hold.key().to_string(),
        });
    }
    let now = Timestamp::now();
    let task_timeout = match &connection {
        Ok(conn) => conn.timing.task_timeout,
        Err(_) => crate::api::provider_config::Timing::default().task_timeout,
    };
    let (plan, conn, password) = match connection {
        Ok(conn) => match observe_and_plan(ct, id, ctx, &conn, now).await {
            Ok((plan, password)) => (plan, Some(conn), password),
            // A Secret the spec names that the RBAC does not let it read.
            Err(Failure::Kube(e)) if is_forbidden(&e) => {
                let mut obs = Observation::unobserved(ctx.providers.default_resync());
                obs.connection = provider::refused_as_state::<()>(Err(e.into()))?;
                (plan::plan(ct, id, &obs, now), Some(conn), None)
            }
            Err(Failure::Kube(e)) => return Err(e.into()),
            Err(Failure::Pve(e)) => {
                let mut obs = Observation::unobserved(ctx.providers.default_resync());
                obs.proxmox = Some(e.to_string());
                (plan::plan(ct, id, &obs, now), Some(conn), None)
            }
        },
        Err(state) => {
            let mut obs = Observation::unobserved(ctx.providers.default_resync());
            obs.connection = Err(state);
            (plan::plan(ct, id, &obs, now), None, None)
        }
    };
    let outcome = match ctx.shards.fence(hold) {
        Ok(()) => Ok(act(ct, id, ctx, conn.as_ref(), &plan.step, password).await),
        Err(fenced) => Err(fenced),
    };
    if let (Some(conn), Step::RecordVmid(_)) = (&conn, &plan.step)
        && !matches!(outcome, Ok(Outcome::Done))
    {
        ctx.scheduler.release_vmid(&conn.key, &id.uid);
    }
    if let (Some(conn), Step::ForgetVmid(vmid), Ok(Outcome::Done)) = (&conn, &plan.step, &outcome) {
        // Skipped for a while, even before the cluster view shows the guest.
        ctx.scheduler.vmid_taken(&conn.key, *vmid);
        ctx.scheduler.release_vmid(&conn.key, &id.uid);
    }
    let outcome = outcome?;
    if let (Some(conn), Step::RemoveFinalizer, Outcome::Done) = (&conn, &plan.step, &outcome) {
        ctx.scheduler.forget(&conn.key, &id.uid);
    }
    let mut plan = plan::settle(plan, &outcome, Timestamp::now(), task_timeout);
    // The connection Secret before the status, which says when it is not
    // this resource's to write.
    // A Secret that could not be written is said on the resource; the
    // pass's events and status are written all the same.
    if let Some(data) = connection::data(ct, &plan.status) {
        ctx.shards.fence(hold)?;
        let why = match connection_secret::publish(&ctx.kube, (ct, id), &data).await {
            Ok(why) => why,
            Err(e) => Some(format!("the connection Secret could not be written: {e}")),
        };
        if let Some(why) = why {
            let at = (ct.metadata.generation, Timestamp::now());
            connection_secret::refused(&mut plan.status.conditions, at, &why);
        }
    }
    report(ct, id, ctx, hold, &plan).await?;
    Ok(plan.requeue)
}

/// Observes and plans. A container at rest is looked at coarsely between
/// its full looks (once per the config's `fullLookInterval`): from the
/// shared cluster view and what its last full look found, without its
/// firewall. A plan made from a coarse look may only conclude that nothing
/// is to be done (anything else is planned again from a full look, in the
/// same pass), and full looks may be skipped only after one that found
/// everything as asked.
async fn observe_and_plan(
    ct: &ProxmoxContainer,
    id: &Identity,
    ctx: &Context,
    conn: &Connection,
    now: Timestamp,
) -> Result<(Plan, Option<pve_client::Secret>), Failure> {
    let every = conn.timing.full_look_interval;
    let at_rest = plan::at_rest(ct);
    let mut depth = ctx.memory.depth(&id.uid, at_rest, every);
    loop {
        let (obs, password, looked) = observe(ct, id, ctx, conn, depth).await?;
        // A coarse look that found the container changed looked in full.
        depth = looked;
        let plan = plan::plan(ct, id, &obs, now);
        match (depth, &plan.step) {
            (Depth::Idle, Step::Idle) => return Ok((plan, password)),
            (Depth::Idle, _) => depth = Depth::Full,
            (Depth::Full, step) => {
                if matches!(step, Step::Idle) && at_rest && obs.proxmox.is_none() {
                    ctx.memory.looked_in_full(&id.uid);
                } else {
                    ctx.memory.look_closer(&id.uid);
                }
                return Ok((plan, password));
            }
        }
    }
}

/// Looks at what the plan will decide from: at `Depth::Idle` coarsely
/// (the container as its last full look found it, while the shared
/// cluster view shows it as then: see [`known`]), else in full, with the
/// firewall. Returns the depth looked at.
async fn observe(
    ct: &ProxmoxContainer,
    id: &Identity,
    ctx: &Context,
    conn: &Connection,
    mut depth: Depth,
) -> Result<(Observation, Option<pve_client::Secret>, Depth), Failure> {
    let client = &conn.client;
    let poll = conn.timing.poll_interval;
    let status = ct.status.clone().unwrap_or_default();
    let spec = &ct.spec.for_provider;
    let mut obs = Observation::unobserved(poll);
    obs.policy = conn.containers.clone();
    if let Some(task) = &status.at_provider.task {
        obs.task = Some(match Upid::parse(&task.upid) {
            Ok(upid) => match client.observe_task(&upid).await {
                Ok(TaskObservation::Running { .. } | TaskObservation::NotVisibleYet) => {
                    TaskSeen::Running
                }
                Ok(TaskObservation::Finished(TaskOutcome::Succeeded { .. })) => TaskSeen::Succeeded,
                Ok(TaskObservation::Finished(TaskOutcome::Failed { exit_status, .. })) => {
                    TaskSeen::Failed(exit_status)
                }
                Err(e) if e.class() == ErrorClass::NotFound => {
                    TaskSeen::Failed(format!("the task is not known to Proxmox: {e}"))
                }
                Err(e) => return Err(e.into()),
            },
            Err(e) => TaskSeen::Failed(format!("the recorded UPID does not parse: {e}")),
        });
        if obs.task == Some(TaskSeen::Running) {
            return Ok((obs, None, Depth::Full));
        }
    }
    let deleting = ct.metadata.deletion_timestamp.is_some();
    let vmid = match plan::recorded_vmid(ct) {
        Some(vmid) => vmid,
        None => {
            if !deleting && spec.vmid.is_none() {
                obs.vmid = Some(allocate_vmid(ctx, conn, id).await);
            }
            return Ok((obs, None, Depth::Full));
        }
    };
    // At most one poll interval old, as the VM's: a coarse look must not
    // take a view from before what woke its pass (a rollback's stop, for
    // one), and one read per interval serves every guest of the config.
    let view = ctx.inventory.view(&conn.key, client, poll).await?;
    // Where to look: where the cluster lists it, else where it was
    // created, else where the spec puts it.
    let shape = view.lxcs.get(&vmid);
    let listed = shape.map(|l| l.node.clone());
    let node = listed
        .clone()
        .or(status.at_provider.node.clone())
        .or(spec.node.clone());
    let (before, mark) = ctx.memory.recall(&id.uid);
    let before = before.and_then(|k| k.get::<known::Looked>());
    let coarse = match depth {
        Depth::Idle => known::coarse(before.as_ref(), vmid, shape),
        Depth::Full => None,
    };
    depth = if coarse.is_some() {
        Depth::Idle
    } else {
        Depth::Full
    };
    obs.container = match (coarse, &node) {
        (Some(seen), _) => Container::Present(seen),
        (None, Some(node)) => look(client, node, vmid).await?,
        (None, None) => Container::Absent,
    };
    if depth == Depth::Full {
        let looked = match (&obs.container, shape) {
            (Container::Present(seen), Some(shape)) => Some(Kept::new(known::Looked {
                vmid,
                seen: seen.clone(),
                shape: shape.clone(),
                touched: false,
            })),
            (_, _) => None,
        };
        ctx.memory.remember(&id.uid, &conn.key, looked, mark);
    }
    if obs.container == Container::Absent && view.vmids.contains(&vmid) && listed.is_none() {
        obs.container = Container::Taken(format!(
            "VMID {vmid} belongs to a VM, not a container; it is left untouched"
        ));
    }
    // Its pool: from the view (no request), checked against the pool's
    // members when the view disagrees (it lags a move).
    if let (Some(wanted), Container::Present(_), Some(_)) = (&spec.pool, &obs.container, &listed) {
        let listed = shape.and_then(|l| l.pool.clone());
        obs.pool = Some(pools::member_of(client, ("lxc", vmid), listed, wanted).await?);
    }
    let node = match &obs.container {
        Container::Present(seen) => Some(seen.node.clone()),
        Container::Absent if !deleting => match &spec.node {
            Some(node) => Some(node.clone()),
            None => {
                let request = PlacementRequest {
                    allowed: spec.allowed_nodes.clone(),
                    memory: spec.memory.bytes().unwrap_or_default(),
                    cpus: spec.cpu.cores,
                    policy: PlacementPolicy::MostFreeMemory,
                    spread_by: None,
                    prefer_template_node: false,
                };
                let labelled = LabelCounts::new();
                let placement = ctx.scheduler.place(
                    &conn.key,
                    &id.uid,
                    vmid,
                    &request,
                    Candidates {
                        view: &view,
                        labelled: &labelled,
                        template_node: None,
                    },
                );
                let chosen = match &placement {
                    Placement::Chosen { node, .. } => Some(node.clone()),
                    Placement::NoNode { .. } => None,
                };
                obs.placement = Some(placement);
                chosen
            }
        },
        Container::Absent | Container::Unknown | Container::Taken(_) => None,
    };
    let Some(node) = node else {
        return Ok((obs, None, Depth::Full));
    };
    if let (Container::Present(_), Some(fw), false, Depth::Full) =
        (&obs.container, &spec.firewall, deleting, depth)
    {
        let guest = pve_client::Guest {
            kind: pve_client::GuestType::Lxc,
            node: node.clone(),
            vmid,
        };
        let view = guest_firewall::view((&ctx.kube, client), &guest, fw, &id.namespace).await;
        obs.firewall = Some(view.map_err(|e| match e {
            guest_firewall::ReadError::Proxmox(e) => Failure::Pve(e),
            guest_firewall::ReadError::Kube(e) => Failure::Kube(e),
        })?);
    }
    // A task of this VMID the node lists as running, though no status
    // recorded it (a status write lost after the dispatch).
    let pull_file = spec
        .template
        .oci
        .as_ref()
        .map(|oci| pve_client::lxc::oci_file_name(&render::oci_pull(oci).filename));
    // Not at a coarse look: it follows a full look that found nothing in
    // flight and nothing to do, and the view shows no lock since.
    let active = match depth {
        Depth::Full => client.active_tasks(&node).await?,
        Depth::Idle => vec![],
    };
    let vmid_text = vmid.to_string();
    obs.busy = active
        .iter()
        .filter(|t| t.is_running())
        .find(|t| {
            let (kind, task_id) = (t.task_type.as_deref(), t.id.as_deref());
            let ours = kind.is_some_and(|k| CONTAINER_TASKS.contains(&k))
                && task_id == Some(vmid_text.as_str());
            let pull = kind == Some("ociregistrypull")
                && pull_file.is_some()
                && task_id == pull_file.as_deref();
            ours || pull
        })
        .map(|t| {
            format!(
                "task {} of {} running on {node}",
                t.task_type.as_deref().unwrap_or_default(),
                t.id.as_deref().unwrap_or_default()
            )
        });
    let mut password = None;
    obs.foreign_vnets = ctx.foreign_vnets(&id.namespace);
    if obs.container == Container::Absent && !deleting {
        let mut host = host(ctx, conn, &view, &node).await;
        host.foreign_vnets = ctx.foreign_vnets(&id.namespace);
        obs.host = Some(host);
        if let Some(oci) = &spec.template.oci {
            let internal = conn.internal_names(view.nodes.iter().map(|n| n.name.as_str()));
            obs.download_refused = downloads::checked(
                conn.downloads.as_ref(),
                "spec.forProvider.template.oci.reference",
                downloads::Source::Oci(&oci.reference),
                &internal,
                &conn.endpoint_host,
                &ctx.metrics,
            )
            .await;
        }
        if let Some(oci) = spec
            .template
            .oci
            .as_ref()
            .filter(|_| obs.download_refused.is_none())
        {
            let volume = render::oci_pull(oci).volume(&oci.storage);
            let content = client
                .storage_content(&node, &oci.storage, Some("vztmpl"))
                .await?;
            let present = content.iter().any(|c| c.volid == volume);
            obs.template_present = Some(present);
            // A pull is due: one GET /version, so that a Proxmox VE without
            // oci-registry-pull (before 9.1) is said, not sent a request
            // it does not have.
            if !present {
                let version = client.version().await?;
                obs.oci_unsupported = (!version.has_oci_registry_pull())
                    .then(|| format!("Proxmox VE {}", version.version));
            }
        }
        if let Some(name) = spec.restore.as_ref().and_then(|r| r.backup_ref.as_ref()) {
            // About to be restored from it: its archive is what is sent.
            obs.backup = Some(
                crate::reconcile::managed::backups::lookup(&ctx.kube, &id.namespace, &name.name)
                    .await?,
            );
        }
        if let Some(image) = &spec.template.image {
            // About to be created from it: read afresh when the cache says
            // it is usable, as a VM's disk image is (`managed::images::named`).
            obs.image = Some(
                crate::reconcile::managed::images::named(
                    &ctx.kube,
                    &ctx.images,
                    &id.namespace,
                    &image.name,
                )
                .await?,
            );
        }
        if let Some(sel) = &spec.password_secret_ref {
            let secrets: Api<Secret> = Api::namespaced(ctx.kube.clone(), &id.namespace);
            obs.password = Some(match secrets.get_opt(&sel.name).await? {
                Some(secret) => match secret_value(&secret, &sel.key) {
                    Some(value) if value.len() > PASSWORD_MAX_BYTES => Err((
                        Reason::InvalidSpec,
                        format!(
                            "spec.forProvider.passwordSecretRef: the password in Secret {} key {} has {} bytes, more than {PASSWORD_MAX_BYTES}: nothing is sent",
                            sel.name,
                            sel.key,
                            value.len()
                        ),
                    )),
                    Some(value) if value.len() >= 5 => {
                        password = Some(pve_client::Secret::new(value));
                        Ok(())
                    }
                    Some(_) => Err((
                        Reason::InvalidSpec,
                        format!(
                            "spec.forProvider.passwordSecretRef: the password in Secret {} key {} is shorter than 5 characters",
                            sel.name, sel.key
                        ),
                    )),
                    None => Err((
                        Reason::SecretNotFound,
                        format!("Secret {} has no key {}", sel.name, sel.key),
                    )),
                },
                None => Err((
                    Reason::SecretNotFound,
                    format!("Secret {} not found", sel.name),
                )),
            });
        }
    }
    Ok((obs, password, depth))
}

/// What `node` has, as a create is checked against it: the cluster view
/// this pass read (no request) and the node's bridges (read once per node
/// and interval, shared with the VMs). Bridges that cannot be read are
/// `None`: the create is not held up for them.
async fn host(ctx: &Context, conn: &Connection, view: &ClusterView, node: &str) -> HostView {
    let seen = view.nodes.iter().find(|n| n.name == node);
    let bridges = match ctx.inventory.bridges(&conn.key, &conn.client, node).await {
        Ok(bridges) => Some(bridges.as_ref().clone()),
        Err(e) => {
            tracing::warn!(%node, error = %e, "cannot read the node's bridges; NICs are not checked against them");
            None
        }
    };
    HostView {
        node: node.to_owned(),
        cpus: seen.map(|n| n.cpus).unwrap_or_default(),
        memory: seen.map(|n| n.max_memory).unwrap_or_default(),
        storages: view.storages.get(node).cloned().unwrap_or_default(),
        untagged_vnets: bridges.as_ref().map(|b| b.1.clone()).unwrap_or_default(),
        bridges: bridges.map(|b| b.0),
        foreign_vnets: Default::default(),
    }
}

/// The container `vmid` on `node`: its config and power state.
async fn look(
    client: &pve_client::Client,
    node: &str,
    vmid: u32,
) -> Result<Container, pve_client::Error> {
    let config: ContainerConfig = match client.container_config(node, vmid).await {
        Ok(config) => config,
        Err(e) if e.class() == ErrorClass::NotFound => return Ok(Container::Absent),
        Err(e) => return Err(e),
    };
    let running = match client.container_status(node, vmid).await {
        Ok(status) => status.is_running(),
        Err(e) if e.class() == ErrorClass::NotFound => return Ok(Container::Absent),
        Err(e) => return Err(e),
    };
    Ok(Container::Present(Seen {
        node: node.to_owned(),
        config,
        running,
    }))
}

/// Carries out the one step.
async fn act(
    ct: &ProxmoxContainer,
    id: &Identity,
    ctx: &Context,
    conn: Option<&Connection>,
    step: &Step,
    password: Option<pve_client::Secret>,
) -> Outcome {
    let started = |r: Result<Upid, pve_client::Error>| match r {
        Ok(upid) => Outcome::Started {
            type_: upid.task_type().to_owned(),
            upid: upid.to_string(),
        },
        Err(e) => Outcome::Failed(e.to_string()),
    };
    let metadata = |patch: Value| async move {
        let api: Api<ProxmoxContainer> = Api::namespaced(ctx.kube.clone(), &id.namespace);
        match api
            .patch(&id.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                fresh::wrote(&ctx.memory, ct, &written);
                Outcome::Done
            }
            Err(e) if is_not_found(&e) => Outcome::Done,
            Err(e) => Outcome::Failed(format!("writing the metadata: {e}")),
        }
    };
    let version = ct.resource_version().unwrap_or_default();
    let Some(client) = conn.map(|c| &c.client) else {
        return match step {
            Step::Idle => Outcome::Done,
            Step::RemoveFinalizer => metadata(finalizer::patch(&ct.metadata, false)).await,
            // The plan decides nothing else without a usable config; were
            // it to, the step is not pretended done (a step "done" without
            // being sent was a pass again at once, a hot loop).
            Step::AddFinalizer
            | Step::LateInitialize(_)
            | Step::RecordVmid(_)
            | Step::ForgetVmid(_)
            | Step::Pull { .. }
            | Step::Create { .. }
            | Step::Restore { .. }
            | Step::Firewall { .. }
            | Step::Configure { .. }
            | Step::Start { .. }
            | Step::Shutdown { .. }
            | Step::Stop { .. }
            | Step::Destroy { .. }
            | Step::MovePool { .. } => {
                Outcome::Failed("the step needs a usable provider config".to_owned())
            }
        };
    };
    match step {
        Step::Idle => Outcome::Done,
        Step::AddFinalizer => metadata(finalizer::patch(&ct.metadata, true)).await,
        Step::LateInitialize(fields) => {
            // On the version read, under a field manager of its own.
            let api: Api<ProxmoxContainer> = Api::namespaced(ctx.kube.clone(), &id.namespace);
            let params = PatchParams {
                field_manager: Some(crate::api::managed::LATE_INIT_MANAGER.into()),
                ..PatchParams::default()
            };
            let patch = json!({
                "metadata": {"resourceVersion": version},
                "spec": {"forProvider": fields},
            });
            match api.patch(&id.name, &params, &Patch::Merge(&patch)).await {
                Ok(written) => {
                    fresh::wrote(&ctx.memory, ct, &written);
                    Outcome::Done
                }
                Err(e) if is_not_found(&e) => Outcome::Done,
                Err(e) => Outcome::Failed(format!("filling unset spec fields: {e}")),
            }
        }
        Step::RemoveFinalizer => metadata(finalizer::patch(&ct.metadata, false)).await,
        // On the version read: two writers can never both record a VMID.
        Step::RecordVmid(vmid) => {
            metadata(json!({"metadata": {
                "resourceVersion": version,
                "annotations": {
                    meta::EXTERNAL_NAME: vmid.to_string(),
                    meta::EXTERNAL_CREATE_PENDING: Timestamp::now().to_string(),
                },
            }}))
            .await
        }
        // On the version read too: the VMID another guest took is given up
        // only by the pass that saw it taken.
        Step::ForgetVmid(_) => {
            metadata(json!({"metadata": {
                "resourceVersion": version,
                "annotations": {
                    meta::EXTERNAL_NAME: null,
                    meta::EXTERNAL_CREATE_PENDING: null,
                },
            }}))
            .await
        }
        Step::Pull {
            node,
            storage,
            pull,
        } => started(client.pull_oci_image(node, storage, pull).await),
        Step::Create { node, create } => {
            let mut create = create.as_ref().clone();
            create.password = password;
            started(client.create_container(node, &create).await)
        }
        Step::Restore { node, restore } => started(client.restore_container(node, restore).await),
        Step::Firewall { node, vmid, call } => {
            let guest = pve_client::Guest {
                kind: pve_client::GuestType::Lxc,
                node: node.clone(),
                vmid: *vmid,
            };
            match guest_firewall::write(client, &guest, call).await {
                Ok(()) => Outcome::Done,
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
        Step::Configure { node, vmid, update } => {
            match client.update_container_config(node, *vmid, update).await {
                Ok(()) => Outcome::Done,
                Err(e) => Outcome::Failed(e.to_string()),
            }
        }
        Step::MovePool {
            pool,
            vmid,
            allow_move,
        } => match client.add_to_pool(pool, *vmid, *allow_move).await {
            Ok(()) => Outcome::Done,
            Err(e) => Outcome::Failed(format!("moving the container into pool {pool}: {e}")),
        },
        Step::Start { node, vmid } => started(client.start_container(node, *vmid).await),
        Step::Shutdown { node, vmid } => {
            started(client.shutdown_container(node, *vmid, Some(60), true).await)
        }
        Step::Stop { node, vmid } => started(client.stop_container(node, *vmid).await),
        Step::Destroy { node, vmid } => started(
            client
                .delete_container(
                    node,
                    *vmid,
                    pve_client::vm::DeleteOptions {
                        purge: true,
                        destroy_unreferenced_disks: true,
                    },
                )
                .await,
        ),
    }
}

/// Writes the status (when it changed) and publishes the events.
async fn report(
    ct: &ProxmoxContainer,
    id: &Identity,
    ctx: &Context,
    hold: &Hold,
    plan: &Plan,
) -> Result<(), Error> {
    let unchanged = ct.status.as_ref() == Some(&plan.status);
    let removed = plan.step == Step::RemoveFinalizer;
    let written = if unchanged || removed {
        Ok(None)
    } else {
        // On the version this pass read or wrote: a fresher status (of
        // another holder) is never overwritten.
        let api: Api<ProxmoxContainer> = Api::namespaced(ctx.kube.clone(), &id.namespace);
        let status: &ProxmoxContainerStatus = &plan.status;
        let base = fresh::base(&ctx.memory, ct);
        ctx.shards.fence(hold)?;
        apply_on(&api, &id.name, status, base.as_deref()).await
    };
    for event in &plan.events {
        ctx.shards.fence(hold)?;
        ctx.events.publish(ct, event).await;
    }
    if removed {
        // The resource may be gone any moment now.
        ctx.memory.forget(&id.uid);
    } else if let Ok(Some(version)) = &written {
        ctx.memory.saw(&id.uid, Some(version.clone()));
    }
    written?;
    Ok(())
}
