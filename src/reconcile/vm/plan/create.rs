//! Creating a VM that does not exist: VMID → placement → image downloads →
//! finalizer → create (with `import-from`) or clone.
//!
//! The VMID is recorded in `crossplane.io/external-name`, with
//! `crossplane.io/external-create-pending`, before any create is sent. A
//! create is sent only when the VM was looked up and found absent and no task
//! for it is running (see [`super::task::adopt`]); Proxmox refuses a second
//! VM with the same VMID, so repeating a create whose outcome was lost is
//! safe, and a new VMID is never allocated for it.

use std::time::Duration;

use super::context::Ctx;
use super::decision::{Decision, Out, Say};
use super::fleet::{self, ImageClone};
use super::input::{
    PasswordState, Placement, ProviderState, SlotGrant, TemplateLookup, VmState, VmidGrant,
};
use super::output::{Idle, KubeWrite, PveCall, Sensitive};
use super::render;
use super::task;
use super::tenancy::{self, CopySource};
use crate::api::{
    Reason,
    vm::{CloneSource, TaskAction},
};

/// When a resource waiting for a slot looks again by itself. A freed slot
/// also wakes its next waiter at once. At 1,000 VMs a 2-minute recheck
/// saved requests while waiting, but the VMs waiting for their guest agent
/// spent them and the run finished later (BENCHMARKS.md, "after-recheck").
const CAPACITY_RECHECK: Duration = Duration::from_secs(30);

/// The longest a resource far back in line for a slot waits before it
/// looks again by itself (its `CapacityStalled` message may come that much
/// after the stall).
const CAPACITY_RECHECK_MAX: Duration = Duration::from_secs(300);

/// How long a resource may wait for a slot while none goes to anyone on
/// its node before it says it is stalled.
const CAPACITY_STALLED_AFTER: Duration = Duration::from_secs(600);

/// Records the VMID the scheduler reserved before the plan.
fn record_allocation(ctx: &Ctx) -> Decision {
    match &ctx.obs.allocated_vmid {
        Some(VmidGrant::Reserved(vmid)) => {
            let step = KubeWrite::RecordExternalName {
                vmid: *vmid,
                create_pending: true,
            };
            let say = Say::yes(
                Reason::ReconcileSuccess,
                format!("allocating a VMID: recording VMID {vmid}"),
            );
            Decision::new(step, Some(Duration::ZERO), say)
        }
        Some(VmidGrant::Unavailable(why)) => {
            let retry = task::backoff(1);
            let say = Say::no(
                Reason::ReconcileError,
                format!(
                    "cannot allocate a VMID: {why}; retrying {}",
                    super::decision::in_secs(retry)
                ),
            );
            Decision::new(Idle::Wait, Some(retry), say).keep_ready()
        }
        None => {
            let say = Say::no(Reason::ReconcileError, "no VMID was reserved");
            Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say).keep_ready()
        }
    }
}

/// Decides for a VM that is absent (or whose VMID is not known yet).
pub(super) fn decide(ctx: &Ctx, out: &mut Out) -> Decision {
    let Some(vmid) = ctx.vmid() else {
        if !ctx.caps.create {
            return Decision::new(
                Idle::Refuse,
                None,
                Say::no(
                    Reason::InvalidSpec,
                    "no VM to observe: set the crossplane.io/external-name annotation (or spec.forProvider.vmid) to its VMID",
                ),
            );
        }
        return record_allocation(ctx);
    };
    if ctx.obs.vm == VmState::Unknown {
        // Never create blindly: the VM must have been looked up.
        let say = Say::no(
            Reason::ReconcileError,
            format!("VM {vmid} was not observed"),
        );
        return Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say);
    }
    if !ctx.caps.create {
        let say = Say::no(
            Reason::ReconcileError,
            format!("VM {vmid} does not exist, and managementPolicies do not allow Create"),
        );
        return Decision::new(Idle::Wait, Some(ctx.resync_interval()), say);
    }
    if let Some(d) = taken(ctx, out, vmid) {
        return d;
    }
    if !ctx.create_pending() {
        let mut d = Decision::new(
            KubeWrite::RecordExternalName {
                vmid,
                create_pending: true,
            },
            Some(Duration::ZERO),
            Say::yes(
                Reason::ReconcileSuccess,
                format!("marking the create of VM {vmid} as pending"),
            ),
        );
        if ctx.create_succeeded() {
            d = d.event(
                true,
                "VmVanished",
                format!("VM {vmid} was created before but no longer exists; creating it again"),
            );
        }
        return d;
    }
    match (&ctx.spec.clone, &ctx.spec.restore) {
        (Some(clone), _) => clone_vm(ctx, out, vmid, clone),
        (None, Some(restore)) => super::restore::restore_vm(ctx, out, vmid, restore),
        (None, None) => create_vm(ctx, out, vmid),
    }
}

