//! The `sharded` variant (issue 18): `--shard-configs` ClusterProviderConfigs,
//! each on a simulator of its own (an [`Arena`], with the nodes and time
//! scale of the other variants), and `--shard-replicas` replicas of
//! `proxmox-provider` as child processes with leader election (one Lease
//! per config, as deployed). Every config gets the run's N VMs; all are
//! applied at once, waited for, left idle and deleted at once
//! ([`phases::drive_all`]).
//!
//! Each replica runs under the provider's ServiceAccount with a token of
//! its own, so the audit log tells its requests apart by the token's
//! `jti`. A request naming a config (its namespace's ProxmoxVMs and
//! events, the config itself, its credentials Secret, its Lease) is that
//! config's; watches, lists and the replicas' member Leases are shared.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use provider_proxmox::api::ProviderConfigKind;
use provider_proxmox::reconcile::providers::ConfigKey;
use provider_proxmox::reconcile::runtime::shards::assign::assign;
use provider_proxmox::reconcile::runtime::shards::leases::{KIND_LABEL, config_lease};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::process::Child;

use crate::arena::Arena;
use crate::audit::Event;
use crate::child::{Sample, Sampler, spawn_logged, terminate};
use crate::cli::{RunArgs, Variant};
use crate::cluster::{Cluster, PROVIDER_NAMESPACE, provider_user};
use crate::phases::{self, Lane};
use crate::provider::{self, Binaries};
use crate::run::{Phases, Run};
use crate::summary::{ProcessStats, Summary, summarize};
use crate::workload::{self, Tracker};
use crate::{audit, sim};

/// The name of config `i` (`bench-sharded-a`, ...).
pub fn config_name(i: usize) -> String {
    format!("bench-sharded-{}", letter(i))
}

/// The name of replica `i` (`bench-replica-a`, ...): its `POD_NAME`, so its
/// Lease identity is `<name>-<random>`.
pub fn replica_name(i: usize) -> String {
    format!("bench-replica-{}", letter(i))
}

fn letter(i: usize) -> char {
    char::from(b'a' + (i % 26) as u8)
}

/// The Lease of ClusterProviderConfig `name`.
pub fn lease_of(name: &str) -> String {
    config_lease(&ConfigKey {
        kind: ProviderConfigKind::ClusterProviderConfig,
        namespace: String::new(),
        name: name.to_owned(),
    })
}

/// What a sharded run leaves behind, before it is summarised.
pub struct ShardedRun {
    /// One per config, in order; its `audit` already the config's own.
    pub configs: Vec<(String, Run)>,
    pub replicas: Vec<ReplicaRun>,
    /// Every request of the provider's ServiceAccount.
    pub audit: Vec<Event>,
    /// `status.holder` of each config after the delete, before the
    /// replicas stopped.
    pub holders: BTreeMap<String, Option<String>>,
}

pub struct ReplicaRun {
    pub name: String,
    /// Its token's `jti`: the audit log's credential id.
    pub credential: Option<String>,
    pub samples: Vec<Sample>,
}

/// A running replica.
struct Replica {
    name: String,
    credential: Option<String>,
    child: Child,
    sampler: Sampler,
}

