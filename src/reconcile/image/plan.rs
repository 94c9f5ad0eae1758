//! The image's decisions, pure: the spec, what Proxmox showed and the
//! status in; the status, the calls to make, events and the requeue out.
//!
//! Per location (a node, or one for a shared storage): the task recorded
//! there first (running: wait; ended: its outcome is recorded), then the
//! file: there → Ready; not there → a download running on the node that a
//! lost status write forgot is adopted, a failure waits out its backoff,
//! else `download-url` (`oci-registry-pull` for `source.oci`: the same
//! adoption, backoff and deletion) is dispatched. One call per location and pass at
//! most, each recorded in its location before anything else is sent there.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::claim::Claim;
use super::names::{self, Source};
use crate::api::condition::{ConditionType, find};
use crate::api::image::{ImageLocation, LocationPhase, ProxmoxImage, ProxmoxImageStatus};
use crate::api::image::{ImageTask, ImageTaskAction};
use crate::api::meta::{Capabilities, PolicyMode};
use crate::api::vm::ChecksumAlgorithm;
use crate::api::{Condition, ConditionStatus, Reason, set_condition};
use crate::reconcile::common::event::Event;
use crate::reconcile::common::finalizer::has_finalizer;
use crate::reconcile::common::provider::{self, ProviderState};
use crate::reconcile::common::tasks::{
    ActiveTask, NOT_VISIBLE_GRACE, TaskOutcome, TaskState, backoff, started_at,
};

/// Users named in a message; the rest are counted.
const NAMED: usize = 5;

/// The durations the plan works with (the provider config's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How often a running task is looked at.
    pub poll: Duration,
    /// How often a settled image is looked at again.
    pub resync: Duration,
    /// When a task counts as timed out.
    pub task_timeout: Duration,
}

/// Who refers to the image (from the controller's cache of ProxmoxVMs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Users {
    /// The ProxmoxVMs that name the image (its templates not counted),
    /// sorted.
    pub vms: Vec<String>,
    /// The ProxmoxContainers that name the image (`template.image`),
    /// sorted.
    pub containers: Vec<String>,
    /// How many of them (VMs and containers) are being created (a create task in flight or not
    /// started yet): a previous file is kept while any are.
    pub creating: usize,
    /// The template ProxmoxVMs the image owns.
    pub children: Vec<String>,
}

impl Users {
    /// Whether anything refers to the image: a deletion waits for it to
    /// go, whatever Proxmox shows.
    pub fn any(&self) -> bool {
        !self.vms.is_empty() || !self.containers.is_empty() || !self.children.is_empty()
    }
}

/// One location to serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The node (for a shared storage: the one that downloads).
    pub node: String,
    /// Whether the storage is shared.
    pub shared: bool,
}

/// What the pass saw at one location.
#[derive(Clone, Debug, PartialEq)]
pub enum Site {
    /// The storage's content (of the image's content type) by volume ID
    /// with its size, the state of the task recorded there, and the
    /// node's running tasks when a dispatch may follow.
    Seen {
        /// Volume ID → size in bytes.
        files: BTreeMap<String, u64>,
        /// The recorded task's state.
        task: Option<TaskState>,
        /// The running tasks on the node that write the image's file
        /// (listed only when no task is recorded and the file is missing,
        /// or there without being recorded as this image's while its
        /// `sending` is set).
        active: Vec<ActiveTask>,
        /// This provider's tasks of the file on the node that finished OK
        /// since the image wrote `sending` (listed only when the file is
        /// there without being recorded as this image's): a download
        /// whose recording was lost.
        finished: Vec<ActiveTask>,
        /// By UPID, the `downloading <url> to <dest>` line of the log of
        /// each task above that may be the image's own (read only for
        /// those, see [`super::claim`]).
        logs: BTreeMap<String, String>,
        /// The size Proxmox reports for the URL and the storage's free
        /// space, read only when a download may be dispatched there and
        /// both are known.
        room: Option<Room>,
    },
    /// The storage could not be listed.
    Unreadable(String),
}

pub use crate::reconcile::downloads::Room;

/// What the provider config and Proxmox allowed the pass to see.
#[derive(Clone, Debug, PartialEq)]
pub enum World {
    /// The locations and what each showed.
    Seen(Vec<(Target, Site)>),
    /// The provider config is missing or unusable.
    NoConfig(ProviderState),
    /// The cluster could not be read.
    Unreadable(String),
    /// `source.oci` on a Proxmox VE older than 9.1 (its version), which has
    /// no oci-registry-pull.
    OciUnsupported(String),
    /// The source is one the provider config's `downloadPolicy` refuses
    /// (why, naming the field and the rule); nothing was looked at.
    NotAllowed(String),
}