/// A copy of another VM's disks refused by [`tenancy::may_copy`]: waited
/// for (the VM may become a template, or the policy name it), nothing
/// copied meanwhile.
fn not_copied(why: String) -> Decision {
    let say = Say::no(Reason::NotATemplate, why);
    Decision::new(Idle::Wait, Some(COPY_RECHECK), say)
}

/// How often a refused clone source or import is looked at again.
const COPY_RECHECK: Duration = Duration::from_secs(30);

fn create_vm(ctx: &Ctx, out: &mut Out, vmid: u32) -> Decision {
    // Another VM's disks are imported only as they could be cloned.
    if let Some(why) = tenancy::import_refusal(ctx, ctx.spec.disks.iter().enumerate()) {
        return not_copied(why);
    }
    let node = match placement(ctx, out) {
        Ok(node) => node,
        Err(d) => return *d,
    };
    if let Some(d) = super::limits::on_node(ctx, &node, false) {
        return d;
    }
    let password = match password(ctx) {
        Ok(p) => p,
        Err(d) => return *d,
    };
    // Its customCloudInit inputs first: a VM whose Secrets or ConfigMaps
    // do not exist yet is not created (it would boot without its data).
    if let Some(why) = super::seed::unreadable(ctx) {
        let say = Say::no(
            Reason::SecretNotFound,
            format!("{why}; the VM is created once it can be read"),
        );
        return Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say);
    }
    if let Some(d) = super::images::named(ctx, &node) {
        return d;
    }
    if let Some(d) = download_images(ctx, out, &node) {
        return d;
    }
    // The seed ISO first, so the VM is created with it attached (when the
    // node was known to look; else it is attached before the first start).
    if let Some((doing, call)) = super::seed::upload(ctx, Some(&node)) {
        if let Some(d) = task::gate(ctx, out, call.action()) {
            return d;
        }
        let say = Say::yes(Reason::WaitingForTask, doing);
        return Decision::new(call, Some(ctx.timing.poll_interval), say);
    }
    if let Some(d) = task::gate(ctx, out, TaskAction::Create) {
        return d;
    }
    if let Some(d) = finalizer(ctx, vmid) {
        return d;
    }
    if ctx.imports()
        && let Some(d) = slot(ctx, "import")
    {
        return d;
    }
    let params = match render::create_params(ctx, password.as_ref().map(|(p, _)| p)) {
        Ok(params) => params,
        Err(why) => return Decision::new(Idle::Refuse, None, Say::no(Reason::InvalidSpec, why)),
    };
    out.status.at_provider.password_version = password.map(|(_, version)| version);
    out.status.at_provider.node = Some(node.clone());
    out.status.at_provider.target_node = ctx.spec.node.clone();
    let reason = if ctx.imports() {
        Reason::ImportingDisk
    } else {
        Reason::WaitingForTask
    };
    let say = Say::yes(reason, format!("creating VM {vmid} on node {node}"));
    let step = PveCall::CreateVm { node, vmid, params };
    Decision::new(step, Some(ctx.timing.poll_interval), say)
}