pub async fn run(
    cluster: &Cluster,
    args: &RunArgs,
    binaries: &Binaries<'_>,
) -> anyhow::Result<ShardedRun> {
    let admin = &cluster.admin;
    let dir = sim::variant_dir(&args.work_dir, Variant::Sharded.name())?;
    clean_up(admin).await?;
    let names: Vec<String> = (0..usize::from(args.shard_configs))
        .map(config_name)
        .collect();
    let mut arenas = Vec::new();
    for name in &names {
        let config_dir = sim::variant_dir(&dir, name)?;
        let arena = Arena::start(args, binaries.sim, "provider", &config_dir).await?;
        provider::configure(admin, name, &arena.actor, &arena.sim).await?;
        arenas.push((config_dir, arena));
    }
    let mut replicas = Vec::new();
    for i in 0..usize::from(args.shard_replicas) {
        let name = replica_name(i);
        let kubeconfig = dir.join(format!("{name}.kubeconfig"));
        let credential = cluster.another_provider_kubeconfig(&kubeconfig).await?;
        let mut command =
            provider::provider_command(binaries.provider, &kubeconfig, Variant::Batched);
        command.env("POD_NAME", &name);
        let child = spawn_logged(command, &dir.join(format!("{name}.log")))?;
        let sampler = Sampler::start(child.id().context("a replica exited at once")?);
        replicas.push(Replica {
            name,
            credential,
            child,
            sampler,
        });
    }
    for name in &names {
        provider::wait_config_ready(admin, name)
            .await
            .with_context(|| {
                format!(
                    "ClusterProviderConfig {name}; see the logs in {}",
                    dir.display()
                )
            })?;
    }
    let settled = settle(admin, &names, replicas.len()).await?;
    eprintln!("    configs held: {}", join_map(&settled));

    let apis: Vec<_> = names.iter().map(|n| workload::api(admin, n)).collect();
    let trackers: Vec<Tracker> = names.iter().map(|_| Tracker::default()).collect();
    let watches: Vec<_> = trackers
        .iter()
        .zip(&apis)
        .map(|(t, api)| t.watch(api.clone()))
        .collect();
    let lanes = names
        .iter()
        .zip(&apis)
        .zip(&trackers)
        .zip(&arenas)
        .map(|(((name, api), tracker), (_, arena))| Lane {
            label: format!("{name}: {} VMs", args.vm_count()),
            api,
            tracker,
            manifests: (0..args.vm_count())
                .map(|i| workload::manifest(&workload::vm_name(i), name, name, &args.nodes))
                .collect(),
            referee: &arena.referee,
        })
        .collect();
    let samplers: Vec<&Sampler> = replicas.iter().map(|r| &r.sampler).collect();
    let outcomes = phases::drive_all(lanes, args, &samplers).await?;
    for watch in watches {
        watch.abort();
    }
    let holders = holders(admin, &names, &replicas).await;
    for r in &replicas {
        r.sampler.mark();
    }
    // All at once: one stopping alone would hand its configs to the others.
    futures::future::join_all(
        replicas
            .iter_mut()
            .map(|r| terminate(&mut r.child, Duration::from_secs(20))),
    )
    .await;
    // A variant after this one must not find these configs.
    clean_up(admin).await?;
    let replicas: Vec<ReplicaRun> = replicas
        .into_iter()
        .map(|r| ReplicaRun {
            name: r.name,
            credential: r.credential,
            samples: r.sampler.finish(),
        })
        .collect();
    let audit = audit::read(cluster.audit_log()?, &provider_user())?;
    let mut configs = Vec::new();
    for ((name, (config_dir, arena)), (outcome, tracker)) in names
        .iter()
        .zip(arenas)
        .zip(outcomes.into_iter().zip(&trackers))
    {
        let (requests, tasks, _) = arena.finish().await?;
        let run = Run {
            variant: Variant::Sharded,
            vms: args.vm_count(),
            phases: outcome.phases,
            per_vm: tracker.snapshot(),
            requests,
            tasks,
            audit: audit
                .iter()
                .filter(|e| of_config(e, name))
                .cloned()
                .collect(),
            // The processes are the replicas', below.
            samples: Vec::new(),
            neighbours: Vec::new(),
            sim_vms: outcome.sim_vms,
            stalls: outcome.stalls,
            dir: config_dir,
        };
        run.save_raw()?;
        configs.push((name.clone(), run));
    }
    for r in &replicas {
        crate::run::write_json(&dir.join(format!("{}.samples.json", r.name)), &r.samples)?;
    }
    Ok(ShardedRun {
        configs,
        replicas,
        audit,
        holders,
    })
}