/// The plan's input.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    /// The resource as read.
    pub image: &'a ProxmoxImage,
    /// Its namespace and name.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Now.
    pub now: Timestamp,
    /// The Proxmox user the provider dispatches as (whose tasks may be
    /// the image's own).
    pub user: &'a str,
    /// The provider config's durations.
    pub timing: Timing,
    /// What Proxmox showed.
    pub world: World,
    /// Who refers to it.
    pub users: Users,
}

/// A Proxmox call at one location; each starts a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The node it is sent to.
    pub node: String,
    /// The storage.
    pub storage: String,
    /// What.
    pub what: CallKind,
}

/// The calls the image makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// `download-url`.
    Download {
        /// URL.
        url: String,
        /// File name.
        file: String,
        /// Content type.
        content: &'static str,
        /// Checksum and its algorithm.
        checksum: Option<(String, ChecksumAlgorithm)>,
        /// The volume it becomes.
        volume: String,
    },
    /// `oci-registry-pull`.
    Pull {
        /// The OCI image reference.
        reference: String,
        /// The `filename` parameter (PVE appends `.tar`).
        file: String,
        /// The volume it becomes.
        volume: String,
    },
    /// `DELETE .../content/{volume}`.
    Delete {
        /// Volume ID.
        volume: String,
    },
}

/// What the pass does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Add (`true`) or remove the finalizer; nothing else this pass.
    Finalizer(bool),
    /// Proxmox calls, at most one per location.
    Calls(Vec<Call>),
}

/// The plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The status as the image controller owns it.
    pub status: ProxmoxImageStatus,
    /// What to do.
    pub step: Step,
    /// Events.
    pub events: Vec<Event>,
    /// When to look again (`None`: on a change only).
    pub requeue: Option<Duration>,
}

/// The locations of an image: the nodes it names (every online node when
/// none), one for a shared storage; plus every node where it has been
/// (a file may be there, and is deleted with the image).
pub fn targets(image: &ProxmoxImage, online: &[String], shared: bool) -> Vec<Target> {
    let spec = &image.spec.for_provider;
    let been: Vec<&ImageLocation> = image
        .status
        .iter()
        .flat_map(|s| s.at_provider.locations.iter())
        .filter(|l| l.phase != LocationPhase::Pending)
        .collect();
    let wanted: Vec<String> = if spec.nodes.is_empty() {
        online.to_vec()
    } else {
        spec.nodes.clone()
    };
    if shared {
        // The node that downloaded it keeps the location; else the first.
        let node = been
            .iter()
            .find(|l| l.shared)
            .map(|l| l.node.clone())
            .or_else(|| wanted.iter().min().cloned());
        return node
            .map(|node| Target { node, shared: true })
            .into_iter()
            .collect();
    }
    let nodes: BTreeSet<String> = wanted
        .into_iter()
        .chain(been.iter().filter(|l| !l.shared).map(|l| l.node.clone()))
        .collect();
    nodes
        .into_iter()
        .map(|node| Target {
            node,
            shared: false,
        })
        .collect()
}

