//! The Go predecessor's pattern, as a baseline: one worker per VM that
//! allocates a VMID (`/cluster/nextid`), creates the VM, polls its own task
//! status every 3 s until it ends, then resizes the disk and starts the VM
//! the same way (blocking, one VM per worker). It gets the provider's
//! per-node import limit and an even spread over the nodes (the predecessor
//! had neither; without them the simulator, which does not model storage
//! contention, would import everything at once), so wall time compares the
//! observation patterns, not the limits. While idle each VM is observed as
//! crossplane-runtime does by default: `status/current` and `config` once a
//! minute. Deleting stops the VM, then destroys it, polling the same way.
//!
//! It runs as a child process of `provider-bench run` (hidden subcommand
//! `predecessor`), so its CPU and memory are its own, and writes what it saw
//! as JSON.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use pve_client::vm::{
    AgentConfig, CreateVm, DeleteOptions, DiskSize, Drive, DriveKey, IpConfig, Nic, NicModel,
    ScsiHw, VmParams, gib,
};
use pve_client::{Client, Error, Upid};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::clock::now;
use crate::run::Phases;
use crate::workload::{self, VmState};

/// Arguments of the hidden `predecessor` subcommand. The token comes in the
/// environment, never on a command line.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    pub endpoint: String,
    #[arg(long)]
    pub fingerprint: String,
    /// `user@realm!name=secret`
    #[arg(long, env = "PREDECESSOR_TOKEN", hide_env_values = true)]
    pub token: String,
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<String>,
    #[arg(long)]
    pub vms: usize,
    /// Imports at once per node.
    #[arg(long)]
    pub slots: usize,
    /// Seconds between a worker's task status polls.
    #[arg(long, default_value_t = 3.0)]
    pub poll: f64,
    /// Seconds of the idle window.
    #[arg(long)]
    pub idle: u64,
    /// Seconds between two observations of a VM while idle.
    #[arg(long, default_value_t = 60)]
    pub observe_every: u64,
    /// Seconds allowed for creating.
    #[arg(long)]
    pub timeout: u64,
    /// Seconds allowed for deleting.
    #[arg(long)]
    pub delete_timeout: u64,
    /// Where the result goes (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

/// What the driver reports.
#[derive(Serialize, Deserialize)]
pub struct Report {
    pub phases: Phases,
    pub per_vm: BTreeMap<String, VmState>,
    pub stalls: Vec<String>,
}

/// The line on stdout when every VM is up (the parent then takes the
/// referee's snapshot of the simulator).
pub const READY_LINE: &str = "all ready";
/// The start of a progress line on stdout (the parent shows it).
pub const PROGRESS: &str = "progress ";

pub async fn main(args: Args) -> anyhow::Result<()> {
    provider_proxmox::install_crypto_provider();
    let credentials = pve_client::Credentials::token_from_str(&args.token)?;
    let mut config = pve_client::ClientConfig::new(&args.endpoint, credentials)?;
    config.tls.pinned_fingerprints = vec![args.fingerprint.parse()?];
    // A Go http.Client: no rate limit of its own.
    config.limits = crate::arena::generous_limits();
    let client = Client::new(config)?;
    let poll = Duration::from_secs_f64(args.poll);
    let slots: Arc<BTreeMap<String, Arc<Semaphore>>> = Arc::new(
        args.nodes
            .iter()
            .map(|n| (n.clone(), Arc::new(Semaphore::new(args.slots))))
            .collect(),
    );

    let start = now();
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..args.vms)
        .map(|i| {
            let node = args.nodes[i % args.nodes.len()].clone();
            let (client, slots, done) = (client.clone(), slots.clone(), done.clone());
            tokio::spawn(async move {
                let vm = create(&client, i, &node, &slots, poll).await;
                done.fetch_add(1, Ordering::Relaxed);
                vm
            })
        })
        .collect();
    let progress = tokio::spawn(report_progress(done, args.vms));
    let mut per_vm = BTreeMap::new();
    let mut stalls = Vec::new();
    let created = tokio::time::timeout(
        Duration::from_secs(args.timeout),
        futures::future::join_all(workers),
    )
    .await;
    progress.abort();
    let mut phases = Phases {
        start,
        ..Phases::default()
    };
    let mut vms: Vec<(String, String, u32)> = Vec::new();
    match created {
        Ok(results) => {
            for (i, result) in results.into_iter().enumerate() {
                let state = result.context("a worker panicked")?;
                if let (Some(node), Some(vmid)) = (&state.node, state.external_names.last()) {
                    vms.push((workload::vm_name(i), node.clone(), vmid.parse()?));
                }
                per_vm.insert(workload::vm_name(i), state);
            }
            let unfinished = per_vm.values().filter(|v| v.ready_at.is_none()).count();
            if unfinished == 0 {
                phases.all_ready = Some(now());
                println!("{READY_LINE}");
                idle(&client, &vms, args.idle, args.observe_every).await;
                phases.idle_end = Some(now());
            } else {
                stalls.push(format!("creating: {unfinished} VMs failed"));
            }
        }
        Err(_) => stalls.push(format!("creating: timed out after {} s", args.timeout)),
    }

    phases.delete_start = Some(now());
    let deleted = tokio::time::timeout(
        Duration::from_secs(args.delete_timeout),
        futures::future::join_all(vms.iter().map(|(name, node, vmid)| {
            let client = client.clone();
            async move { (name.clone(), destroy(&client, node, *vmid, poll).await) }
        })),
    )
    .await;
    match deleted {
        Ok(results) => {
            for (name, gone_at) in results {
                if let Some(vm) = per_vm.get_mut(&name) {
                    vm.gone_at = gone_at;
                }
            }
            phases.all_gone = Some(now());
        }
        Err(_) => stalls.push(format!(
            "deleting: timed out after {} s",
            args.delete_timeout
        )),
    }
    let report = Report {
        phases,
        per_vm,
        stalls,
    };
    crate::run::write_json(&args.out, &report)
}