/// What a variant leaves that the next one's providers would take up: its
/// ClusterProviderConfigs (their provider is gone, so nobody removes the
/// finalizer: the bench does), any ProxmoxVM a timed-out delete left, and
/// the provider's Leases. Run before the replicas start and after they
/// stopped.
async fn clean_up(admin: &Client) -> anyhow::Result<()> {
    let unfinalize = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let vms = Api::<kube::api::DynamicObject>::all_with(
        admin.clone(),
        &kube::api::ApiResource::erase::<provider_proxmox::api::ProxmoxVM>(&()),
    );
    for vm in vms.list(&ListParams::default()).await?.items {
        let ns = vm.namespace().unwrap_or_default();
        let api = workload::api(admin, &ns);
        let _ = api
            .patch(&vm.name_any(), &PatchParams::default(), &unfinalize)
            .await;
        let _ = api.delete(&vm.name_any(), &DeleteParams::default()).await;
    }
    let configs = provider::configs(admin);
    for config in configs.list(&ListParams::default()).await?.items {
        let name = config.name_any();
        configs
            .patch(&name, &PatchParams::default(), &unfinalize)
            .await
            .with_context(|| format!("removing the finalizer of {name}"))?;
        let _ = configs.delete(&name, &DeleteParams::default()).await;
    }
    let leases = Api::<Lease>::namespaced(admin.clone(), PROVIDER_NAMESPACE);
    leases
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(KIND_LABEL),
        )
        .await
        .context("deleting the provider's Leases")?;
    crate::wait::until(
        "the earlier variants' configs to be gone",
        Duration::from_secs(60),
        || {
            let configs = configs.clone();
            let vms = vms.clone();
            async move {
                let left = configs
                    .list_metadata(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .len()
                    + vms
                        .list_metadata(&ListParams::default())
                        .await
                        .ok()?
                        .items
                        .len();
                (left == 0).then_some(())
            }
        },
    )
    .await
}

/// Waits until every replica's member Lease is listed and every config is
/// held by the replica the provider's own assignment names (the first
/// replica up takes every config and hands them over as the others join);
/// returns config → replica.
async fn settle(
    admin: &Client,
    names: &[String],
    replicas: usize,
) -> anyhow::Result<BTreeMap<String, String>> {
    let leases = Api::<Lease>::namespaced(admin.clone(), PROVIDER_NAMESPACE);
    let wanted_leases: BTreeSet<String> = names.iter().map(|n| lease_of(n)).collect();
    crate::wait::until(
        "every config held by the replica assigned to it",
        Duration::from_secs(120),
        || {
            let leases = leases.clone();
            let wanted_leases = wanted_leases.clone();
            async move {
                let listed = leases
                    .list(&ListParams::default().labels(KIND_LABEL))
                    .await
                    .ok()?
                    .items;
                let holder = |l: &Lease| {
                    l.spec
                        .as_ref()?
                        .holder_identity
                        .clone()
                        .filter(|h| !h.is_empty())
                };
                let kind =
                    |l: &Lease, k: &str| l.labels().get(KIND_LABEL).map(String::as_str) == Some(k);
                let members: BTreeSet<String> = listed
                    .iter()
                    .filter(|l| kind(l, "member"))
                    .filter_map(holder)
                    .collect();
                if members.len() != replicas {
                    return None;
                }
                let want = assign(&wanted_leases, &members);
                let mut held = BTreeMap::new();
                for lease in listed.iter().filter(|l| kind(l, "config")) {
                    let name = lease.name_any();
                    if let Some(w) = want.get(&name) {
                        if holder(lease).as_ref() != Some(w) {
                            return None;
                        }
                        held.insert(name, w.clone());
                    }
                }
                (held.len() == wanted_leases.len()).then(|| {
                    names
                        .iter()
                        .filter_map(|n| Some((n.clone(), held.get(&lease_of(n))?.clone())))
                        .collect()
                })
            }
        },
    )
    .await
}

