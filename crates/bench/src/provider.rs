//! A run of the real `proxmox-provider` binary: its own simulator, its own
//! ClusterProviderConfig and namespace, started as a child process under
//! the provider's ServiceAccount, then apply → all Ready → idle → delete →
//! all gone.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::process::Command;

use crate::arena::Arena;
use crate::child::{Neighbours, Sampler, spawn_logged, terminate};
use crate::cli::{RunArgs, Variant};
use crate::cluster::{Cluster, FIELD_MANAGER, PROVIDER_NAMESPACE, provider_user};
use crate::fleet::{self, FleetLimits, ImageTimes};
use crate::phases;
use crate::run::Run;
use crate::sim::{Sim, Token};
use crate::workload::{self, Tracker};
use crate::{audit, sim};

pub struct Binaries<'a> {
    pub provider: &'a Path,
    pub sim: &'a Path,
}

pub async fn run(
    cluster: &Cluster,
    args: &RunArgs,
    variant: Variant,
    binaries: &Binaries<'_>,
) -> anyhow::Result<Run> {
    Ok(run_fleet(cluster, args, variant, binaries, None).await?.0)
}

/// [`run`], or with `fleet` limits the fleet variant: the VMs clone a
/// ProxmoxImage's templates, applied and deleted with them and followed
/// until gone.
pub async fn run_fleet(
    cluster: &Cluster,
    args: &RunArgs,
    variant: Variant,
    binaries: &Binaries<'_>,
    fleet: Option<FleetLimits>,
) -> anyhow::Result<(Run, Option<ImageTimes>)> {
    let name = format!("bench-{}", variant.name());
    let dir = sim::variant_dir(&args.work_dir, variant.name())?;
    let arena = Arena::start(args, binaries.sim, "provider", &dir).await?;
    let neighbours = Neighbours::start(&cluster.pids());
    configure_with(
        &cluster.admin,
        &name,
        &arena.actor,
        &arena.sim,
        (
            match (fleet, args.rps) {
                (Some(fleet), _) => Some(fleet.spec()),
                (None, Some(rps)) => Some(serde_json::json!({"requestsPerSecond": rps})),
                (None, None) => None,
            },
            args.full_look_interval.as_deref(),
        ),
    )
    .await?;

    let mut provider = spawn_logged(
        provider_command(binaries.provider, &cluster.provider_kubeconfig, variant),
        &dir.join("provider.log"),
    )?;
    let sampler = Sampler::start(provider.id().context("the provider exited at once")?);
    wait_config_ready(&cluster.admin, &name)
        .await
        .with_context(|| {
            format!(
                "the provider did not report ClusterProviderConfig {name} Ready; see {}",
                dir.join("provider.log").display()
            )
        })?;

    let vms = workload::api(&cluster.admin, &name);
    let tracker = match fleet {
        Some(_) => Tracker::selecting(fleet::SELECTOR),
        None => Tracker::default(),
    };
    let watch = tracker.watch(vms.clone());
    let manifest = match fleet {
        Some(_) => fleet::vm_manifest,
        None => workload::manifest,
    };
    let manifests = (0..args.vm_count())
        .map(|i| manifest(&workload::vm_name(i), &name, &name, &args.nodes))
        .map(|vm| workload::with_firewall(vm, args.firewall))
        .collect();
    let image = match fleet {
        Some(_) => Some(
            fleet::apply_and_follow(
                &cluster.admin,
                &name,
                fleet::image_manifest(&name, &name, &args.nodes),
                tracker.clone(),
                Duration::from_secs(args.delete_timeout()),
            )
            .await?,
        ),
        None => None,
    };
    let outcome = phases::drive(&vms, &tracker, manifests, args, &sampler, &arena.referee).await?;
    watch.abort();
    let image = match image {
        Some(follow) => Some(follow.await.context("following the ProxmoxImage")?),
        None => None,
    };

    sampler.mark();
    terminate(&mut provider, Duration::from_secs(20)).await;
    let samples = sampler.finish();
    let (requests, tasks, sim) = arena.finish().await?;
    let neighbours = neighbours.finish(Some(sim));
    let audit = audit::read(cluster.audit_log()?, &provider_user())?;
    let run = Run {
        variant,
        vms: args.vm_count(),
        phases: outcome.phases,
        per_vm: tracker.snapshot(),
        requests,
        tasks,
        audit,
        samples,
        neighbours,
        sim_vms: outcome.sim_vms,
        stalls: outcome.stalls,
        dir,
    };
    run.save_raw()?;
    Ok((run, image))
}