/// Decides.
pub fn plan(input: &Input<'_>) -> Plan {
    let image = input.image;
    let before = image.status.clone().unwrap_or_default();
    let mut out = Plan {
        status: ProxmoxImageStatus {
            at_provider: before.at_provider.clone(),
            conditions: before.conditions.clone(),
            observed_generation: image.metadata.generation,
            ..Default::default()
        },
        step: Step::Calls(vec![]),
        events: vec![],
        requeue: Some(input.timing.resync),
    };
    let users = input.users.vms.len() + input.users.containers.len();
    out.status.at_provider.users = Some(u32::try_from(users).unwrap_or(u32::MAX));
    let caps = match image.spec.managed.mode(&image.metadata) {
        PolicyMode::Active(caps) => caps,
        PolicyMode::Paused => {
            // Nothing at all, as for every kind: a deletion waits too.
            let why = image.spec.managed.paused_by(&image.metadata);
            let why = format!("reconciliation is paused: {}", why.unwrap_or_default());
            synced_only(input, &mut out, Reason::ReconcilePaused, why);
            out.requeue = None;
            return out;
        }
        PolicyMode::Invalid(why) => {
            synced_only(input, &mut out, Reason::InvalidSpec, why);
            out.requeue = None;
            return out;
        }
    };
    let deleting = image.metadata.deletion_timestamp.is_some();
    let has_finalizer = has_finalizer(&image.metadata);
    if deleting && !has_finalizer {
        out.requeue = None;
        return out;
    }
    if !deleting && !has_finalizer {
        // Before anything that could leave a file behind.
        out.step = Step::Finalizer(true);
        out.requeue = Some(input.timing.poll);
        return out;
    }
    let source = names::source(&image.spec.for_provider, input.namespace, input.name);
    let (source, volume) = match source {
        Ok(s) => s,
        // Whatever it downloaded before is still deleted.
        Err(_) if deleting => (Source::Existing, None),
        Err(bad) => {
            say(input, &mut out, (Reason::InvalidSpec, bad.0.clone()), None);
            return out;
        }
    };
    // A source that changed leaves the file of the old one to delete, if
    // it was downloaded by this image.
    let at = &mut out.status.at_provider;
    if at.volume != volume
        && let Some(old) = at.volume.take()
        && before
            .at_provider
            .locations
            .iter()
            .any(|l| l.phase != LocationPhase::Pending)
        && downloaded(&before)
        && !at.previous_volumes.contains(&old)
    {
        at.previous_volumes.push(old);
    }
    at.volume = volume.clone();
    at.downloaded = matches!(source, Source::Download { .. } | Source::Pull { .. });
    if deleting {
        return delete(input, out, volume.as_deref(), &source, caps);
    }
    let sites = match &input.world {
        World::Seen(sites) => sites,
        World::NotAllowed(why) => {
            say(input, &mut out, (Reason::NotAllowed, why.clone()), None);
            return out;
        }
        World::OciUnsupported(version) => {
            let why = format!(
                "pulling an OCI image (source.oci) needs oci-registry-pull, which Proxmox VE has since 9.1; the cluster runs {version}: upgrade it, or use source.url with a container template"
            );
            say(input, &mut out, (Reason::OciNeedsPve91, why), None);
            return out;
        }
        World::NoConfig(state) => {
            // Said and retried as for every kind.
            let problem = state.problem().unwrap_or_else(|| {
                (
                    Reason::ReconcileError,
                    "the provider config was not resolved".to_owned(),
                )
            });
            say(input, &mut out, problem, None);
            out.requeue = Some(provider::RETRY);
            return out;
        }
        World::Unreadable(why) => {
            let why = format!("cannot read the cluster: {why}");
            say(input, &mut out, (Reason::ReconcileError, why), None);
            out.requeue = Some(input.timing.poll);
            return out;
        }
    };
    let Some(volume) = volume else {
        return out;
    };
    let storage = &image.spec.for_provider.storage;
    let mut calls = vec![];
    let mut locations = vec![];
    let mut problems: Vec<(Reason, String)> = vec![];
    let mut wait: Option<Duration> = None;
    for (target, site) in sites {
        let mut loc = location(&before, target, storage);
        let (files, active, finished, logs, room) = match site {
            Site::Unreadable(why) => {
                problems.push((
                    Reason::ReconcileError,
                    format!("cannot list {storage} on node {}: {why}", target.node),
                ));
                locations.push(loc);
                soonest(&mut wait, input.timing.poll);
                continue;
            }
            Site::Seen {
                files,
                task,
                active,
                finished,
                logs,
                room,
            } => {
                if let Some(d) = observe_task(input, &mut out.events, &mut loc, task.as_ref()) {
                    soonest(&mut wait, d);
                    locations.push(loc);
                    continue;
                }
                // A file of ours that is gone is ours no more.
                loc.made.retain(|v| files.contains_key(v));
                (files, active, finished, logs, room)
            }
        };
        let fetched = fetch(&source, input.image, &volume);
        let claim = fetching_task(
            input.image,
            input.namespace,
            input.name,
            input.user,
            Some(&loc),
        );
        if let (Some(_), Some(claim)) = (files.get(&volume), &claim)
            && !loc.made.contains(&volume)
        {
            if let Some(t) = claim.own(active, logs) {
                adopt(input, &mut out.events, &mut loc, t, &volume);
                soonest(&mut wait, input.timing.poll);
            } else if let Some(t) = claim.own(finished, logs) {
                loc.made.push(volume.clone());
                loc.sending = None;
                out.events.push(event(
                    false,
                    "TaskAdopted",
                    format!(
                        "found {} {t} finished OK: {volume} is this image's",
                        t.task_type()
                    ),
                ));
            } else {
                // Another's file (an image's, a seeded volume): never
                // Ready on it, never deleted, never downloaded over.
                loc.size = None;
                let why = format!(
                    "{volume} already exists on node {} and this image did not make it",
                    target.node
                );
                not_owned(input, &mut loc, &mut problems, why, "downloaded or deleted");
                soonest(&mut wait, input.timing.resync);
            }
            if !loc.made.contains(&volume) {
                locations.push(loc);
                continue;
            }
        }
        if let Some(size) = files.get(&volume) {
            loc.phase = LocationPhase::Ready;
            loc.size = Some(*size);
            loc.message = None;
            loc.failures = None;
            loc.failed_at = None;
            locations.push(loc);
            continue;
        }
        loc.size = None;
        match fetched {
            None => {
                loc.phase = LocationPhase::Pending;
                let why = format!("volume {volume} does not exist on node {}", target.node);
                loc.message = Some(why.clone());
                problems.push((Reason::VolumeNotFound, why));
                soonest(&mut wait, input.timing.resync);
            }
            Some((_, _, what)) => {
                let claim = claim.as_ref();
                if let Some(t) = claim.and_then(|c| c.own(active, logs)) {
                    adopt(input, &mut out.events, &mut loc, t, &volume);
                    soonest(&mut wait, input.timing.poll);
                } else if let Some(t) = active
                    .iter()
                    .find(|t| claim.is_some_and(|c| c.same_file(t)))
                {
                    // Another's download of this file (or one this image
                    // cannot tell as its own): a second one would race it
                    // to the same file, so nothing is sent while it runs.
                    let why = format!(
                        "{t} is writing {volume} on node {} and is not this image's",
                        target.node
                    );
                    not_owned(input, &mut loc, &mut problems, why, "downloaded over it");
                    soonest(&mut wait, input.timing.poll);
                } else if let Some(left) = backing_off(input, &loc) {
                    loc.phase = LocationPhase::Failed;
                    problems.push((
                        Reason::TaskFailed,
                        format!(
                            "the download on node {} failed ({} time(s)): {}; retrying in {}s",
                            target.node,
                            loc.failures.unwrap_or(1),
                            loc.message.clone().unwrap_or_default(),
                            left.as_secs()
                        ),
                    ));
                    soonest(&mut wait, left);
                } else if !caps.create {
                    loc.phase = LocationPhase::Pending;
                    let why = format!(
                        "{volume} does not exist on node {}, and managementPolicies do not allow Create",
                        target.node
                    );
                    loc.message = Some(why.clone());
                    problems.push((Reason::ReconcileError, why));
                    soonest(&mut wait, input.timing.resync);
                } else if let Some(why) = room.and_then(|r| {
                    r.shortfall(
                        file_field(input.image),
                        storage,
                        &target.node,
                        input.timing.resync,
                    )
                }) {
                    // Proxmox would fill the storage (often the node's
                    // root file system) and fail: nothing is sent, and
                    // the space is looked at again after a resync.
                    loc.phase = LocationPhase::Pending;
                    loc.message = Some(why.clone());
                    problems.push((Reason::InsufficientStorage, why));
                    soonest(&mut wait, input.timing.resync);
                } else {
                    loc.phase = LocationPhase::Downloading;
                    // Written down before it is sent (see [`super::claim`]).
                    loc.sending = Some(Time(input.now));
                    calls.push(Call {
                        node: target.node.clone(),
                        storage: storage.clone(),
                        what,
                    });
                    soonest(&mut wait, input.timing.poll);
                }
            }
        }
        locations.push(loc);
    }
    // The previous source's files, once the new one is everywhere and no
    // VM is being created (a create whose import-from names the old file
    // was decided from a status that showed it; PVE frees a file without
    // asking who reads it, so it is kept until those creates are done).
    let everywhere =
        !locations.is_empty() && locations.iter().all(|l| l.phase == LocationPhase::Ready);
    let mut previous = out.status.at_provider.previous_volumes.clone();
    // Without Delete the provider deletes no file of this image: the old
    // source's files stay (and stay listed).
    if everywhere && input.users.creating == 0 && !previous.is_empty() && caps.delete {
        for (loc, (target, site)) in locations.iter_mut().zip(sites) {
            let Site::Seen { files, .. } = site else {
                continue;
            };
            if loc.task.is_some() {
                continue;
            }
            if let Some(old) = previous
                .iter()
                .find(|p| files.contains_key(*p) && loc.made.contains(*p))
            {
                calls.push(Call {
                    node: target.node.clone(),
                    storage: storage.clone(),
                    what: CallKind::Delete {
                        volume: old.clone(),
                    },
                });
                soonest(&mut wait, input.timing.poll);
            }
        }
        // Gone, or never ours anywhere (nothing of it to delete).
        let gone = |p: &String| {
            locations
                .iter()
                .zip(sites)
                .all(|(loc, (_, site))| match site {
                    Site::Seen { files, .. } => !files.contains_key(p) || !loc.made.contains(p),
                    Site::Unreadable(_) => false,
                })
        };
        let busy = locations.iter().any(|l| l.task.is_some())
            || calls
                .iter()
                .any(|c| matches!(c.what, CallKind::Delete { .. }));
        if !busy {
            previous.retain(|p| !gone(p));
        }
    }
    out.status.at_provider.previous_volumes = previous;
    let ready = locations
        .iter()
        .filter(|l| l.phase == LocationPhase::Ready)
        .count();
    out.status.at_provider.summary = Some(format!("{ready}/{} ready", locations.len()));
    out.status.at_provider.locations = locations;
    out.step = Step::Calls(calls);
    let problem = problems.into_iter().next();
    say(
        input,
        &mut out,
        problem.unwrap_or((Reason::ReconcileSuccess, String::new())),
        wait,
    );
    out
}