/// `status.holder` of each config, as the name of the replica it is.
async fn holders(
    admin: &Client,
    names: &[String],
    replicas: &[Replica],
) -> BTreeMap<String, Option<String>> {
    let configs = provider::configs(admin);
    let replica_names: Vec<String> = replicas.iter().map(|r| r.name.clone()).collect();
    let mut out = BTreeMap::new();
    for name in names {
        let holder = configs.get(name).await.ok().and_then(|c| {
            c.data
                .pointer("/status/holder")?
                .as_str()
                .map(str::to_owned)
        });
        out.insert(
            name.clone(),
            holder.map(|h| replica_of(&h, &replica_names).unwrap_or(h)),
        );
    }
    out
}

/// The replica whose Lease identity `identity` is (`<name>-<random>`).
pub fn replica_of(identity: &str, replicas: &[String]) -> Option<String> {
    replicas
        .iter()
        .find(|r| {
            identity
                .strip_prefix(r.as_str())
                .is_some_and(|rest| rest.starts_with('-'))
        })
        .cloned()
}

/// Whether a request is about config `name`: its namespace's objects
/// (ProxmoxVMs, events), the config itself, its credentials Secret (named
/// after it in the provider's namespace), or its Lease.
pub fn of_config(e: &Event, name: &str) -> bool {
    let named = e.name.as_deref() == Some(name);
    let base = e.resource.split('/').next().unwrap_or_default();
    e.namespace.as_deref() == Some(name)
        || (base == "clusterproviderconfigs" && named)
        || (base == "secrets" && named && e.namespace.as_deref() == Some(PROVIDER_NAMESPACE))
        || (base == "leases" && e.name.as_deref() == Some(lease_of(name).as_str()))
}

fn join_map(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k} by {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---- The figures (pure) ----

/// API server requests in one window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    pub seconds: f64,
    pub total: u64,
    /// Lease requests by verb (`list`, `update`, `create`, `delete`, ...).
    pub leases: BTreeMap<String, u64>,
}

impl Traffic {
    pub fn of<'a>(events: impl IntoIterator<Item = &'a Event>, (from, to): (f64, f64)) -> Self {
        let mut traffic = Self {
            seconds: (to - from).max(0.0),
            ..Self::default()
        };
        for e in events.into_iter().filter(|e| e.time >= from && e.time < to) {
            traffic.total += 1;
            if e.resource == "leases" {
                *traffic.leases.entry(e.verb.clone()).or_insert(0) += 1;
            }
        }
        traffic
    }

    pub fn lease_total(&self) -> u64 {
        self.leases.values().sum()
    }

    /// `count` per minute of this window.
    pub fn per_minute(&self, count: u64) -> Option<f64> {
        (self.seconds > 0.0).then(|| count as f64 * 60.0 / self.seconds)
    }
}

/// A figure per phase of the whole run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phased<T> {
    pub creating: T,
    pub idle: Option<T>,
    pub deleting: Option<T>,
}

impl<T> Phased<T> {
    pub fn by(windows: &Windows, f: impl Fn((f64, f64)) -> T) -> Self {
        Self {
            creating: f(windows.creating),
            idle: windows.idle.map(&f),
            deleting: windows.deleting.map(&f),
        }
    }

    /// (phase, figure) in order.
    pub fn each(&self) -> [(&'static str, Option<&T>); 3] {
        [
            ("creating", Some(&self.creating)),
            ("idle", self.idle.as_ref()),
            ("deleting", self.deleting.as_ref()),
        ]
    }
}

/// The phases of the whole run: from the first apply to the last config
/// all Ready (or the delete, after a timeout), the common idle window, and
/// from the common delete to the last config all gone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Windows {
    pub creating: (f64, f64),
    pub idle: Option<(f64, f64)>,
    pub deleting: Option<(f64, f64)>,
}