fn clone_vm(ctx: &Ctx, out: &mut Out, vmid: u32, clone: &CloneSource) -> Decision {
    // An image's template: the one on the VM's node, once it is ready; then
    // its VMID is cloned as a `templateVmid` would be.
    let linkable = match clone
        .image
        .as_deref()
        .map(|image| fleet::image_clone(ctx, image))
    {
        None => true,
        Some(ImageClone::Clone { linkable }) => linkable,
        Some(ImageClone::Wait(d)) => return *d,
        // No node is placed yet (else `image_clone` would not ask): this
        // records the one placement chose, or says why there is none.
        Some(ImageClone::Place) => {
            return match placement(ctx, out) {
                Ok(_) => Decision::new(
                    Idle::Wait,
                    Some(Duration::ZERO),
                    Say::yes(Reason::ReconcileSuccess, "placed; cloning next"),
                ),
                Err(d) => *d,
            };
        }
    };
    let full = fleet::full(clone.full, linkable);
    let (template, template_node) = match &ctx.obs.template {
        // Another ProxmoxVM declares the source with `template: true` and
        // is still building it: wait, which is no error. Its status
        // changing wakes this resource (see `wake`); the resync interval
        // is only the fallback.
        Some(TemplateLookup::Coming { resource }) => {
            let say = Say::yes(
                Reason::WaitingForTemplate,
                format!(
                    "waiting for ProxmoxVM {resource} to become a template; cloned as soon as it is"
                ),
            );
            return Decision::new(Idle::Wait, Some(ctx.resync_interval()), say);
        }
        // Only templates are clone sources, and VMs the provider config
        // allows besides: a full clone of any VM would copy another team's
        // disks, and a linked clone shares the template's base disks. Wait
        // for the VM to become one (e.g. a ProxmoxVM with `template: true`
        // still being built); nothing is cloned meanwhile.
        found @ Some(TemplateLookup::Found { vmid, .. })
            if !tenancy::may_copy(ctx, &CopySource::of(*vmid, found.as_ref()), full) =>
        {
            let source = CopySource::of(*vmid, found.as_ref());
            let allowed_full = tenancy::policy_names(ctx, &source);
            let why = tenancy::not_a_template(&source, allowed_full, "cloned");
            return not_copied(why);
        }
        Some(TemplateLookup::Found { vmid, node, .. }) => (*vmid, node.clone()),
        other => {
            let why = match other {
                Some(TemplateLookup::Ambiguous(ids)) => format!(
                    "the template name matches several VMs ({ids:?}); name it by templateVmid"
                ),
                Some(TemplateLookup::NotFound) => "the clone template does not exist".into(),
                Some(TemplateLookup::Found { .. } | TemplateLookup::Coming { .. }) | None => {
                    "the clone template was not looked up".into()
                }
            };
            let say = Say::no(Reason::TemplateNotFound, why);
            return Decision::new(Idle::Wait, Some(Duration::from_secs(30)), say);
        }
    };
    // The clone lands on `node`, a recorded placement, or the template's
    // node when the spec allows it (no `target`: a linked clone or a clone
    // of local disks cannot go elsewhere); otherwise on a node placement
    // chose among the allowed ones, as `target` (Proxmox refuses that
    // without shared storage, and the refusal is reported).
    let node = match ctx.placed_node() {
        Some(node) => node,
        None if ctx.allowed(&template_node) => template_node.clone(),
        None => match placement(ctx, out) {
            Ok(node) => node,
            Err(d) => return *d,
        },
    };
    if let Some(d) = super::limits::on_node(ctx, &node, true) {
        return d;
    }
    out.status.at_provider.node = Some(node.clone());
    out.status.at_provider.target_node = ctx.spec.node.clone();
    if let Some(d) = task::gate(ctx, out, TaskAction::Clone) {
        return d;
    }
    if let Some(d) = finalizer(ctx, vmid) {
        return d;
    }
    if let Some(d) = slot(ctx, "clone") {
        return d;
    }
    let say = Say::yes(
        Reason::WaitingForTask,
        format!("cloning template {template} into VM {vmid} on node {node}"),
    );
    let step = PveCall::CloneVm {
        source_node: template_node.clone(),
        template,
        vmid,
        target_node: (node != template_node).then_some(node),
        full,
        storage: clone.storage.clone(),
        name: ctx.vm_name(),
        description: render::description_value(ctx),
        pool: ctx.spec.pool.clone(),
    };
    Decision::new(step, Some(ctx.timing.poll_interval), say)
}

/// The node to create on: `node`, the placement recorded in the status
/// (so a download and the create land on the same node), or the one the
/// provider's placement chose among `allowedNodes` this pass: recorded
/// first, then acted on, unless the create may follow in this pass (see
/// [`Ctx::creates_where_placed`]; the status then records it with what
/// came of it).
pub(super) fn placement(ctx: &Ctx, out: &mut Out) -> Result<String, Box<Decision>> {
    if let Some(node) = ctx.placed_node() {
        return Ok(node);
    }
    let decision = match &ctx.obs.placement {
        Some(Placement::Chosen { node, why }) => {
            out.status.at_provider.node = Some(node.clone());
            if ctx.creates_where_placed() {
                return Ok(node.clone());
            }
            let say = Say::yes(
                Reason::ReconcileSuccess,
                format!("placing the VM on node {node} ({why})"),
            );
            Decision::new(Idle::SaveStatus, Some(Duration::ZERO), say)
        }
        Some(Placement::NoNode { why, too_small }) => {
            let reason = if *too_small {
                Reason::ExceedsNodeLimits
            } else {
                Reason::ReconcileError
            };
            let say = Say::no(reason, format!("no node to place the VM on: {why}"));
            Decision::new(Idle::Wait, Some(Duration::from_secs(30)), say)
        }
        None => {
            let say = Say::no(Reason::ReconcileError, "the VM was not placed on a node");
            Decision::new(Idle::Wait, Some(ctx.timing.poll_interval), say)
        }
    };
    Err(Box::new(decision))
}

