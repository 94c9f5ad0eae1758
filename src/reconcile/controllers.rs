//! The kube-runtime Controller of ProxmoxVMs, and the provider config
//! controllers ([`crate::reconcile::configs`]) beside it: what is watched and what
//! triggers a pass.
//!
//! Every watch is of all namespaces, or only of `Settings::namespace`
//! (the ClusterProviderConfigs' aside: cluster-scoped, and not watched at
//! all in the namespaced mode, see [`configs`]).
//!
//! * ProxmoxVMs, through `DeserializeGuard` (one
//!   malformed object cannot stall the watch) and a predicate filter on
//!   generation, annotations and finalizers: a status write (ours, every
//!   few seconds while a task runs) does not trigger another pass, while a
//!   spec change, a pause annotation or a deletion does.
//! * Connection Secrets (owned, labelled): a deleted or edited one is
//!   written again.
//! * The metadata of Secrets and ConfigMaps (never their data): one that
//!   appears, changes or goes wakes the ProxmoxVMs of its namespace that
//!   read it by name (`customCloudInit`, the cloud-init password; see
//!   [`super::vm::wake::readers`]).
//! * A template's ProxmoxVM getting further (a task ended, Ready changed)
//!   wakes the clones waiting for it ([`super::vm::wake::Templates`], on the VM
//!   watch, before the cache takes the change in).
//! * Fleets ([`crate::reconcile::fleet`]): a watch of ProxmoxImages feeds
//!   their cache (read by clones of an image's template) and the fleet
//!   controller; an image's templates changing wakes its waiting clones,
//!   and its template ProxmoxVMs and clones changing (on the VM watch)
//!   wake its fleet pass.
//! * Wake-ups from the provider config controllers: a config created,
//!   deleted, changed in its spec, fixed (Ready again) or whose Secret
//!   changed requeues every ProxmoxVM that refers to it (found in this
//!   controller's cache). A config's status writes wake nobody.
//!
//! * The ProxmoxImage controller ([`image`]) beside it, sharing the
//!   context; the VM watch wakes the images a VM names (or is a template
//!   of) when the VM changes or goes.
//! * The ProxmoxPool controller ([`pool`]), sharing the context; the VM
//!   watch wakes the pools a VM names when it is created or goes.
//! * The ProxmoxBackupJob controller ([`backup_job`]); the VM and container
//!   watches wake the jobs whose selector picks a guest that comes, goes,
//!   gets its VMID or changes labels.
//! * The ProxmoxSnapshot controller ([`snapshot`]); the task watcher wakes
//!   a snapshot whose task ended.
//! * The ProxmoxBackup controller ([`backup`]); the task watcher wakes a
//!   backup whose task ended, and the VM and container watches one whose
//!   guest comes, goes or gets its VMID; its own watch wakes the VMs and
//!   containers waiting to restore it (`backup::wake::Restorers`).
//! * The SDN zone and VNet controllers ([`sdn`]); the applier wakes them
//!   when their apply state changes, and the VM and container watches wake
//!   a VNet being deleted when a guest on it leaves it.
//!
//! The VM watch also feeds [`configs::Tap`]: user counts of the configs
//! and `/readyz` (the cache is filled).
//!
//! Many VMs reconcile in parallel (`max_concurrent_reconciles`, admitted
//! in arrival order by [`super::runtime::queue`]); the Controller never runs two
//! passes of one VM at once.

