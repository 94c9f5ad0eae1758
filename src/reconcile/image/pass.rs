//! One pass of a ProxmoxImage: connect → observe → plan → act → settle →
//! report. The I/O around [`super::plan`].
//!
//! What it asks Proxmox, per pass: the cluster view (shared with every VM
//! pass of the config, one `GET /cluster/resources` per poll interval),
//! one content listing per location (the file there, and its size), the
//! recorded task of a location through the client's batched task observer
//! (one task list per node per second for all tasks in flight), and the
//! node's running tasks (the same shared list) only where a file is
//! missing and no task is recorded: a task of that file running is adopted
//! if it is the image's own (see [`super::claim`]), else waited for, never
//! raced by a second one. Where the file is there but not recorded as made
//! by this image, and only if the image wrote down it was sending there
//! (`sending`), one `GET /nodes/{node}/tasks` of its task type since then:
//! its own download, running or ended OK, makes it its own; else (and
//! without `sending`, with no request) it is another's (`NotOwned`), never
//! Ready on, downloaded over or deleted. Recovering from a lost status
//! write, one `GET /nodes/{node}/tasks/{upid}/log` per task of the file
//! that may be its own download (only the log names the URL). Before a
//! download or pull is sent, one status patch writing `sending` down. For
//! `source.oci`, in such a pass only, one `GET /version` (oci-registry-pull
//! needs PVE 9.1; an older one is said, `OciNeedsPve91`, and nothing sent).
//! For `source.url`, where a download would be dispatched (and only
//! there), one `GET /nodes/{node}/query-url-metadata`: a file larger than
//! the storage's free space (from the cluster view, no request) is
//! `InsufficientStorage` and not sent. The source's host as written is
//! judged on every pass (no I/O); its DNS lookup (no Proxmox request) is
//! made only in a pass that would send (so an image at rest makes none).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::claim::{self, Claim};
use super::plan::{self, Call, CallKind, Input, Site, Step, Target, Timing, World};
use super::refs;
use crate::api::ProxmoxImage;
use crate::api::image::{ImageContent, LocationPhase};
use crate::api::vm::vm_ref;
use crate::reconcile::common::tasks::TaskState;
use crate::reconcile::common::{finalizer, provider};
use crate::reconcile::context::Context;
use crate::reconcile::downloads;
use crate::reconcile::error::{Error, is_not_found};
use crate::reconcile::managed::envelope::{self, run_held};
use crate::reconcile::managed::{fresh, tasks};
use crate::reconcile::providers::{ConfigKey, Connection};
use crate::reconcile::runtime::shards::Hold;
use pve_client::lxc::OciPull;
use pve_client::{Checksum, Client, DownloadContent, DownloadUrl, Upid};

/// The image controller's reconcile function: only for a config this
/// replica holds, like a VM's (see [`crate::reconcile::runtime::shards`]).
pub async fn reconcile(image: Arc<ProxmoxImage>, ctx: Arc<Context>) -> Result<Action, Error> {
    let api =
        Api::<ProxmoxImage>::namespaced(ctx.kube.clone(), &image.namespace().unwrap_or_default());
    // As this replica last wrote it (the cache may lag that write).
    let Some(image) = fresh::current(image.as_ref(), &api, &ctx.memory).await? else {
        return Ok(Action::await_change());
    };
    let image = &image;
    let hold = match envelope::hold(&ctx, &ConfigKey::of(image)) {
        Ok(hold) => hold,
        Err(action) => return Ok(action),
    };
    // Every VM cloning or importing it waits for its next step.
    let _admitted = ctx.queue.admit_first(&ctx.metrics).await;
    let span = tracing::info_span!("image", image = %format!("{}/{}", image.namespace().unwrap_or_default(), image.name_any()));
    let pass = tracing::Instrument::instrument(pass(image, &ctx, &hold), span);
    let action = run_held(&hold, pass).await?;
    // A pass ran: a reconcile request is answered.
    ctx.shards.fence(&hold)?;
    crate::reconcile::managed::status::echo_request(&api, image).await?;
    Ok(action)
}