/// The cloud-init password and its Secret's version, if the spec has one.
fn password(ctx: &Ctx) -> Result<Option<(Sensitive, String)>, Box<Decision>> {
    let wanted = ctx
        .spec
        .cloud_init
        .as_ref()
        .and_then(|ci| ci.password_secret_ref.as_ref());
    if wanted.is_none() {
        return Ok(None);
    }
    match &ctx.obs.password {
        Some(PasswordState::Available { value, version }) => {
            Ok(Some((value.clone(), version.clone())))
        }
        other => {
            let why = match other {
                Some(PasswordState::Missing(why)) => why.clone(),
                Some(PasswordState::Available { .. }) | None => "it was not read".into(),
            };
            let say = Say::no(
                Reason::SecretNotFound,
                format!("cannot read the cloud-init password Secret: {why}"),
            );
            // Creating or changing the Secret wakes this resource (the
            // controller watches Secrets' metadata); the resync interval
            // is only the fallback.
            Err(Box::new(Decision::new(
                Idle::Wait,
                Some(ctx.resync_interval()),
                say,
            )))
        }
    }
}

/// Starts the download of the first image not yet in storage.
/// Why the provider config's `downloadPolicy` refuses a disk's image URL
/// (naming the field), or `None`: checked before the download is sent.
fn download_refused(ctx: &Ctx, node: &str, url: &str) -> Option<String> {
    let Some(ProviderState::Ready {
        downloads,
        endpoint_host,
        ..
    }) = ctx.provider
    else {
        return None;
    };
    crate::reconcile::downloads::refusal(
        downloads.as_ref(),
        &url_field(ctx, url)?,
        crate::reconcile::downloads::Source::Url(url),
        &[node.to_owned(), endpoint_host.clone()],
    )
    .or_else(|| ctx.obs.resolved_refusals.get(url).cloned())
}

/// The field of the disk whose image downloads `url`.
fn url_field(ctx: &Ctx, url: &str) -> Option<String> {
    let i = ctx.spec.disks.iter().position(|d| {
        d.image
            .as_ref()
            .and_then(|i| i.download())
            .is_some_and(|d| d.url == url)
    })?;
    Some(format!("spec.forProvider.disks[{i}].image.url"))
}

/// Why the download of `url` into `storage` is not sent: Proxmox reports
/// a file larger than the storage's free space (it would fill the storage,
/// often the node's root file system, and fail).
fn no_room(ctx: &Ctx, node: &str, storage: &str, url: &str) -> Option<String> {
    let room = ctx.obs.rooms.get(url)?;
    room.shortfall(&url_field(ctx, url)?, storage, node, ctx.resync_interval())
}

fn download_images(ctx: &Ctx, out: &Out, node: &str) -> Option<Decision> {
    for image in ctx.spec.disks.iter().filter_map(|d| d.image.as_ref()) {
        let (Some(download), Some(volume), Some(file_name)) =
            (image.download(), image.volume(), image.file_name())
        else {
            // A ProxmoxImage: see `named_images`.
            continue;
        };
        match ctx.obs.images.get(&volume) {
            Some(true) => continue,
            Some(false) => {}
            None => {
                let say = Say::no(
                    Reason::ReconcileError,
                    format!("image volume {volume} on node {node} was not looked up"),
                );
                return Some(Decision::new(
                    Idle::Wait,
                    Some(ctx.timing.poll_interval),
                    say,
                ));
            }
        }
        if let Some(why) = download_refused(ctx, node, download.url) {
            let say = Say::no(Reason::NotAllowed, why);
            return Some(Decision::new(
                Idle::Wait,
                Some(ctx.timing.poll_interval),
                say,
            ));
        }
        if let Some(d) = task::gate(ctx, out, TaskAction::DownloadImage) {
            return Some(d);
        }
        if let Some(why) = no_room(ctx, node, &image.storage, download.url) {
            let say = Say::no(Reason::InsufficientStorage, why);
            return Some(Decision::new(Idle::Wait, Some(ctx.resync_interval()), say));
        }
        let say = Say::yes(
            Reason::DownloadingImage,
            format!("downloading {} into {volume} on node {node}", download.url),
        );
        let step = PveCall::DownloadImage {
            node: node.to_owned(),
            storage: image.storage.clone(),
            url: download.url.to_owned(),
            file_name,
            checksum: download.checksum.to_owned(),
            algorithm: download.algorithm,
        };
        return Some(Decision::new(step, Some(ctx.timing.poll_interval), say));
    }
    None
}