/// What fetches the file of a source: the task type and id a running one
/// shows on the node (to adopt it) and the call that starts it; `None` for
/// a volume that is only referred to.
fn fetch(
    source: &Source,
    image: &ProxmoxImage,
    volume: &str,
) -> Option<(&'static str, String, CallKind)> {
    let spec = &image.spec.for_provider;
    match source {
        Source::Existing => None,
        Source::Download { url, file } => Some((
            "download",
            file.clone(),
            CallKind::Download {
                url: url.clone(),
                file: file.clone(),
                content: spec.content.as_str(),
                checksum: spec
                    .source
                    .checksum
                    .clone()
                    .zip(spec.source.checksum_algorithm),
                volume: volume.to_owned(),
            },
        )),
        // PVE names the task after the file it writes.
        Source::Pull { reference, file } => Some((
            "ociregistrypull",
            pve_client::lxc::oci_file_name(file),
            CallKind::Pull {
                reference: reference.clone(),
                file: file.clone(),
                volume: volume.to_owned(),
            },
        )),
    }
}

/// What tells the image's own task of its file at a location (as the
/// status has it) from another's, as the plan will judge it: the pass
/// lists and reads logs only for what this can take. `None` for a source
/// nothing fetches.
pub fn fetching_task(
    image: &ProxmoxImage,
    namespace: &str,
    name: &str,
    user: &str,
    loc: Option<&ImageLocation>,
) -> Option<Claim> {
    let (source, volume) = names::source(&image.spec.for_provider, namespace, name).ok()?;
    let (task_type, id, _) = fetch(&source, image, volume.as_deref()?)?;
    let url = match &source {
        Source::Download { url, .. } => Some(url.clone()),
        Source::Existing | Source::Pull { .. } => None,
    };
    Some(Claim::new(task_type, id, url, user, loc))
}