/// After a failed pass: retried with the resource's backoff.
pub fn error_policy(image: Arc<ProxmoxImage>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Error::Fenced { .. } = error {
        return Action::await_change();
    }
    let uid = image.uid().unwrap_or_default();
    let delay = ctx.memory.failed(&uid);
    tracing::warn!(image = %image.name_any(), %error, retry_in_ms = delay.as_millis() as u64, "image reconcile failed");
    Action::requeue(delay)
}

async fn pass(image: &ProxmoxImage, ctx: &Context, hold: &Hold) -> Result<Action, Error> {
    let namespace = image.namespace().unwrap_or_default();
    let name = image.name_any();
    let key = ConfigKey::of(image);
    let now = Timestamp::now();
    let (users, user_nodes) = refs::users(&ctx.store, &ctx.containers, image);
    ctx.shards.fence(hold)?;
    // An image that has downloaded something depends on its config.
    let started = image.metadata.deletion_timestamp.is_some()
        || image.status.as_ref().is_some_and(|s| {
            s.at_provider
                .locations
                .iter()
                .any(|l| l.phase != LocationPhase::Pending)
        });
    // A config or Secret the RBAC does not let it read: said as for every kind.
    let connection = provider::refused_as_state(ctx.providers.connect_to(&key, started).await)?;
    if hold.report_only() && connection.is_ok() {
        return Ok(Action::await_change());
    }
    let (timing, world, client) = match connection {
        Ok(connection) => {
            let timing = timing_of(&connection);
            // A deletion waiting for its users decides nothing from what
            // the storages show (`plan::delete`).
            let waiting = image.metadata.deletion_timestamp.is_some() && users.any();
            let world = observe(ctx, &connection, image, (&user_nodes, waiting)).await;
            (timing, world, Some(connection.client))
        }
        Err(state) => {
            let default = crate::api::provider_config::Timing::default();
            let timing = Timing {
                poll: default.poll_interval,
                resync: ctx.providers.default_resync(),
                task_timeout: default.task_timeout,
            };
            (timing, World::NoConfig(state), None)
        }
    };
    let user = client
        .as_ref()
        .map(|c| c.user().to_owned())
        .unwrap_or_default();
    let input = Input {
        image,
        namespace: &namespace,
        name: &name,
        now,
        user: &user,
        timing,
        world,
        users,
    };
    let mut planned = plan::plan(&input);
    let api: Api<ProxmoxImage> = Api::namespaced(ctx.kube.clone(), &namespace);
    match &planned.step {
        Step::Finalizer(present) => {
            ctx.shards.fence(hold)?;
            match finalizer(&api, image, *present).await {
                Ok(written) => fresh::wrote(&ctx.memory, image, &written),
                Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
                Err(e) => return Err(e.into()),
            }
            if !*present {
                ctx.memory.forget(&image.uid().unwrap_or_default());
                return Ok(Action::await_change());
            }
        }
        Step::Calls(calls) if !calls.is_empty() => {
            // A download or pull is written down (`sending`) before it is
            // sent: after a status write lost behind it, only that tells
            // its task from another image's of the same file. Not written,
            // not sent.
            if calls
                .iter()
                .any(|c| !matches!(c.what, CallKind::Delete { .. }))
            {
                ctx.shards.fence(hold)?;
                write_status(&api, image, &planned.status)
                    .await?
                    .inspect(|written| fresh::wrote(&ctx.memory, image, written));
            }
            let mut done = vec![];
            if let Some(client) = &client {
                for call in calls {
                    ctx.shards.fence(hold)?;
                    let result = act(client, call, image.spec.for_provider.content).await;
                    done.push((call.clone(), result.map_err(|e| e.to_string())));
                }
            }
            planned = plan::settle(&input, planned, done);
        }
        Step::Calls(_) => {}
    }
    ctx.shards.fence(hold)?;
    if let Some(written) = write_status(&api, image, &planned.status).await? {
        fresh::wrote(&ctx.memory, image, &written);
    }
    for event in &planned.events {
        ctx.shards.fence(hold)?;
        ctx.events.publish(image, event).await;
    }
    wake_users(ctx, image, &planned.status);
    ctx.memory.succeeded(&image.uid().unwrap_or_default());
    Ok(match planned.requeue {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

fn timing_of(connection: &Connection) -> Timing {
    Timing {
        poll: connection.timing.poll_interval,
        resync: connection.timing.resync_interval,
        task_timeout: connection.timing.task_timeout,
    }
}

/// Looks at every location: the content of the storage there, the task
/// recorded there, and the node's running tasks where a dispatch may
/// follow.
async fn observe(
    ctx: &Context,
    connection: &Connection,
    image: &ProxmoxImage,
    (user_nodes, waiting): (&std::collections::BTreeSet<String>, bool),
) -> World {
    let client = &connection.client;
    let spec = &image.spec.for_provider;
    let view = match ctx
        .inventory
        .view(&connection.key, client, connection.timing.poll_interval)
        .await
    {
        Ok(view) => view,
        Err(e) => return World::Unreadable(e.to_string()),
    };
    // A source the config's downloadPolicy refuses is never fetched (a
    // deleted image still deletes what it made): the host as written on
    // every pass (no I/O), what it resolves to only in a pass that would
    // send it (below), so an image at rest does no DNS lookup.
    let internal = connection.internal_names(view.nodes.iter().map(|n| n.name.as_str()));
    let source = fetched_source(spec);
    if image.metadata.deletion_timestamp.is_none()
        && let Some((field, source)) = source
        && let Some(why) =
            downloads::refusal(connection.downloads.as_ref(), field, source, &internal)
    {
        return World::NotAllowed(why);
    }
    let mut resolved = false;
    let online: Vec<String> = view
        .nodes
        .iter()
        .filter(|n| n.online)
        .map(|n| n.name.clone())
        .collect();
    let shared = view.shared_storages.contains(&spec.storage);
    let mut targets = plan::targets(image, &online, shared);
    if !shared {
        // Where its VMs are or were placed, the file goes too.
        for node in user_nodes {
            if !targets.iter().any(|t| &t.node == node) {
                targets.push(Target {
                    node: node.clone(),
                    shared: false,
                });
            }
        }
    }
    let volume = super::names::source(
        spec,
        &image.namespace().unwrap_or_default(),
        &image.name_any(),
    )
    .ok()
    .and_then(|(_, v)| v);
    let deleting = image.metadata.deletion_timestamp.is_some();
    let downloads = spec.source.url.is_some() || spec.source.oci.is_some();
    let status = image.status.clone().unwrap_or_default();
    let creates = matches!(
        image.spec.managed.mode(&image.metadata),
        crate::api::meta::PolicyMode::Active(caps) if caps.create
    );
    let mut sites = vec![];
    // Whether this Proxmox has oci-registry-pull, read once per pass.
    let mut pulls = false;
    for target in targets {
        let here = status
            .at_provider
            .locations
            .iter()
            .find(|l| l.node == target.node && l.storage == spec.storage);
        let recorded = here.and_then(|l| l.task.clone());
        let made = volume
            .as_ref()
            .is_some_and(|v| here.is_some_and(|l| l.made.contains(v)));
        let task = match &recorded {
            Some(t) => Some(match Upid::parse(&t.upid) {
                Ok(upid) => tasks::task_state(client, &upid).await,
                Err(e) => TaskState::Unreadable(format!("the recorded UPID is invalid: {e}")),
            }),
            None => None,
        };
        // A location at rest (its file made and Ready, nothing in flight,
        // the image not being deleted, or its deletion waiting for its
        // users) takes a listing up to a poll interval old; anything else
        // is looked at now. A fleet's clones each wake their image as they
        // appear, are placed, created and go: at 1,000 VMs those passes
        // listed every location 3.5 times per VM.
        let at_rest = recorded.is_none()
            && (waiting
                || !deleting && made && here.is_some_and(|l| l.phase == LocationPhase::Ready));
        let max_age = if at_rest {
            connection.timing.poll_interval
        } else {
            std::time::Duration::ZERO
        };
        let files = match content(
            (ctx, connection),
            &target.node,
            &spec.storage,
            (spec.content, max_age),
        )
        .await
        {
            Ok(files) => files,
            Err(e) => {
                sites.push((target, Site::Unreadable(e.to_string())));
                continue;
            }
        };
        let missing = volume.as_ref().is_none_or(|v| !files.contains_key(v));
        let dispatching = missing && downloads && !deleting && recorded.is_none();
        if dispatching && spec.source.oci.is_some() && !pulls {
            match oci_pull_missing(client).await {
                Ok(None) => pulls = true,
                Ok(Some(version)) => return World::OciUnsupported(version),
                Err(e) => {
                    sites.push((target, Site::Unreadable(e.to_string())));
                    continue;
                }
            }
        }
        // What tells this image's own task of the file from another's, as
        // the plan judges it (see super::claim).
        let claim = plan::fetching_task(
            image,
            &image.namespace().unwrap_or_default(),
            &image.name_any(),
            client.user(),
            here,
        );
        // A file there that this image is not recorded to have made: its
        // own only if it wrote down it was sending here and that download
        // is listed (a lost status write); else another's, and nothing is
        // asked.
        let unclaimed = !missing && downloads && !deleting && recorded.is_none() && !made;
        let listed =
            match (&claim, claim.as_ref().and_then(Claim::since)) {
                // The node's running tasks (the shared list, no extra request):
                // one of the file, anyone's, is adopted or waited for.
                (Some(claim), _) if dispatching => tasks::active_tasks(client, &target.node)
                    .await
                    .map(|active| {
                        let active = active.into_iter().filter(|t| claim.same_file(t));
                        (active.collect(), vec![])
                    }),
                (Some(claim), Some(since)) if unclaimed => {
                    tasks::own_tasks(client, &target.node, claim.task_type, since)
                        .await
                        .map(|(running, finished)| {
                            let of_file = |t: &Upid| claim.same_file(t);
                            (
                                running.into_iter().filter(of_file).collect(),
                                finished.into_iter().filter(of_file).collect(),
                            )
                        })
                }
                _ => Ok((vec![], vec![])),
            };
        let (active, finished): (Vec<Upid>, Vec<Upid>) = match listed {
            Ok(listed) => listed,
            Err(e) => {
                sites.push((target, Site::Unreadable(e.to_string())));
                continue;
            }
        };
        let logs = match &claim {
            Some(claim) => {
                match download_lines(client, claim, active.iter().chain(&finished)).await {
                    Ok(logs) => logs,
                    Err(e) => {
                        sites.push((target, Site::Unreadable(e.to_string())));
                        continue;
                    }
                }
            }
            None => BTreeMap::new(),
        };
        // Only where a download would be sent: no task of the file
        // running (the plan adopts or waits for it), no backoff to wait
        // out, Create allowed.
        let sendable = dispatching
            && active.is_empty()
            && here.is_none_or(|l| plan::backoff_left(l, Timestamp::now()).is_none())
            && creates;
        if sendable
            && !resolved
            && let Some((field, source)) = source
        {
            resolved = true;
            if let Some(why) = downloads::checked(
                connection.downloads.as_ref(),
                field,
                source,
                &internal,
                &connection.endpoint_host,
                &ctx.metrics,
            )
            .await
            {
                return World::NotAllowed(why);
            }
        }
        let room = match &spec.source.url {
            Some(url) if sendable => {
                downloads::room(client, &view, &target.node, &spec.storage, url).await
            }
            _ => None,
        };
        sites.push((
            target,
            Site::Seen {
                files,
                task,
                active,
                finished,
                logs,
                room,
            },
        ));
    }
    World::Seen(sites)
}

/// The `downloading <url> to <dest>` line of the log of each task that may
/// be the image's own download (see [`Claim::candidate`]): one `GET
/// /nodes/{node}/tasks/{upid}/log` per such task, asked only in a pass
/// that recovers from a lost status write (the image wrote `sending` and
/// recorded no task), since only the log tells its download from another
/// image's of the same file and user. A pull's log names no reference and
/// is not read.
async fn download_lines(
    client: &Client,
    claim: &Claim,
    tasks: impl Iterator<Item = &Upid>,
) -> Result<BTreeMap<String, String>, pve_client::Error> {
    let mut lines = BTreeMap::new();
    if claim.url.is_none() {
        return Ok(lines);
    }
    for t in tasks.filter(|t| claim.candidate(t)) {
        let log = client.task_log(t, 0, LOG_HEAD).await?;
        if let Some(line) = claim::download_line(log.lines.iter().map(|l| l.t.as_str())) {
            lines.insert(t.to_string(), line.to_owned());
        }
    }
    Ok(lines)
}

/// The first lines of a download's log, where PVE says what it fetches.
const LOG_HEAD: u32 = 5;

/// What the image fetches and the field naming it, or `None` for
/// `importFrom`.
fn fetched_source(
    spec: &crate::api::image::ImageParameters,
) -> Option<(&'static str, downloads::Source<'_>)> {
    match (&spec.source.url, &spec.source.oci) {
        (Some(url), _) => Some(("spec.forProvider.source.url", downloads::Source::Url(url))),
        (None, Some(oci)) => Some(("spec.forProvider.source.oci", downloads::Source::Oci(oci))),
        (None, None) => None,
    }
}

/// The version of a Proxmox VE without oci-registry-pull (before 9.1), or
/// `None`: one `GET /version`, only in a pass that may pull (a file missing,
/// no task recorded), so a Ready image never asks.
async fn oci_pull_missing(client: &Client) -> Result<Option<String>, pve_client::Error> {
    let version = client.version().await?;
    Ok((!version.has_oci_registry_pull()).then(|| format!("Proxmox VE {}", version.version)))
}

/// The volumes of `content` on the storage at `node`, with their sizes,
/// listed at most `max_age` ago (see [`crate::reconcile::inventory::Inventory::content`]).
async fn content(
    (ctx, connection): (&Context, &Connection),
    node: &str,
    storage: &str,
    (content, max_age): (ImageContent, std::time::Duration),
) -> Result<BTreeMap<String, u64>, pve_client::Error> {
    let listing = ctx
        .inventory
        .content(
            &connection.key,
            &connection.client,
            (node, storage, content.as_str()),
            max_age,
        )
        .await?;
    Ok(listing
        .iter()
        .map(|c| (c.volid.clone(), c.size.unwrap_or_default()))
        .collect())
}

async fn act(
    client: &Client,
    call: &Call,
    content: ImageContent,
) -> Result<Upid, pve_client::Error> {
    match &call.what {
        CallKind::Download {
            url,
            file,
            checksum,
            ..
        } => {
            let req = DownloadUrl {
                url: url.clone(),
                content: match content {
                    ImageContent::Import => DownloadContent::Import,
                    ImageContent::Iso => DownloadContent::Iso,
                    ImageContent::Vztmpl => DownloadContent::Vztmpl,
                },
                filename: file.clone(),
                checksum: checksum.as_ref().map(|(value, algorithm)| Checksum {
                    value: value.clone(),
                    algorithm: algorithm.as_str().to_owned(),
                }),
                verify_certificates: None,
            };
            client.download_url(&call.node, &call.storage, &req).await
        }
        CallKind::Pull {
            reference, file, ..
        } => {
            let pull = OciPull {
                reference: reference.clone(),
                filename: file.clone(),
            };
            client
                .pull_oci_image(&call.node, &call.storage, &pull)
                .await
        }
        CallKind::Delete { volume } => {
            client
                .delete_volume(&call.node, &call.storage, volume)
                .await
        }
    }
}

/// Adds or removes the finalizer (see [`finalizer::patch`]).
async fn finalizer(
    api: &Api<ProxmoxImage>,
    image: &ProxmoxImage,
    present: bool,
) -> Result<ProxmoxImage, kube::Error> {
    let patch = finalizer::patch(&image.metadata, present);
    api.patch(
        &image.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
}

/// Writes the fields of the status this controller owns, with a JSON merge
/// patch of those fields only: the fleet controller writes `templates` and
/// `templateSummary` of the same status, and neither may replace the
/// other's. Nothing is written when nothing changed; the written object is
/// returned (its version is this replica's last write).
async fn write_status(
    api: &Api<ProxmoxImage>,
    image: &ProxmoxImage,
    status: &crate::api::ProxmoxImageStatus,
) -> Result<Option<ProxmoxImage>, Error> {
    let before = image.status.clone().unwrap_or_default();
    let (a, b) = (&status.at_provider, &before.at_provider);
    if a.volume == b.volume
        && a.locations == b.locations
        && a.summary == b.summary
        && a.users == b.users
        && a.downloaded == b.downloaded
        && a.previous_volumes == b.previous_volumes
        && status.conditions == before.conditions
        && status.observed_generation == before.observed_generation
    {
        return Ok(None);
    }
    let patch = json!({"status": {
        "atProvider": {
            "volume": json_of(&a.volume)?,
            "locations": json_of(&a.locations)?,
            "summary": json_of(&a.summary)?,
            "users": json_of(&a.users)?,
            "downloaded": a.downloaded,
            "previousVolumes": json_of(&a.previous_volumes)?,
        },
        "conditions": json_of(&status.conditions)?,
        "observedGeneration": json_of(&status.observed_generation)?,
    }});
    match api
        .patch_status(
            &image.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(written) => Ok(Some(written)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn json_of<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, Error> {
    serde_json::to_value(value).map_err(|source| Error::Serialize {
        what: "the image status",
        source,
    })
}

/// Wakes the ProxmoxVMs and ProxmoxContainers that name the image when where it is ready
/// changed (or it is new to them): a VM waiting `ImageNotReady` or
/// `ImageNotFound` goes on at once.
fn wake_users(ctx: &Context, image: &ProxmoxImage, status: &crate::api::ProxmoxImageStatus) {
    let ready = |s: &crate::api::ProxmoxImageStatus| -> Vec<(String, bool)> {
        s.at_provider
            .locations
            .iter()
            .map(|l| (l.node.clone(), l.phase == LocationPhase::Ready))
            .collect()
    };
    if image.status.as_ref().map(ready).as_ref() == Some(&ready(status)) {
        return;
    }
    let name = image.name_any();
    let namespace = image.namespace();
    for obj in ctx.store.state() {
        let Ok(vm) = &obj.0 else { continue };
        // A clone of the image's template waits for the template, not the
        // file: the fleet's watch wakes it when one is ready to clone.
        if vm.namespace() == namespace && refs::disk_images(vm).any(|n| n == name) {
            ctx.waker.wake(vm_ref(vm));
        }
    }
    for obj in ctx.containers.state() {
        let Ok(ct) = &obj.0 else { continue };
        if ct.namespace() == namespace && refs::container_image(ct) == Some(name.as_str()) {
            ctx.container_waker.wake(ObjectRef::from_obj(obj.as_ref()));
        }
    }
}