/// `proxmox-provider run` with leader election on (its default) and the
/// Leases in the provider's namespace, as deployed.
pub fn provider_command(binary: &Path, kubeconfig: &Path, variant: Variant) -> Command {
    let mut command = Command::new(binary);
    command
        .arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0", "--log-format", "text"])
        .args([
            "--task-observe-mode",
            match variant {
                Variant::PerTask => "per-task",
                _ => "batched",
            },
        ])
        .env("POD_NAMESPACE", PROVIDER_NAMESPACE)
        // `BENCH_PROVIDER_LOG` (a `RUST_LOG` filter) to follow the
        // provider's hand-offs in its log; the figures do not depend on it.
        .env(
            "RUST_LOG",
            std::env::var("BENCH_PROVIDER_LOG").unwrap_or_else(|_| "info".to_owned()),
        )
        .env_remove("KUBECONFIG");
    command
}

/// The variant's namespace, credentials Secret and ClusterProviderConfig
/// (default limits and timings; the simulator's certificate pinned).
pub async fn configure(admin: &Client, name: &str, token: &Token, sim: &Sim) -> anyhow::Result<()> {
    configure_with(admin, name, token, sim, (None, None)).await
}

/// [`configure`] with the config's `spec.limits` and `fullLookInterval`
/// set.
pub async fn configure_with(
    admin: &Client,
    name: &str,
    token: &Token,
    sim: &Sim,
    (limits, full_look): (Option<serde_json::Value>, Option<&str>),
) -> anyhow::Result<()> {
    let ssa = PatchParams::apply(FIELD_MANAGER).force();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(admin.clone())
        .patch(name, &ssa, &Patch::Apply(&namespace))
        .await
        .context("creating the namespace")?;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": PROVIDER_NAMESPACE},
        "stringData": {"tokenId": token.id, "secret": token.secret},
    }))?;
    Api::<Secret>::namespaced(admin.clone(), PROVIDER_NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .context("creating the credentials Secret")?;
    let mut config = json!({
        "apiVersion": "proxmox.m.crossplane.io/v1alpha1",
        "kind": "ClusterProviderConfig",
        "metadata": {"name": name},
        "spec": {
            "endpoint": sim.base_url,
            "credentials": {"source": "Secret", "secretRef": {"name": name, "namespace": PROVIDER_NAMESPACE}},
            "tls": {"fingerprint": sim.fingerprint},
            // The fleet's image URL is on loopback: the simulator never
            // fetches it, and the default policy refuses it.
            "downloadPolicy": {"allowHttp": true, "allowedHosts": ["127.0.0.1"]},
        },
    });
    if let Some(limits) = limits {
        config["spec"]["limits"] = limits;
    }
    if let Some(every) = full_look {
        config["spec"]["fullLookInterval"] = json!(every);
    }
    let config: DynamicObject = serde_json::from_value(config)?;
    configs(admin)
        .create(&PostParams::default(), &config)
        .await
        .context("creating the ClusterProviderConfig")?;
    Ok(())
}

pub fn configs(admin: &Client) -> Api<DynamicObject> {
    Api::all_with(
        admin.clone(),
        &ApiResource::erase::<provider_proxmox::api::ClusterProviderConfig>(&()),
    )
}

pub async fn wait_config_ready(admin: &Client, name: &str) -> anyhow::Result<()> {
    let configs = configs(admin);
    crate::wait::until(
        "the ClusterProviderConfig to be Ready",
        Duration::from_secs(120),
        || {
            let configs = configs.clone();
            async move {
                let config = configs.get(name).await.ok()?;
                let ready = config
                    .data
                    .pointer("/status/conditions")?
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                ready.then_some(())
            }
        },
    )
    .await
}