/// Whether the volume the status shows was downloaded by this image.
fn downloaded(status: &ProxmoxImageStatus) -> bool {
    status.at_provider.downloaded
}

/// The location's entry as the status had it, or a new one.
fn location(before: &ProxmoxImageStatus, target: &Target, storage: &str) -> ImageLocation {
    let found = before
        .at_provider
        .locations
        .iter()
        .find(|l| l.node == target.node && l.storage == storage);
    match found {
        Some(l) => ImageLocation {
            shared: target.shared,
            ..l.clone()
        },
        None => ImageLocation {
            node: target.node.clone(),
            storage: storage.to_owned(),
            shared: target.shared,
            phase: LocationPhase::Pending,
            task: None,
            size: None,
            message: None,
            failures: None,
            failed_at: None,
            sending: None,
            made: vec![],
        },
    }
}

/// The location waits on a file (or a task writing it) that is not the
/// image's: `NotOwned`, naming the field that chose the name.
fn not_owned(
    input: &Input<'_>,
    loc: &mut ImageLocation,
    problems: &mut Vec<(Reason, String)>,
    what: String,
    nothing: &str,
) {
    loc.phase = LocationPhase::Pending;
    let why = format!(
        "{what}; {} names a file that is not its own (nothing is {nothing}: choose another name)",
        file_field(input.image)
    );
    loc.message = Some(why.clone());
    problems.push((Reason::NotOwned, why));
}

/// The field that named the file: `filename` when given, else the source
/// its default name comes from.
fn file_field(image: &ProxmoxImage) -> &'static str {
    let spec = &image.spec.for_provider;
    if spec.filename.is_some() {
        "spec.forProvider.filename"
    } else if spec.source.oci.is_some() {
        "spec.forProvider.source.oci"
    } else {
        "spec.forProvider.source.url"
    }
}

fn soonest(wait: &mut Option<Duration>, d: Duration) {
    *wait = Some(wait.map_or(d, |w| w.min(d)));
}

/// The time left of a failed location's backoff.
fn backing_off(input: &Input<'_>, loc: &ImageLocation) -> Option<Duration> {
    backoff_left(loc, input.now)
}

/// The time left at `now` of the backoff of a location whose download
/// failed, or `None`: the pass asks nothing for a download it would not
/// send yet.
pub fn backoff_left(loc: &ImageLocation, now: Timestamp) -> Option<Duration> {
    let (count, at) = (loc.failures?, loc.failed_at.as_ref()?);
    let until = at.0 + backoff(count);
    (now < until).then(|| until.duration_since(now).unsigned_abs())
}