/// The per-node slot for an import or clone: taken (go on), or every slot
/// is in use by work actually in flight (wait; the message says since when).
fn slot(ctx: &Ctx, what: &str) -> Option<Decision> {
    let (node, in_use, limit, stalled, ahead) = match &ctx.obs.slot {
        Some(SlotGrant::Granted { .. }) => return None,
        Some(SlotGrant::Busy {
            node,
            in_use,
            limit,
            stalled,
            ahead,
        }) => (node.as_str(), *in_use, *limit, *stalled, *ahead),
        None => {
            let say = Say::no(
                Reason::ReconcileError,
                format!("no {what} slot was taken for this pass"),
            );
            return Some(Decision::new(
                Idle::Wait,
                Some(ctx.timing.poll_interval),
                say,
            ));
        }
    };
    let mut message =
        format!("waiting for a free {what} slot on node {node} ({in_use} of {limit} in use)");
    // Stalled: no slot went to anyone there for that long (a long line
    // that keeps moving is only waiting).
    let say = if stalled >= CAPACITY_STALLED_AFTER {
        message.push_str(&format!(
            "; none has freed for {}: the work in flight there is not finishing (see the node's tasks in Proxmox)",
            super::secs(stalled)
        ));
        Say::no(Reason::CapacityStalled, message)
    } else {
        Say::yes(Reason::WaitingForCapacity, message)
    };
    // A freed slot wakes the longest waiter at once (see `wake`); this
    // timer is a fallback.
    let recheck = capacity_recheck(ahead, limit);
    Some(Decision::new(Idle::Wait, Some(recheck), say))
}

/// When a resource waiting for a slot with `ahead` others before it in
/// line looks again by itself: [`CAPACITY_RECHECK`] near the front, longer
/// the further back (its turn is that many slot rounds away, and a freed
/// slot wakes its next waiter anyway), at most [`CAPACITY_RECHECK_MAX`].
/// At 10,000 VMs the same 30 s for every waiter was 300 passes a second
/// that found nothing to do.
pub(super) fn capacity_recheck(ahead: u32, limit: u32) -> Duration {
    let rounds = ahead / (4 * limit.max(1));
    CAPACITY_RECHECK
        .saturating_mul(1 + rounds)
        .min(CAPACITY_RECHECK_MAX)
}

/// Proxmox refused the last create or clone because a VM with the VMID
/// exists, though the VM was not found: the provider's token may not see it
/// (no `VM.Audit` on it), or it appeared meanwhile. An allocated VMID is
/// given up and another allocated; a VMID the spec names is reported.
fn taken(ctx: &Ctx, out: &mut Out, vmid: u32) -> Option<Decision> {
    let failure = out.status.at_provider.last_failure.as_ref()?;
    let creating = matches!(
        failure.action,
        TaskAction::Create | TaskAction::Clone | TaskAction::Restore
    );
    if !(creating && failure.vmid_taken) {
        return None;
    }
    if ctx.spec.vmid.is_none() {
        out.status.at_provider.last_failure = None;
        let say = Say::yes(
            Reason::ReconcileSuccess,
            format!("VMID {vmid} is taken by a VM this resource cannot see; allocating another"),
        );
        return Some(
            Decision::new(KubeWrite::ForgetExternalName, Some(Duration::ZERO), say).event(
                true,
                "VmidTaken",
                format!(
                    "VMID {vmid} belongs to a VM the provider cannot see; allocating another VMID"
                ),
            ),
        );
    }
    let say = Say::no(
        Reason::NotOwned,
        format!(
            "VMID {vmid} is taken by a VM the provider cannot see (its token lacks VM.Audit on /vms/{vmid}); choose another vmid, or grant the access to let it be reported"
        ),
    );
    Some(Decision::new(Idle::Wait, Some(ctx.resync_interval()), say))
}

/// The finalizer must be on before the first create is sent: only then can
/// a VM exist that deletion must clean up. It goes on with the VMID's
/// record (`RecordExternalName` with `create_pending`, in the same write);
/// this is for a resource whose VMID was recorded without it (by an older
/// version, or by hand).
pub(super) fn finalizer(ctx: &Ctx, vmid: u32) -> Option<Decision> {
    if ctx.has_finalizer() {
        return None;
    }
    let say = Say::yes(
        Reason::ReconcileSuccess,
        format!("adding the finalizer before creating VM {vmid}"),
    );
    Some(Decision::new(
        KubeWrite::AddFinalizer,
        Some(Duration::ZERO),
        say,
    ))
}