/// A progress line every 15 s while creating.
async fn report_progress(done: Arc<AtomicUsize>, n: usize) {
    let start = now();
    loop {
        tokio::time::sleep(Duration::from_secs(15)).await;
        let done = done.load(Ordering::Relaxed);
        println!(
            "{PROGRESS}after {:.0} s, {done} of {n} workers done",
            now() - start
        );
    }
}

/// One worker: nextid + create (again while the VMID turns out taken), then
/// each task polled to its end, every `poll`.
async fn create(
    client: &Client,
    i: usize,
    node: &str,
    slots: &BTreeMap<String, Arc<Semaphore>>,
    poll: Duration,
) -> VmState {
    let mut vm = VmState {
        created_at: now(),
        node: Some(node.to_owned()),
        ..VmState::default()
    };
    let result = async {
        let permit = match slots.get(node) {
            Some(slot) => Some(slot.acquire().await?),
            None => None,
        };
        let vmid = loop {
            let vmid = client.next_vmid().await?;
            vm.external_names.push(vmid.to_string());
            let create = CreateVm {
                vmid,
                params: params(&workload::vm_name(i)),
                ..CreateVm::default()
            };
            match client.create_vm(node, &create).await {
                Ok(upid) => {
                    wait(client, &upid, poll).await?;
                    break vmid;
                }
                // Someone else got this VMID first: ask again.
                Err(Error::AlreadyExists { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        drop(permit);
        let size = DiskSize::To(gib(workload::DISK_SIZE_GIB));
        let upid = client.resize_disk(node, vmid, "scsi0", size).await?;
        wait(client, &upid, poll).await?;
        let upid = client.start_vm(node, vmid).await?;
        wait(client, &upid, poll).await?;
        anyhow::Ok(())
    }
    .await;
    match result {
        Ok(()) => vm.ready_at = Some(now()),
        Err(e) => vm.synced_message = e.to_string(),
    }
    vm
}

/// The create parameters the provider sends for the bench's manifest.
fn params(name: &str) -> VmParams {
    let key = |k: &str| k.parse::<DriveKey>().expect("a drive slot");
    VmParams {
        name: Some(name.to_owned()),
        memory: Some(workload::MEMORY_MIB),
        cores: Some(2),
        agent: Some(AgentConfig::enabled(true)),
        ciuser: Some("ubuntu".into()),
        scsihw: Some(ScsiHw::VirtioScsiPci),
        disks: [
            (key("scsi0"), Drive::import("local-lvm", workload::IMAGE)),
            (key("ide2"), Drive::cloud_init("local-lvm")),
        ]
        .into(),
        nets: [(0, Nic::new(NicModel::Virtio, "vmbr0"))].into(),
        ipconfig: [(0, IpConfig::dhcp())].into(),
        ..VmParams::default()
    }
}

/// Polls the task's status now and every `poll` until it stopped; an exit
/// status other than OK is an error.
async fn wait(client: &Client, upid: &Upid, poll: Duration) -> anyhow::Result<()> {
    loop {
        let status = client.task_status(upid).await?;
        if !status.is_running() {
            return match status.exitstatus.as_deref() {
                Some("OK") => Ok(()),
                other => anyhow::bail!("task {upid} ended with {other:?}"),
            };
        }
        tokio::time::sleep(poll).await;
    }
}

/// Observes every VM once per `every` seconds (from a random offset) until
/// `seconds` have passed.
async fn idle(client: &Client, vms: &[(String, String, u32)], seconds: u64, every: u64) {
    let end = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let observers = vms.iter().map(|(_, node, vmid)| async move {
        let offset = Duration::from_secs_f64(rand::random::<f64>() * every as f64);
        let mut next = tokio::time::Instant::now() + offset;
        while next < end {
            tokio::time::sleep_until(next).await;
            // Errors do not matter here; the requests are what is measured.
            let _ = client.vm_status(node, *vmid).await;
            let _ = client.vm_config(node, *vmid).await;
            next += Duration::from_secs(every);
        }
    });
    futures::future::join_all(observers).await;
    tokio::time::sleep_until(end).await;
}

/// Stop, then destroy with purge; the time it was gone, if it went.
async fn destroy(client: &Client, node: &str, vmid: u32, poll: Duration) -> Option<f64> {
    let result = async {
        let upid = client.stop_vm(node, vmid).await?;
        wait(client, &upid, poll).await?;
        let options = DeleteOptions {
            purge: true,
            destroy_unreferenced_disks: true,
        };
        let upid = client.delete_vm(node, vmid, options).await?;
        wait(client, &upid, poll).await
    }
    .await;
    result.ok().map(|()| now())
}