/// Observes the task recorded at the location: `Some(delay)` while it
/// runs (nothing else happens there), `None` once it ended or is gone
/// (the outcome recorded, the task cleared).
fn observe_task(
    input: &Input<'_>,
    events: &mut Vec<Event>,
    loc: &mut ImageLocation,
    state: Option<&TaskState>,
) -> Option<Duration> {
    let task = loc.task.clone()?;
    let state = state
        .cloned()
        .unwrap_or(TaskState::Unreadable("it was not observed".into()));
    let downloading = task.action == ImageTaskAction::DownloadImage;
    let age = input.now.duration_since(task.started_at.0).unsigned_abs();
    match state {
        TaskState::Running { progress } => {
            let progress = progress.or(task.progress).map(|p| p.min(100));
            if let Some(t) = loc.task.as_mut() {
                t.progress = progress;
                t.summary = ImageTask::summarize(&t.type_, progress);
            }
            if downloading {
                loc.phase = LocationPhase::Downloading;
            }
            Some(input.timing.poll)
        }
        TaskState::NotFound if age < NOT_VISIBLE_GRACE => Some(input.timing.poll),
        TaskState::NotFound => {
            loc.task = None;
            events.push(event(
                true,
                "TaskLost",
                format!(
                    "Proxmox no longer knows task {}; looking at the storage instead",
                    task.upid
                ),
            ));
            None
        }
        TaskState::Unreadable(why) => {
            loc.message = Some(format!(
                "cannot read the status of task {}: {why}",
                task.upid
            ));
            Some(input.timing.poll)
        }
        TaskState::Finished(TaskOutcome::Succeeded { .. }) => {
            loc.task = None;
            // The file it wrote is this image's.
            if downloading
                && let Some(v) = &task.target
                && !loc.made.contains(v)
            {
                loc.made.push(v.clone());
            }
            events.push(event(
                false,
                "TaskSucceeded",
                format!("{} {} finished: OK", task.type_, task.upid),
            ));
            None
        }
        TaskState::Finished(TaskOutcome::Failed {
            exit_status,
            log_tail,
        }) => {
            loc.task = None;
            let why: Vec<&str> = log_tail
                .iter()
                .map(String::as_str)
                .filter(|l| !l.starts_with("TASK ERROR:") && !l.trim().is_empty())
                .collect();
            let why = &why[why.len().saturating_sub(3)..];
            let message = if why.is_empty() {
                exit_status.clone()
            } else {
                format!("{exit_status} ({})", why.join(" | "))
            };
            events.push(event(
                true,
                "TaskFailed",
                format!("{} {} failed: {message}", task.type_, task.upid),
            ));
            failed(input, loc, message);
            None
        }
    }
}

/// Records a failure at the location.
fn failed(input: &Input<'_>, loc: &mut ImageLocation, message: String) {
    loc.phase = LocationPhase::Failed;
    loc.failures = Some(loc.failures.unwrap_or(0).saturating_add(1));
    loc.failed_at = Some(Time(input.now));
    loc.message = Some(message);
}

/// Takes over a download found running: a status write was lost after it
/// was dispatched (or another pass of this image started it).
fn adopt(
    input: &Input<'_>,
    events: &mut Vec<Event>,
    loc: &mut ImageLocation,
    t: &ActiveTask,
    volume: &str,
) {
    let started = started_at(t);
    loc.phase = LocationPhase::Downloading;
    loc.sending = None;
    loc.task = Some(in_flight(
        input,
        t,
        ImageTaskAction::DownloadImage,
        volume,
        started,
    ));
    events.push(event(
        false,
        "TaskAdopted",
        format!(
            "found {} {t} already running; observing it instead of starting another",
            t.task_type()
        ),
    ));
}

fn in_flight(
    input: &Input<'_>,
    upid: &ActiveTask,
    action: ImageTaskAction,
    volume: &str,
    started: Timestamp,
) -> ImageTask {
    ImageTask {
        upid: upid.to_string(),
        action,
        type_: upid.task_type().to_owned(),
        node: upid.node().to_owned(),
        target: Some(volume.to_owned()),
        started_at: Time(started),
        deadline: Time(started + input.timing.task_timeout),
        progress: None,
        summary: ImageTask::summarize(upid.task_type(), None),
    }
}

fn event(warning: bool, reason: &'static str, note: String) -> Event {
    Event {
        warning,
        reason,
        note,
    }
}

