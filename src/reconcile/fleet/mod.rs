//! Fleets: a template VM per node for each ProxmoxImage with
//! `spec.forProvider.template`, so that VMs naming the image in
//! `clone.image` start as (linked) clones of it instead of importing the
//! image each.
//!
//! The fleet controller watches ProxmoxImages and, for each location the
//! image controller reports `Ready`, creates a template
//! ProxmoxVM ([`child`]) owned by the image; the VM machinery creates and
//! converts it like any other ProxmoxVM. It writes only
//! `status.atProvider.templates` and `templateSummary`, with a merge patch
//! of those two fields ([`templates`]). It sends Proxmox nothing: which
//! storages can snapshot comes from the cluster view the VM passes already
//! read.
//!
//! Triggers: the image watch (spec and status: the image controller's
//! locations), and, from the VM watch, its templates changing and its
//! clones appearing, moving or going ([`wake::Images`]).

pub mod child;
pub mod templates;
pub mod wake;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use crate::api::{ProxmoxImage, ProxmoxVM};
use crate::reconcile::common::image_cache;
use crate::reconcile::context::Context;
use crate::reconcile::error::Error;
use crate::reconcile::inventory::ClusterView;
use crate::reconcile::managed::envelope::run_held;
use crate::reconcile::managed::watch::{never_listed, scoped, unserved_as_empty};
use crate::reconcile::providers::ConfigKey;
use crate::reconcile::runtime::shards::Hold;

/// How soon an image whose template's storage is not known yet is looked
/// at again (the VM passes read the cluster view meanwhile).
const RECHECK: Duration = Duration::from_secs(5);

/// Runs the fleet controller until `stop` resolves: the image watch fills
/// `writer` (the cache the VM passes read, [`Context::images`]).
pub async fn run(
    ctx: Arc<Context>,
    writer: Writer<ProxmoxImage>,
    wakeups: UnboundedReceiver<ObjectRef<ProxmoxImage>>,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let api: Api<ProxmoxImage> = scoped(&ctx.kube, ctx.settings.namespace.as_deref());
    let clones = wake::Clones::new(ctx.images.clone(), ctx.store.clone(), ctx.waker.clone());
    // No predicate: the image controller's status writes (a location
    // Ready) are what this controller acts on.
    let images = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    let images = unserved_as_empty("ProxmoxImage", images)
        .inspect(move |event| clones.see(event))
        .modify(|image| image.metadata.managed_fields = None)
        .reflect(writer)
        .applied_objects();
    let ctx_images = ctx.images.clone();
    let controller = Controller::for_stream(images, ctx.images.clone())
        .reconcile_on(wakeups)
        .graceful_shutdown_on(stop.clone())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "fleet controller");
            }
        });
    let unlisted = never_listed(ctx_images, "ProxmoxImage (fleet)", stop);
    tokio::select! {
        () = controller => {}
        () = unlisted => {}
    }
}

/// One pass of an image: its templates created or deleted, their status.
async fn reconcile(image: Arc<ProxmoxImage>, ctx: Arc<Context>) -> Result<Action, Error> {
    let key = config_key(&image);
    // Another replica holds the config (it writes the image's templates),
    // or nobody yet: this one may take its Lease later, and nothing else
    // would bring the image back then (gaining a config wakes the image
    // controller's passes, not this one's). Looking again costs no request.
    let Some(hold) = ctx.shards.hold(&key) else {
        return Ok(Action::requeue(RECHECK));
    };
    // Every write below is fenced, as every kind's: the creates and
    // deletes carry preconditions, but a paused replica past its Lease
    // must not write even those (a template created twice over a
    // handover is harmless; one deleted by a stale cache is not).
    run_held(&hold, fleet_pass(&image, &ctx, &hold, &key)).await
}