impl Windows {
    /// `last` ends a window whose end was not seen (a timeout).
    pub fn of(phases: &[&Phases], last: f64) -> Self {
        let min = |xs: &mut dyn Iterator<Item = f64>| xs.fold(f64::INFINITY, f64::min);
        let max = |xs: &mut dyn Iterator<Item = f64>| xs.fold(f64::NEG_INFINITY, f64::max);
        let start = min(&mut phases.iter().map(|p| p.start));
        let create_end = max(&mut phases
            .iter()
            .map(|p| p.all_ready.or(p.delete_start).unwrap_or(last)));
        let all_ready = phases.iter().all(|p| p.all_ready.is_some());
        let idle_end = phases.iter().find_map(|p| p.idle_end);
        // After `--settle`, when there was one.
        let idle_start = phases
            .iter()
            .find_map(|p| p.idle_start)
            .unwrap_or(create_end);
        let delete_start = phases.iter().find_map(|p| p.delete_start);
        let gone = phases.iter().all(|p| p.all_gone.is_some());
        let delete_end = if gone {
            max(&mut phases.iter().filter_map(|p| p.all_gone))
        } else {
            last
        };
        Self {
            creating: (start, create_end),
            idle: idle_end.filter(|_| all_ready).map(|end| (idle_start, end)),
            deleting: delete_start.map(|d| (d, delete_end.max(d))),
        }
    }
}

/// One replica's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReplicaSummary {
    pub name: String,
    pub process: ProcessStats,
    /// Config → writes of its Lease by this replica (acquire, renew, give
    /// up) from the first apply to the last config gone: which configs it
    /// held.
    pub lease_writes: BTreeMap<String, u64>,
    /// Its API server requests.
    pub traffic: Phased<Traffic>,
}

/// The figures of a sharded run (the `sharded` part of a result).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sharded {
    /// One per config, as the other variants' (no process figures: those
    /// are the replicas').
    pub configs: Vec<Summary>,
    pub config_names: Vec<String>,
    /// `status.holder` of each config at the end, as a replica name.
    pub holders: BTreeMap<String, Option<String>>,
    pub replicas: Vec<ReplicaSummary>,
    /// Every request of the provider's ServiceAccount.
    pub all: Phased<Traffic>,
    /// Requests whose credential names no replica (0 unless the audit log
    /// lacks credential ids).
    pub unattributed: u64,
    /// Config → the requests naming its Lease.
    pub config_leases: BTreeMap<String, Phased<Traffic>>,
}

impl Sharded {
    pub fn of(run: &ShardedRun, import_limit: usize, nodes: &[String], time_scale: f64) -> Self {
        let configs: Vec<Summary> = run
            .configs
            .iter()
            .map(|(name, r)| {
                let mut s = summarize(r, import_limit, nodes, time_scale);
                s.title = format!("config {name}");
                s
            })
            .collect();
        let last = run
            .configs
            .iter()
            .flat_map(|(_, r)| r.requests.last().map(|q| q.time + 1.0))
            .fold(0.0, f64::max);
        let phases: Vec<&Phases> = run.configs.iter().map(|(_, r)| &r.phases).collect();
        let windows = Windows::of(&phases, last);
        let names: Vec<String> = run.configs.iter().map(|(n, _)| n.clone()).collect();
        let by_replica = attribute(&run.audit, &run.replicas);
        // From the first apply to the last config gone: what happened
        // before (the first replica up taking every config and handing
        // them over as the others joined) is setup.
        let measured = (windows.creating.0, windows.deleting.map_or(last, |d| d.1));
        let in_run = |e: &&Event| e.time >= measured.0 && e.time < measured.1;
        let replicas = run
            .replicas
            .iter()
            .map(|r| {
                let events = by_replica.get(&r.name).map_or(&[][..], Vec::as_slice);
                ReplicaSummary {
                    name: r.name.clone(),
                    process: ProcessStats::of(
                        &r.samples,
                        windows.creating,
                        windows.idle,
                        windows.deleting,
                    ),
                    lease_writes: lease_writes(events.iter().copied().filter(in_run), &names),
                    traffic: Phased::by(&windows, |w| Traffic::of(events.iter().copied(), w)),
                }
            })
            .collect();
        let unattributed = run.audit.iter().filter(in_run).count()
            - by_replica.values().flatten().filter(|e| in_run(e)).count();
        Self {
            configs,
            config_names: names.clone(),
            holders: run.holders.clone(),
            replicas,
            all: Phased::by(&windows, |w| Traffic::of(&run.audit, w)),
            unattributed: unattributed as u64,
            config_leases: names
                .iter()
                .map(|n| {
                    let lease = lease_of(n);
                    let of_lease: Vec<&Event> = run
                        .audit
                        .iter()
                        .filter(|e| e.resource == "leases" && e.name.as_deref() == Some(&lease))
                        .collect();
                    (
                        n.clone(),
                        Phased::by(&windows, |w| Traffic::of(of_lease.iter().copied(), w)),
                    )
                })
                .collect(),
        }
    }
}