/// The deletion: wait while anything refers to the image, then delete
/// every file it downloaded, then let it go.
fn delete(
    input: &Input<'_>,
    mut out: Plan,
    volume: Option<&str>,
    source: &Source,
    caps: Capabilities,
) -> Plan {
    let users = &input.users;
    if users.any() {
        let mut why = vec![];
        if !users.vms.is_empty() {
            why.push(format!(
                "{} ProxmoxVM(s) refer to it: {}",
                users.vms.len(),
                named(&users.vms)
            ));
        }
        if !users.containers.is_empty() {
            why.push(format!(
                "{} ProxmoxContainer(s) refer to it: {}",
                users.containers.len(),
                named(&users.containers)
            ));
        }
        if !users.children.is_empty() {
            why.push(format!(
                "its {} template VM(s) still exist: {}",
                users.children.len(),
                named(&users.children)
            ));
        }
        let message = format!("cannot be deleted yet: {}", why.join("; "));
        let before = find(&out.status.conditions, ConditionType::Synced).cloned();
        if before
            .as_ref()
            .map(|c| (c.reason.as_str(), c.message.as_deref()))
            != Some((Reason::ImageInUse.as_str(), Some(message.as_str())))
        {
            out.events.push(event(true, "ImageInUse", message.clone()));
        }
        let now = Time(input.now);
        let generation = out.status.observed_generation;
        for type_ in [ConditionType::Ready, ConditionType::Synced] {
            let mut c = Condition::new(
                type_,
                ConditionStatus::False,
                Reason::ImageInUse,
                &message,
                now.clone(),
            );
            c.observed_generation = generation;
            set_condition(&mut out.status.conditions, c);
        }
        // A referring VM that goes wakes the image (see `refs`).
        out.requeue = Some(input.timing.resync);
        return out;
    }
    if !caps.delete {
        // Orphaned: the files stay on Proxmox.
        out.events.push(event(
            false,
            "Orphaned",
            "managementPolicies do not allow Delete: the files are left on Proxmox".into(),
        ));
        out.step = Step::Finalizer(false);
        out.requeue = None;
        return out;
    }
    let sites = match &input.world {
        World::Seen(sites) => sites,
        // Never seen while deleting (the pass reads the version only to
        // pull, and checks the download policy only when not deleting);
        // said as a cluster it cannot act on.
        other @ (World::NoConfig(_)
        | World::Unreadable(_)
        | World::OciUnsupported(_)
        | World::NotAllowed(_)) => {
            let why = match other {
                World::NoConfig(state) => state
                    .problem()
                    .map(|(_, message)| message)
                    .unwrap_or_default(),
                World::Unreadable(why) | World::OciUnsupported(why) | World::NotAllowed(why) => {
                    why.clone()
                }
                World::Seen(_) => String::new(),
            };
            if matches!(source, Source::Existing)
                && out.status.at_provider.previous_volumes.is_empty()
            {
                // Nothing of ours to delete.
                out.step = Step::Finalizer(false);
                out.requeue = None;
                return out;
            }
            let why = format!("cannot delete the downloaded files: {why}");
            deleting(input, &mut out, &why);
            out.requeue = Some(input.timing.poll);
            return out;
        }
    };
    let mut ours: Vec<String> = out.status.at_provider.previous_volumes.clone();
    if let (Source::Download { .. } | Source::Pull { .. }, Some(v)) = (source, volume) {
        ours.push(v.to_owned());
    }
    let storage = &input.image.spec.for_provider.storage;
    let before = input.image.status.clone().unwrap_or_default();
    let mut calls = vec![];
    let mut locations = vec![];
    let mut pending = false;
    for (target, site) in sites {
        let mut loc = location(&before, target, storage);
        let files = match site {
            Site::Unreadable(_) => {
                pending = true;
                locations.push(loc);
                continue;
            }
            Site::Seen { files, task, .. } => {
                if observe_task(input, &mut out.events, &mut loc, task.as_ref()).is_some() {
                    pending = true;
                    locations.push(loc);
                    continue;
                }
                files
            }
        };
        loc.made.retain(|v| files.contains_key(v));
        // Only what this image's own task wrote here.
        if let Some(file) = ours
            .iter()
            .find(|v| files.contains_key(*v) && loc.made.contains(*v))
        {
            loc.phase = LocationPhase::Deleting;
            calls.push(Call {
                node: target.node.clone(),
                storage: storage.clone(),
                what: CallKind::Delete {
                    volume: file.clone(),
                },
            });
            pending = true;
        } else {
            loc.phase = LocationPhase::Pending;
            loc.size = None;
        }
        locations.push(loc);
    }
    if !pending {
        out.step = Step::Finalizer(false);
        out.requeue = None;
        return out;
    }
    out.status.at_provider.locations = locations;
    out.step = Step::Calls(calls);
    deleting(input, &mut out, "deleting the downloaded files");
    out.requeue = Some(input.timing.poll);
    out
}

/// Sets `Synced` alone (paused, invalid policies: `Ready` says what it
/// said, as for every kind).
fn synced_only(input: &Input<'_>, out: &mut Plan, reason: Reason, message: String) {
    let mut c = Condition::new(
        ConditionType::Synced,
        ConditionStatus::False,
        reason,
        message,
        Time(input.now),
    );
    c.observed_generation = out.status.observed_generation;
    set_condition(&mut out.status.conditions, c);
}