/// The pass of [`reconcile`], under `hold`.
async fn fleet_pass(
    image: &ProxmoxImage,
    ctx: &Context,
    hold: &Hold,
    key: &ConfigKey,
) -> Result<Action, Error> {
    let namespace = image.namespace().unwrap_or_default();
    let state = ctx.store.state();
    let vms: Vec<&ProxmoxVM> = state
        .iter()
        .filter_map(|obj| obj.0.as_ref().ok())
        .filter(|vm| vm.namespace().as_deref() == Some(namespace.as_str()))
        .collect();
    let view = view(ctx, key, image, &vms).await;
    let work = templates::work(image, &vms, &View(view.as_deref()));
    let vm_api: Api<ProxmoxVM> = Api::namespaced(ctx.kube.clone(), &namespace);
    for name in &work.taken {
        tracing::warn!(image = %image_cache::full_name(image), template = %name, "a ProxmoxVM that is not the image's has the name of its template; left alone, no template on that node");
    }
    for (name, manifest) in &work.create {
        tracing::info!(image = %image_cache::full_name(image), template = %name, "creating the image's template");
        ctx.shards.fence(hold)?;
        create(&vm_api, manifest).await?;
    }
    for (name, uid) in &work.delete {
        tracing::info!(image = %image_cache::full_name(image), template = %name, "deleting the image's template");
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        ctx.shards.fence(hold)?;
        match vm_api.delete(name, &params).await {
            Ok(_) => {}
            // Gone already, or another object of the name now.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(patch) = &work.status {
        let images: Api<ProxmoxImage> = Api::namespaced(ctx.kube.clone(), &namespace);
        ctx.shards.fence(hold)?;
        images
            .patch_status(
                &image.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
    }
    Ok(if work.recheck {
        Action::requeue(RECHECK)
    } else {
        Action::await_change()
    })
}

/// Creates a template ProxmoxVM the cache does not have; one that exists
/// after all (the cache lags) is left as it is: it may be another's, and
/// the next pass, from a cache that has it, tells.
async fn create(api: &Api<ProxmoxVM>, manifest: &serde_json::Value) -> Result<(), Error> {
    let vm: ProxmoxVM =
        serde_json::from_value(manifest.clone()).map_err(|source| Error::Serialize {
            what: "a template ProxmoxVM",
            source,
        })?;
    let params = PostParams {
        field_manager: Some(child::FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match api.create(&params, &vm).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn error_policy(_image: Arc<ProxmoxImage>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::debug!(%error, "fleet pass failed; retrying");
    Action::requeue(RECHECK)
}

/// The provider config an image names.
fn config_key(image: &ProxmoxImage) -> ConfigKey {
    ConfigKey::of(image)
}

/// The config's cluster view as the VM passes last read it (no request);
/// read again, at most every [`RECHECK`] and shared with every pass, only
/// while a template's ProxmoxVM is Ready but neither its status (written
/// by the pass that saw the conversion end, [`child::converted`]) nor the
/// view shows its VM converted yet.
async fn view(
    ctx: &Context,
    key: &ConfigKey,
    image: &ProxmoxImage,
    vms: &[&ProxmoxVM],
) -> Option<Arc<ClusterView>> {
    let last = ctx.inventory.last_view(key).await;
    let unsure = vms
        .iter()
        .filter(|vm| child::owned_by(vm, image) && child::ready(vm) && !child::converted(vm))
        .filter_map(|vm| child::vmid(vm))
        .any(|vmid| {
            !last
                .as_deref()
                .is_some_and(|v| View(Some(v)).template_of(vmid))
        });
    let client = ctx.providers.client_of(key).filter(|_| unsure);
    let Some(client) = client else { return last };
    match ctx.inventory.view(key, &client, RECHECK).await {
        Ok(view) => Some(view),
        Err(e) => {
            tracing::debug!(error = %e, "cannot read the cluster view; using the last one");
            last
        }
    }
}

/// What a cluster view shows.
struct View<'a>(Option<&'a ClusterView>);

impl View<'_> {
    fn template_of(&self, vmid: u32) -> bool {
        self.0
            .and_then(|v| v.vms.get(&vmid))
            .is_some_and(|vm| vm.template)
    }
}

impl templates::Seen for View<'_> {
    fn plugin(&self, node: &str, storage: &str) -> Option<String> {
        let seen = self.0?.storages.get(node)?.get(storage)?;
        Some(seen.plugin.clone()).filter(|p| !p.is_empty())
    }

    fn template(&self, vmid: u32) -> bool {
        self.template_of(vmid)
    }
}