use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::core::{DeserializeGuard, PartialObjectMeta};
use kube::runtime::controller::{Config, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use tokio::task::JoinSet;

use super::context::Context;
use super::managed::guard;
use super::managed::states::{self, Lifecycle};
use super::managed::task_watch::{self, Followed, watch_tasks};
use super::managed::watch::{scoped, unserved_as_empty};
use super::runtime::changes::Changes;
use super::runtime::metrics::{Metrics, States};
use super::runtime::server::Readiness;
use super::runtime::settings::Settings;
use super::runtime::shards::leases;
use super::runtime::wake::Waker;
use super::vm::wake::{Referenced, Templates, readers};
use crate::api::{
    ProxmoxBackup, ProxmoxBackupJob, ProxmoxContainer, ProxmoxIPSet, ProxmoxImage, ProxmoxPool,
    ProxmoxSDNZone, ProxmoxSecurityGroup, ProxmoxSnapshot, ProxmoxVM, ProxmoxVNet,
};
use crate::reconcile::backup;
use crate::reconcile::backup_job;
use crate::reconcile::configs::{self, Tap, Users};
use crate::reconcile::container;
use crate::reconcile::fleet;
use crate::reconcile::image::{self, ImageWaker};
use crate::reconcile::ip_set;
use crate::reconcile::managed::connection_secret::MANAGED_BY;
use crate::reconcile::pool;
use crate::reconcile::sdn;
use crate::reconcile::security_group;
use crate::reconcile::snapshot;
use crate::reconcile::vm::pass::{error_policy, reconcile};

/// Runs the controllers until `stop` resolves (then lets running passes
/// finish). With leader election, the Lease loop beside them decides which
/// provider configs this replica acts for (see [`super::runtime::shards`]).
pub async fn run(
    kube: kube::Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    stop: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) {
    let (reader, writer) = reflector::store();
    let (wake, wakeups) = mpsc::unbounded();
    let (containers, container_writer) = container::controller::store();
    let (wake_container, container_wakeups) = mpsc::unbounded();
    // Fleets: the image cache, and the images whose templates or clones
    // changed (seen on the VM watch, before the cache takes it in).
    let (images, image_writer) = reflector::store();
    let (image_waker, image_wakeups) = ImageWaker::new(reader.clone());
    let wake_image = image_waker.sender();
    // Pools: a VM naming one that gets created or goes wakes it.
    let (pools, pool_writer) = pool::store();
    let (pool_wake, pool_wakeups) = mpsc::unbounded();
    // Security groups read the IP set cache (a rule's set must exist), IP
    // sets the group cache (a set named by a rule is not deleted).
    let ((set_store, set_writer), (group_store, group_writer)) =
        (reflector::store(), reflector::store());
    let ((wake_set, set_wakeups), (wake_group, group_wakeups)) =
        (mpsc::unbounded(), mpsc::unbounded());
    // Backup jobs: a guest their selector picks that comes, goes or gets
    // its VMID wakes them (seen on the VM and container watches, before the
    // caches take it in).
    let ((job_store, job_writer), (wake_job, job_wakeups)) =
        (reflector::store(), mpsc::unbounded());
    // Snapshots: the task watcher wakes one whose task ended.
    let ((snap_store, snap_writer), (wake_snap, snap_wakeups)) =
        (reflector::store::<ProxmoxSnapshot>(), mpsc::unbounded());
    // Backups on demand: the task watcher wakes one whose task ended.
    let ((backup_store, backup_writer), (wake_backup, backup_wakeups)) =
        (reflector::store::<ProxmoxBackup>(), mpsc::unbounded());
    // SDN zones and VNets: the applier wakes them when their apply state
    // changes.
    let ((zone_store, zone_writer), (wake_zone, zone_wakeups)) =
        (reflector::store(), mpsc::unbounded());
    let ((vnet_store, vnet_writer), (wake_vnet, vnet_wakeups)) =
        (reflector::store(), mpsc::unbounded());
    let users = Users::new(reader.clone(), wake.clone())
        .with_containers(containers.clone(), wake_container.clone())
        .with_images(images.clone(), image_waker.sender())
        .with_kind(pools.clone(), pool_wake.clone())
        .with_kind(set_store.clone(), wake_set.clone())
        .with_kind(group_store.clone(), wake_group.clone())
        .with_kind(job_store.clone(), wake_job.clone())
        .with_kind(snap_store.clone(), wake_snap.clone())
        .with_kind(backup_store.clone(), wake_backup.clone())
        .with_kind(zone_store.clone(), wake_zone.clone())
        .with_kind(vnet_store.clone(), wake_vnet.clone());
    let job_waker = backup_job::wake::waker(wake_job.clone(), job_store.clone(), reader.clone());
    let job_containers =
        backup_job::wake::container_waker(wake_job, job_store.clone(), containers.clone());
    let snap_waker =
        snapshot::wake::vm_waker(wake_snap.clone(), snap_store.clone(), reader.clone());
    let snap_containers =
        snapshot::wake::container_waker(wake_snap.clone(), snap_store.clone(), containers.clone());
    let backup_waker =
        backup::wake::vm_waker(wake_backup.clone(), backup_store.clone(), reader.clone());
    let backup_containers = backup::wake::container_waker(
        wake_backup.clone(),
        backup_store.clone(),
        containers.clone(),
    );
    let vnet_waker = sdn::wake::vm_waker(wake_vnet.clone(), vnet_store.clone(), reader.clone());
    let container_vnets =
        sdn::wake::container_waker(wake_vnet.clone(), vnet_store.clone(), containers.clone());
    let set_waker = ip_set::wake::waker(wake_set.clone(), set_store.clone(), reader.clone());
    let container_sets =
        ip_set::wake::container_waker(wake_set, set_store.clone(), containers.clone());
    let (triggers, receivers) = configs::triggers();
    let mut tap = Tap::new(&users, triggers.clone(), Arc::clone(&readiness));
    let templates = Templates::new(reader.clone(), Waker::new(wake.clone()));
    let container_images = image_waker.for_containers(containers.clone());
    let container_lifecycle =
        Lifecycle::new::<ProxmoxContainer>(Arc::clone(&metrics), states::guarded);
    // The selector wakers wake once the container cache took the event in.
    let (ct_sets, ct_jobs, ct_snaps, ct_backups, ct_vnets) = (
        container_sets.clone(),
        job_containers.clone(),
        snap_containers.clone(),
        backup_containers.clone(),
        container_vnets.clone(),
    );
    let container_changes = Changes::default();
    let counted = container_changes.clone();
    let after_containers = move || {
        counted.bump();
        ct_sets.flush();
        ct_jobs.flush();
        ct_snaps.flush();
        ct_backups.flush();
        ct_vnets.flush();
    };
    let see_containers = move |event: &_| {
        container_images.see(event);
        container_sets.see(event);
        job_containers.see(event);
        snap_containers.see(event);
        backup_containers.see(event);
        container_vnets.see(event);
        container_lifecycle.see(event);
    };
    let vm_lifecycle = Lifecycle::new::<ProxmoxVM>(Arc::clone(&metrics), states::guarded);
    let (fleet_wake, fleet_wakeups) = mpsc::unbounded();
    let fleet_images = fleet::wake::Images::new(reader.clone(), fleet_wake);
    let pool_members = pool::Members::new(pools.clone(), reader.clone(), pool_wake.clone());
    // What the task watcher counts to read a cache again only when it
    // changed.
    let vm_changes = Changes::default();
    let watched_vms = vm_changes.clone();
    // The selector wakers wake once the VM cache took the event in.
    let (vm_jobs, vm_snaps, vm_backups, vm_vnets, vm_sets) = (
        job_waker.clone(),
        snap_waker.clone(),
        backup_waker.clone(),
        vnet_waker.clone(),
        set_waker.clone(),
    );
    let after_vms = move || {
        vm_changes.bump();
        vm_jobs.flush();
        vm_snaps.flush();
        vm_backups.flush();
        vm_vnets.flush();
        vm_sets.flush();
    };
    let vms = guard::watch::<ProxmoxVM>(
        &kube,
        settings.namespace.as_deref(),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff();
    let vms = unserved_as_empty("ProxmoxVM", vms)
        .inspect(move |event| vm_lifecycle.see(event))
        .inspect(move |event| templates.see(event))
        .inspect(move |event| image_waker.see(event))
        .inspect(move |event| fleet_images.see(event))
        .inspect(move |event| pool_members.see(event))
        .inspect(move |event| set_waker.see(event))
        .inspect(move |event| job_waker.see(event))
        .inspect(move |event| snap_waker.see(event))
        .inspect(move |event| backup_waker.see(event))
        .inspect(move |event| vnet_waker.see(event))
        .modify(slim)
        .reflect(writer)
        .inspect(move |_| after_vms())
        .inspect(move |event| tap.see(event))
        .applied_objects()
        .predicate_filter(
            predicates::generation
                .combine(predicates::annotations)
                .combine(predicates::finalizers),
            Default::default(),
        );
    let secrets = watcher::Config::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
    let concurrency = settings.max_concurrent_reconciles;
    let namespace = settings.namespace.clone();
    // `PartialObjectMeta`: metadata-only requests, never the data.
    let read_secrets = watcher(
        scoped::<PartialObjectMeta<Secret>>(&kube, namespace.as_deref()),
        watcher::Config::default().fields(configs::SECRET_FIELDS),
    )
    .default_backoff()
    .touched_objects();
    let read_maps = watcher(
        scoped::<PartialObjectMeta<ConfigMap>>(&kube, namespace.as_deref()),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects();
    let (secret_store, map_store) = (reader.clone(), reader.clone());
    count_states(
        metrics.states(),
        (reader.clone(), containers.clone(), images.clone()),
        (
            pools.clone(),
            set_store.clone(),
            group_store.clone(),
            job_store.clone(),
            snap_store.clone(),
        ),
    );
    states::count::<ProxmoxSDNZone, _>(metrics.states(), zone_store, states::plain);
    states::count::<ProxmoxVNet, _>(metrics.states(), vnet_store.clone(), states::plain);
    states::count::<ProxmoxBackup, _>(metrics.states(), backup_store.clone(), states::plain);
    // Guests waiting to restore a backup: woken when it becomes Ready
    // (seen on the backup watch, before its cache takes it in).
    let restorers = backup::wake::Restorers::new(
        backup_store.clone(),
        (reader.clone(), Waker::new(wake.clone())),
        (containers.clone(), Waker::new(wake_container.clone())),
    );
    let ctx = Arc::new(
        Context::new(
            kube.clone(),
            settings,
            metrics,
            (reader.clone(), containers.clone(), images),
            (Waker::new(wake), Waker::new(wake_container)),
            // The kinds that take VMIDs from one space per config.
            vec![Box::new(reader.clone()), Box::new(containers)],
        )
        .with_vnets(vnet_store.clone()),
    );
    let controller = Controller::for_stream(vms, reader)
        .owns(scoped::<Secret>(&kube, namespace.as_deref()), secrets)
        .watches_stream(read_secrets, move |secret| {
            readers(&secret_store, Referenced::Secret, &secret.metadata)
        })
        .watches_stream(read_maps, move |map| {
            readers(&map_store, Referenced::ConfigMap, &map.metadata)
        })
        .reconcile_on(wakeups)
        // No limit here: every due pass starts and takes its turn in the
        // controller's own first-come-first-served queue (see `queue`),
        // which caps passes at `concurrency`; a pass that must wait ends,
        // and the VM is woken when its turn comes (`queue::turns`).
        .with_config(Config::default().concurrency(0))
        .graceful_shutdown_on(stop.clone());
    tracing::info!(concurrency, "controller started");
    let vms = controller
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .for_each(|result| async move {
            match result {
                Ok((vm, action)) => tracing::trace!(vm = %vm, ?action, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "controller"),
            }
        });
    // The kinds whose tasks the watcher follows, and how to wake them.
    let followed: Vec<Box<dyn Followed>> = vec![
        Box::new(task_watch::Of {
            store: ctx.store.clone(),
            changes: watched_vms,
            waker: ctx.waker.clone(),
        }),
        Box::new(task_watch::Of {
            store: ctx.containers.clone(),
            changes: container_changes.clone(),
            waker: ctx.container_waker.clone(),
        }),
        Box::new(task_watch::Plain {
            store: snap_store,
            wake: wake_snap,
        }),
        Box::new(task_watch::Plain {
            store: backup_store,
            wake: wake_backup,
        }),
        Box::new(image::Downloads {
            store: ctx.images.clone(),
            wake: wake_image,
        }),
    ];
    let tasks = watch_tasks(Arc::clone(&ctx), followed, stop.clone());
    let images = image::run(Arc::clone(&ctx), image_wakeups, stop.clone());
    let containers = container::controller::run(
        Arc::clone(&ctx),
        (container_writer, container_wakeups),
        after_containers,
        see_containers,
        stop.clone(),
    );
    let leases = {
        let (ctx, stop) = (Arc::clone(&ctx), stop.clone());
        let (users, triggers) = (users.clone(), triggers.clone());
        // Gaining a config wakes everything that names it, and its pass.
        let gained: leases::Gained = Box::new(move |key| {
            let woken = users.wake(key);
            triggers.send(key);
            woken
        });
        async move {
            if let Some(election) = ctx.settings.leader_election.clone() {
                leases::run(ctx, gained, election.namespace, stop).await;
            }
        }
    };
    let jobs = (job_writer, job_wakeups);
    let jobs = backup_job::run(Arc::clone(&ctx), jobs, pools.clone(), stop.clone());
    let pools = pool::run(Arc::clone(&ctx), (pool_writer, pool_wakeups), stop.clone());
    let snapshots = snapshot::run(Arc::clone(&ctx), (snap_writer, snap_wakeups), stop.clone());
    let backups = backup::run(
        Arc::clone(&ctx),
        (backup_writer, backup_wakeups),
        restorers,
        stop.clone(),
    );
    let fleet = fleet::run(Arc::clone(&ctx), image_writer, fleet_wakeups, stop.clone());
    let groups = (group_writer, group_wakeups);
    // A set becoming usable wakes the groups whose rules name it.
    let set_waker = security_group::wake::SetWaker {
        sets: set_store.clone(),
        groups: group_store.clone(),
        wake: wake_group.clone(),
    };
    let groups = security_group::run(Arc::clone(&ctx), groups, set_store, stop.clone());
    let ip_sets = ip_set::run(
        Arc::clone(&ctx),
        (set_writer, set_wakeups),
        group_store,
        move |event: &_| set_waker.see(event),
        stop.clone(),
    );
    let sdn = sdn::run(
        Arc::clone(&ctx),
        ((zone_writer, zone_wakeups), (vnet_writer, vnet_wakeups)),
        (wake_zone, wake_vnet),
        stop.clone(),
    );
    let configs = configs::run(
        kube,
        namespace,
        (Arc::clone(&ctx.providers), Arc::clone(&ctx.shards)),
        ctx.events.clone(),
        users,
        (triggers, receivers),
        stop,
    );
    apart(vec![
        vms.boxed(),
        containers.boxed(),
        configs.boxed(),
        tasks.boxed(),
        leases.boxed(),
        images.boxed(),
        fleet.boxed(),
        pools.boxed(),
        groups.boxed(),
        ip_sets.boxed(),
        jobs.boxed(),
        snapshots.boxed(),
        sdn.boxed(),
        backups.boxed(),
    ])
    .await;
    readiness.set_synced(false);
    tracing::info!("controller stopped");
}

/// Runs each of `parts` on a task of its own until all have finished.
///
/// Not one join: a join polls every part whenever any one of them is
/// woken, and a kube-runtime controller polls every pass it has in flight
/// at each of its polls (its `FutureHashMap` has no wakers of its own).
/// Every pass due waits for admission in flight (`runtime::queue`), so
/// after a bulk apply the VM controller holds a thousand: each Lease
/// renewal, task-watcher tick or idle kind's wake-up then cost a thousand
/// polls (`make profile`, docs/scaling.md). The tasks end with this future
/// (a `JoinSet` aborts them when dropped), and a part that panicked panics
/// here, as it did in the join.
async fn apart(parts: Vec<BoxFuture<'static, ()>>) {
    let mut tasks = JoinSet::new();
    for part in parts {
        tasks.spawn(part);
    }
    while let Some(ended) = tasks.join_next().await {
        if let Err(e) = ended
            && e.is_panic()
        {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// The caches of the CRUD kinds.
type CrudStores = (
    Store<ProxmoxPool>,
    Store<ProxmoxIPSet>,
    Store<ProxmoxSecurityGroup>,
    Store<ProxmoxBackupJob>,
    Store<ProxmoxSnapshot>,
);

/// Crossplane's state metrics of every managed kind, counted from its cache.
fn count_states(
    metrics: &States,
    (vms, containers, images): (
        Store<DeserializeGuard<ProxmoxVM>>,
        Store<DeserializeGuard<ProxmoxContainer>>,
        Store<ProxmoxImage>,
    ),
    (pools, sets, groups, jobs, snapshots): CrudStores,
) {
    states::count::<ProxmoxVM, _>(metrics, vms, states::guarded);
    states::count::<ProxmoxContainer, _>(metrics, containers, states::guarded);
    states::count::<ProxmoxImage, _>(metrics, images, states::plain);
    states::count::<ProxmoxPool, _>(metrics, pools, states::plain);
    states::count::<ProxmoxIPSet, _>(metrics, sets, states::plain);
    states::count::<ProxmoxSecurityGroup, _>(metrics, groups, states::plain);
    states::count::<ProxmoxBackupJob, _>(metrics, jobs, states::plain);
    states::count::<ProxmoxSnapshot, _>(metrics, snapshots, states::plain);
}

/// What the cache need not hold of a ProxmoxVM: kubectl's copy of the
/// last applied spec (its managed fields, often larger still, the watch
/// already leaves out: [`guard`]). Nothing reads them, and at a thousand
/// resources they were most of the cache.
fn slim(obj: &mut DeserializeGuard<ProxmoxVM>) {
    let meta = match &mut obj.0 {
        Ok(vm) => &mut vm.metadata,
        Err(invalid) => &mut invalid.metadata,
    };
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

/// kubectl's client-side apply record.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_no_managed_fields_or_last_applied_copy() {
        // As the watch decodes it.
        let guarded: guard::Guarded<ProxmoxVM> = serde_json::from_value(serde_json::json!({
            "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
            "kind": "ProxmoxVM",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u",
                "annotations": {
                    LAST_APPLIED: "{\"spec\":{}}",
                    "crossplane.io/external-name": "100",
                },
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            },
            "spec": {
                "forProvider": {},
                "providerConfigRef": {"kind": "ProviderConfig", "name": "pve"},
            },
        }))
        .unwrap();
        let mut obj = guarded.into_inner();
        slim(&mut obj);
        let meta = &obj.0.as_ref().unwrap().metadata;
        assert!(meta.managed_fields.is_none());
        let annotations = meta.annotations.as_ref().unwrap();
        assert!(!annotations.contains_key(LAST_APPLIED));
        assert_eq!(annotations["crossplane.io/external-name"], "100");
    }
}