/// The requests of each replica, by its token's credential id.
pub fn attribute<'a>(
    events: &'a [Event],
    replicas: &[ReplicaRun],
) -> BTreeMap<String, Vec<&'a Event>> {
    let by_credential: BTreeMap<&str, &str> = replicas
        .iter()
        .filter_map(|r| Some((r.credential.as_deref()?, r.name.as_str())))
        .collect();
    let mut out: BTreeMap<String, Vec<&Event>> = replicas
        .iter()
        .map(|r| (r.name.clone(), Vec::new()))
        .collect();
    for e in events {
        if let Some(name) = e.credential.as_deref().and_then(|c| by_credential.get(c))
            && let Some(list) = out.get_mut(*name)
        {
            list.push(e);
        }
    }
    out
}

/// Config → how often these requests wrote its Lease (create, update).
pub fn lease_writes<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    configs: &[String],
) -> BTreeMap<String, u64> {
    let leases: BTreeMap<String, &String> = configs.iter().map(|c| (lease_of(c), c)).collect();
    let mut out = BTreeMap::new();
    for e in events {
        if e.resource == "leases"
            && matches!(e.verb.as_str(), "create" | "update" | "patch")
            && let Some(config) = e.name.as_ref().and_then(|n| leases.get(n))
        {
            *out.entry((*config).clone()).or_insert(0) += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(
        time: f64,
        verb: &str,
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
        who: Option<&str>,
    ) -> Event {
        Event {
            time,
            verb: verb.into(),
            resource: resource.into(),
            namespace: ns.map(Into::into),
            name: name.map(Into::into),
            credential: who.map(Into::into),
        }
    }

    #[test]
    fn names_and_leases() {
        assert_eq!(config_name(0), "bench-sharded-a");
        assert_eq!(replica_name(2), "bench-replica-c");
        assert_eq!(
            lease_of("bench-sharded-a"),
            "crossplane-provider-proxmox.cpc.bench-sharded-a"
        );
        let replicas = ["bench-replica-a".to_owned(), "bench-replica-ab".to_owned()];
        assert_eq!(
            replica_of("bench-replica-ab-0f0f0f0f", &replicas).as_deref(),
            Some("bench-replica-ab")
        );
        assert_eq!(
            replica_of("bench-replica-a-0f0f0f0f", &replicas).as_deref(),
            Some("bench-replica-a")
        );
        assert_eq!(replica_of("someone-else-1", &replicas), None);
    }

    #[test]
    fn requests_belong_to_the_config_they_name() {
        let a = "bench-sharded-a";
        let lease = lease_of(a);
        let mine = [
            event(
                1.0,
                "patch",
                "proxmoxvms/status",
                Some(a),
                Some("vm-0001"),
                None,
            ),
            event(1.0, "create", "events", Some(a), None, None),
            event(
                1.0,
                "patch",
                "clusterproviderconfigs/status",
                None,
                Some(a),
                None,
            ),
            event(
                1.0,
                "get",
                "secrets",
                Some(PROVIDER_NAMESPACE),
                Some(a),
                None,
            ),
            event(
                1.0,
                "update",
                "leases",
                Some(PROVIDER_NAMESPACE),
                Some(&lease),
                None,
            ),
        ];
        for e in &mine {
            assert!(of_config(e, a), "{e:?}");
            assert!(!of_config(e, "bench-sharded-b"), "{e:?}");
        }
        let shared = [
            event(1.0, "watch", "proxmoxvms", None, None, None),
            event(1.0, "list", "leases", Some(PROVIDER_NAMESPACE), None, None),
            event(
                1.0,
                "update",
                "leases",
                Some(PROVIDER_NAMESPACE),
                Some("crossplane-provider-proxmox.member.bench-replica-a-1"),
                None,
            ),
            // A Secret named like the config elsewhere is not its credentials.
            event(1.0, "get", "secrets", Some("other"), Some(a), None),
        ];
        for e in &shared {
            assert!(!of_config(e, a), "{e:?}");
        }
    }

    fn replica(name: &str, credential: Option<&str>) -> ReplicaRun {
        ReplicaRun {
            name: name.into(),
            credential: credential.map(Into::into),
            samples: Vec::new(),
        }
    }

    #[test]
    fn requests_are_attributed_by_credential_and_leases_counted() {
        let configs = ["bench-sharded-a".to_owned(), "bench-sharded-b".to_owned()];
        let (la, lb) = (lease_of(&configs[0]), lease_of(&configs[1]));
        let ns = Some(PROVIDER_NAMESPACE);
        let events = [
            event(1.0, "list", "leases", ns, None, Some("j1")),
            event(
                1.5,
                "update",
                "leases",
                ns,
                Some("crossplane-provider-proxmox.member.x"),
                Some("j1"),
            ),
            event(2.0, "update", "leases", ns, Some(&la), Some("j1")),
            event(2.0, "create", "leases", ns, Some(&lb), Some("j2")),
            event(3.0, "update", "leases", ns, Some(&lb), Some("j2")),
            event(3.0, "get", "leases", ns, Some(&lb), Some("j2")),
            event(
                3.5,
                "patch",
                "proxmoxvms/status",
                Some("x"),
                Some("v"),
                Some("j2"),
            ),
            // Another token of the same account, and none at all.
            event(4.0, "update", "leases", ns, Some(&la), Some("j9")),
            event(4.0, "list", "leases", ns, None, None),
        ];
        let replicas = [
            replica("r-a", Some("j1")),
            replica("r-b", Some("j2")),
            replica("r-c", None),
        ];
        let by = attribute(&events, &replicas);
        assert_eq!(by["r-a"].len(), 3);
        assert_eq!(by["r-b"].len(), 4);
        assert!(by["r-c"].is_empty());
        let a = lease_writes(by["r-a"].iter().copied(), &configs);
        assert_eq!(a, BTreeMap::from([(configs[0].clone(), 1)]));
        let b = lease_writes(by["r-b"].iter().copied(), &configs);
        assert_eq!(
            b,
            BTreeMap::from([(configs[1].clone(), 2)]),
            "get is not a write"
        );
        let t = Traffic::of(by["r-b"].iter().copied(), (0.0, 3.2));
        assert_eq!(t.total, 3);
        assert_eq!(
            t.leases,
            BTreeMap::from([
                ("create".into(), 1),
                ("get".into(), 1),
                ("update".into(), 1)
            ])
        );
        assert_eq!(t.lease_total(), 3);
        assert_eq!(t.per_minute(3), Some(3.0 * 60.0 / 3.2));
        assert_eq!(Traffic::default().per_minute(1), None);
    }

    fn phases(
        start: f64,
        ready: Option<f64>,
        idle_end: Option<f64>,
        delete: f64,
        gone: Option<f64>,
    ) -> Phases {
        Phases {
            start,
            all_ready: ready,
            idle_end,
            delete_start: Some(delete),
            all_gone: gone,
            ..Phases::default()
        }
    }

    #[test]
    fn the_runs_windows_span_every_config() {
        let a = phases(10.0, Some(60.0), Some(300.0), 300.0, Some(340.0));
        let b = phases(10.5, Some(75.0), Some(300.0), 300.0, Some(330.0));
        let w = Windows::of(&[&a, &b], 999.0);
        assert_eq!(w.creating, (10.0, 75.0));
        assert_eq!(w.idle, Some((75.0, 300.0)));
        assert_eq!(w.deleting, Some((300.0, 340.0)));
        // A config that timed out: no idle window, creating ends at the
        // delete; one not gone: deleting ends at the last record.
        let c = phases(10.2, None, None, 200.0, None);
        let w = Windows::of(&[&a, &c], 500.0);
        assert_eq!(w.creating, (10.0, 200.0));
        assert_eq!(w.idle, None);
        assert_eq!(w.deleting, Some((300.0, 500.0)));
    }

    fn config_run(ready: f64) -> Run {
        Run {
            variant: Variant::Sharded,
            vms: 2,
            phases: phases(100.0, Some(ready), Some(200.0), 200.0, Some(230.0)),
            per_vm: BTreeMap::new(),
            requests: Vec::new(),
            tasks: Vec::new(),
            audit: Vec::new(),
            samples: Vec::new(),
            neighbours: Vec::new(),
            sim_vms: Vec::new(),
            stalls: Vec::new(),
            dir: "x".into(),
        }
    }

    #[test]
    fn the_run_is_summarised_per_replica_and_per_config() {
        let names = [config_name(0), config_name(1)];
        let (la, lb) = (lease_of(&names[0]), lease_of(&names[1]));
        let ns = Some(PROVIDER_NAMESPACE);
        let mut audit = vec![
            // Setup: replica a took both configs, then handed b over.
            event(90.0, "create", "leases", ns, Some(&la), Some("ja")),
            event(90.0, "create", "leases", ns, Some(&lb), Some("ja")),
            event(92.0, "update", "leases", ns, Some(&lb), Some("ja")),
            event(94.0, "update", "leases", ns, Some(&lb), Some("jb")),
        ];
        // The run: each renews its own every 2 s, lists every 2 s.
        for t in (100..230).step_by(2) {
            let t = f64::from(t);
            audit.push(event(t, "list", "leases", ns, None, Some("ja")));
            audit.push(event(t, "update", "leases", ns, Some(&la), Some("ja")));
            audit.push(event(t, "list", "leases", ns, None, Some("jb")));
            audit.push(event(t, "update", "leases", ns, Some(&lb), Some("jb")));
        }
        audit.push(event(
            150.0,
            "patch",
            "proxmoxvms/status",
            Some(&names[0]),
            Some("vm-0000"),
            Some("ja"),
        ));
        audit.push(event(151.0, "get", "proxmoxvms", None, None, None));
        let run = ShardedRun {
            configs: vec![
                (names[0].clone(), config_run(150.0)),
                (names[1].clone(), config_run(160.0)),
            ],
            replicas: vec![
                replica("bench-replica-a", Some("ja")),
                replica("bench-replica-b", Some("jb")),
            ],
            audit,
            holders: BTreeMap::new(),
        };
        let s = Sharded::of(&run, 2, &["pve1".into()], 0.1);
        assert_eq!(s.config_names, names);
        assert_eq!(s.configs[0].title, "config bench-sharded-a");
        let (a, b) = (&s.replicas[0], &s.replicas[1]);
        // Setup's hand-over is not holding.
        assert_eq!(a.lease_writes, BTreeMap::from([(names[0].clone(), 65)]));
        assert_eq!(b.lease_writes, BTreeMap::from([(names[1].clone(), 65)]));
        // Creating ends with the last config Ready (160), idle is common.
        assert_eq!(a.traffic.creating.seconds, 60.0);
        assert_eq!(a.traffic.creating.leases["list"], 30);
        assert_eq!(
            a.traffic.creating.total, 61,
            "30 lists, 30 renewals, a status write"
        );
        let idle = a.traffic.idle.as_ref().unwrap();
        assert_eq!(
            (idle.seconds, idle.per_minute(idle.lease_total())),
            (40.0, Some(60.0))
        );
        assert_eq!(s.unattributed, 1);
        let lease_a = &s.config_leases[&names[0]];
        assert_eq!(
            lease_a.idle.as_ref().unwrap().leases,
            BTreeMap::from([("update".into(), 20)])
        );
        assert_eq!(s.all.deleting.as_ref().unwrap().seconds, 30.0);
    }
}