fn deleting(input: &Input<'_>, out: &mut Plan, message: &str) {
    let now = Time(input.now);
    let generation = out.status.observed_generation;
    for (type_, reason) in [
        (ConditionType::Ready, Reason::Deleting),
        (ConditionType::Synced, Reason::Deleting),
    ] {
        let mut c = Condition::new(type_, ConditionStatus::False, reason, message, now.clone());
        c.observed_generation = generation;
        set_condition(&mut out.status.conditions, c);
    }
}

fn named(names: &[String]) -> String {
    let mut s = names
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMED {
        s.push_str(&format!(" and {} more", names.len() - NAMED));
    }
    s
}

/// Sets Ready and Synced from what the pass found: `problem` is the Synced
/// reason (`ReconcileSuccess` when none) and its message.
fn say(
    input: &Input<'_>,
    out: &mut Plan,
    (reason, message): (Reason, String),
    wait: Option<Duration>,
) {
    let now = Time(input.now);
    let at = &out.status.at_provider;
    let total = at.locations.len();
    let ready_files = at
        .locations
        .iter()
        .filter(|l| l.phase == LocationPhase::Ready)
        .count();
    let downloading = at
        .locations
        .iter()
        .filter(|l| l.phase == LocationPhase::Downloading)
        .count();
    let wants_templates = input.image.spec.for_provider.template.is_some();
    let templates_ready = !at.templates.is_empty() && at.templates.iter().all(|t| t.ready);
    let files_ready = total > 0 && ready_files == total;
    let ready = if files_ready && (!wants_templates || templates_ready) {
        Condition::available(now.clone())
    } else if files_ready {
        Condition::creating(
            format!(
                "the file is on all {total} location(s); waiting for the template VMs ({})",
                at.template_summary
                    .clone()
                    .unwrap_or_else(|| "none yet".into())
            ),
            now.clone(),
        )
    } else if reason == Reason::ReconcileSuccess {
        Condition::creating(
            format!("{ready_files} of {total} location(s) ready, {downloading} downloading"),
            now.clone(),
        )
    } else {
        Condition::new(
            ConditionType::Ready,
            ConditionStatus::False,
            Reason::Unavailable,
            message.clone(),
            now.clone(),
        )
    };
    let synced = match reason {
        Reason::ReconcileSuccess if downloading > 0 => Condition::new(
            ConditionType::Synced,
            ConditionStatus::True,
            Reason::DownloadingImage,
            format!("downloading on {downloading} of {total} location(s)"),
            now,
        ),
        Reason::ReconcileSuccess => Condition::reconcile_success(message, now),
        other => Condition::new(
            ConditionType::Synced,
            ConditionStatus::False,
            other,
            message,
            now,
        ),
    };
    let generation = out.status.observed_generation;
    for mut c in [ready, synced] {
        c.observed_generation = generation;
        set_condition(&mut out.status.conditions, c);
    }
    if let Some(wait) = wait {
        out.requeue = Some(wait);
    }
}

/// Folds what the calls did into the plan: a started task recorded at its
/// location with a `TaskStarted` event; a refused call recorded as a
/// failure there (retried after the backoff).
pub fn settle(
    input: &Input<'_>,
    mut plan: Plan,
    done: Vec<(Call, Result<ActiveTask, String>)>,
) -> Plan {
    for (call, result) in done {
        let Some(loc) = plan
            .status
            .at_provider
            .locations
            .iter_mut()
            .find(|l| l.node == call.node)
        else {
            continue;
        };
        let (action, volume) = match &call.what {
            CallKind::Download { volume, .. } | CallKind::Pull { volume, .. } => {
                (ImageTaskAction::DownloadImage, volume.as_str())
            }
            CallKind::Delete { volume } => (ImageTaskAction::DeleteVolume, volume.as_str()),
        };
        // Sent and recorded, or refused: nothing left to find again.
        loc.sending = None;
        match result {
            Ok(upid) => {
                loc.task = Some(in_flight(input, &upid, action, volume, input.now));
                plan.events.push(event(
                    false,
                    "TaskStarted",
                    format!(
                        "started {} {upid} for {volume} on node {}",
                        upid.task_type(),
                        call.node
                    ),
                ));
            }
            Err(why) => {
                let message = format!("{} of {volume} was refused: {why}", action.describe());
                plan.events.push(event(true, "TaskFailed", message.clone()));
                if action == ImageTaskAction::DownloadImage {
                    failed(input, loc, message);
                } else {
                    loc.message = Some(message);
                }
            }
        }
    }
    plan
}
