//! `POST .../status/{start,stop,shutdown,reboot}`: all async. Lock checks
//! and the flock happen inside the tasks, so a call during a create returns
//! a UPID whose task fails after the flock timeout.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{
    NODE_VMID, SKIPLOCK, assert_config_exists, check_root_only, spawn_locked, task_lock_check,
};
use crate::clock::Clock;
use crate::http::{ApiError, Call, Reply};
use crate::instance::Instance;
use crate::schema::{Param, propstr};
use crate::state::Running;
use crate::tasks::TaskCtx;

pub const START: &[Param] = &[SKIPLOCK, Param::integer("timeout").min(0).max(86400).opt()];
pub const STOP: &[Param] = &[
    SKIPLOCK,
    Param::integer("timeout").min(0).opt(),
    Param::boolean("keepActive").opt(),
    Param::boolean("overrule-shutdown").opt(),
];
pub const SHUTDOWN: &[Param] = &[
    SKIPLOCK,
    Param::integer("timeout").min(0).opt(),
    Param::boolean("forceStop").opt(),
    Param::boolean("keepActive").opt(),
];
pub const REBOOT: &[Param] = &[Param::integer("timeout").min(0).opt()];

pub const PARAMS_START: &[&[Param]] = &[NODE_VMID, START];
pub const PARAMS_STOP: &[&[Param]] = &[NODE_VMID, STOP];
pub const PARAMS_SHUTDOWN: &[&[Param]] = &[NODE_VMID, SHUTDOWN];
pub const PARAMS_REBOOT: &[&[Param]] = &[NODE_VMID, REBOOT];

/// Sync part shared by all power calls: the permission and root-only
/// parameters. Like PVE, the VM's existence is checked in the task.
fn precheck(inst: &Instance, call: &Call) -> Result<(String, u32, bool), ApiError> {
    let node = call.params.node().to_owned();
    let vmid = call.params.vmid("vmid");
    let skiplock = call.params.flag("skiplock") == Some(true);
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.PowerMgmt"])?;
    check_root_only(call, &["skiplock", "keepActive"])?;
    Ok((node, vmid, skiplock))
}

pub async fn start_handler(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let (node, vmid, skiplock) = precheck(&inst, &call)?;
    if let Some(upid) = crate::api::ha::request_state(&inst, &call, &node, vmid, "started") {
        return Ok(Reply::data(upid));
    }
    Ok(spawn_locked(
        &inst,
        &call,
        "qmstart",
        vmid,
        move |ctx| async move { start_locked(&ctx, vmid, skiplock).await },
    ))
}

/// A start task's work (also used by create's `start=1`).
pub async fn start(ctx: &TaskCtx, vmid: u32) -> Result<(), String> {
    let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
    start_locked(ctx, vmid, false).await
}

/// A start inside another task that already holds the flock (rollback).
pub async fn start_unlocked(ctx: &TaskCtx, vmid: u32) -> Result<(), String> {
    start_locked(ctx, vmid, false).await
}

async fn start_locked(ctx: &TaskCtx, vmid: u32, skiplock: bool) -> Result<(), String> {
    let has_cloudinit = {
        let mut cluster = ctx.inst.cluster();
        let vm = cluster.vm(&ctx.node, vmid)?;
        if vm.is_template() {
            return Err("you can't start a vm if it's a template".into());
        }
        if !skiplock {
            vm.check_lock()?;
        }
        if vm.is_running() {
            return Err(format!("VM {vmid} already running"));
        }
        let host = cluster
            .node(&ctx.node)
            .map(|n| {
                // A running VNet is a bridge on every node.
                let mut bridges = n.bridges.clone();
                bridges.extend(cluster.sdn.running.vnets.keys().cloned());
                (u64::from(n.cpus), n.memory, bridges)
            })
            .unwrap_or_default();
        // qemu-server's config_to_command, before QEMU runs.
        let (cpus, memory, bridges) = host;
        if cpus < vm.max_cpus() {
            return Err(format!("MAX {cpus} vcpus allowed per VM on this node"));
        }
        for (k, v) in vm.config.iter().filter(|(k, _)| k.starts_with("net")) {
            let bridge = propstr::NET
                .parse(k, v)
                .ok()
                .and_then(|n| n.get("bridge").cloned());
            // PVE::Network::tap_plug.
            if let Some(bridge) = bridge.filter(|b| !bridges.contains(b)) {
                return Err(format!("bridge '{bridge}' does not exist"));
            }
        }
        // QEMU cannot back more guest memory than the host has (the
        // kernel's overcommit heuristic refuses the allocation).
        if vm.memory_mib() << 20 > memory {
            ctx.log("kvm: cannot set up guest memory 'pc.ram': Cannot allocate memory");
            return Err("start failed: QEMU exited with code 1".into());
        }
        // Passthrough devices are looked up and reserved on this node, as
        // the config will be once pending changes apply.
        let mut effective = vm.config.clone();
        effective.extend(vm.pending.clone());
        effective.retain(|k, _| !vm.pending_delete.contains(k));
        let running_here = |other: u32| {
            cluster
                .vms
                .get(&other)
                .is_some_and(|g| g.node == ctx.node && g.is_running())
        };
        let pci = cluster
            .mappings
            .start_devices(&effective, &ctx.node, vmid, running_here)?;
        let has_cloudinit = vm.config.values().any(|v| v.contains("-cloudinit"));
        // Reserved before QEMU starts, as qemu-server does; a start that
        // fails leaves a stale reservation the next start takes over.
        cluster.mappings.reserve(&ctx.node, vmid, pci);
        has_cloudinit
    };
    if has_cloudinit {
        ctx.log("generating cloud-init ISO");
    }
    ctx.sleep(ctx.inst.durations.start).await;
    ctx.checkpoint()?;
    let mut cluster = ctx.inst.cluster();
    let vm = cluster.vm_mut(&ctx.node, vmid)?;
    apply_pending(vm);
    vm.running = Some(Running {
        pid: 100_000 + vmid % 100_000,
        since: Instant::now(),
        since_epoch: Clock::epoch_secs(),
        agent_ready: ctx.inst.clock.deadline(ctx.inst.durations.guest_boot),
    });
    Ok(())
}

/// Pending changes take effect when the VM (re)starts.
pub fn apply_pending(vm: &mut crate::state::Vm) {
    let pending = std::mem::take(&mut vm.pending);
    vm.config.extend(pending);
    for key in std::mem::take(&mut vm.pending_delete) {
        vm.config.remove(&key);
    }
}

pub async fn stop_handler(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let (node, vmid, skiplock) = precheck(&inst, &call)?;
    if let Some(upid) = crate::api::ha::request_state(&inst, &call, &node, vmid, "stopped") {
        return Ok(Reply::data(upid));
    }
    Ok(spawn_locked(
        &inst,
        &call,
        "qmstop",
        vmid,
        move |ctx| async move {
            if !needs_stop(&ctx, vmid, skiplock)? {
                return Ok(());
            }
            ctx.sleep(ctx.inst.durations.stop).await;
            ctx.checkpoint()?;
            set_stopped(&ctx, vmid);
            Ok(())
        },
    ))
}

pub async fn shutdown_handler(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let (node, vmid, skiplock) = precheck(&inst, &call)?;
    if let Some(upid) = crate::api::ha::request_state(&inst, &call, &node, vmid, "stopped") {
        return Ok(Reply::data(upid));
    }
    let force = call.params.flag("forceStop") == Some(true);
    let timeout = call
        .params
        .int("timeout")
        .map(|t| Duration::from_secs(t.max(0) as u64));
    let timeout = timeout.unwrap_or(inst.durations.shutdown_timeout);
    Ok(spawn_locked(
        &inst,
        &call,
        "qmshutdown",
        vmid,
        move |ctx| async move {
            if !needs_stop(&ctx, vmid, skiplock)? {
                return Ok(());
            }
            ctx.checkpoint()?;
            // A guest that is still booting acts on the ACPI request only once it is up.
            let needed = ctx.inst.durations.shutdown + agent_ready_in(&ctx, vmid);
            if needed <= timeout {
                ctx.sleep(needed).await;
            } else {
                ctx.sleep(timeout).await;
                if !force {
                    return Err("VM quit/powerdown failed - got timeout".into());
                }
                ctx.log("VM still running - terminating now with SIGTERM");
            }
            set_stopped(&ctx, vmid);
            Ok(())
        },
    ))
}

pub async fn reboot_handler(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let (node, vmid, _) = precheck(&inst, &call)?;
    assert_config_exists(&inst, &node, vmid)?;
    if !inst.cluster().vm(&node, vmid)?.is_running() {
        return Err(ApiError::internal(format!("VM {vmid} not running")));
    }
    Ok(spawn_locked(
        &inst,
        &call,
        "qmreboot",
        vmid,
        move |ctx| async move {
            task_lock_check(&ctx, vmid, false)?;
            ctx.sleep(ctx.inst.durations.shutdown + ctx.inst.durations.start)
                .await;
            ctx.checkpoint()?;
            let mut cluster = ctx.inst.cluster();
            let vm = cluster.vm_mut(&ctx.node, vmid)?;
            apply_pending(vm);
            if let Some(run) = vm.running.as_mut() {
                run.agent_ready = ctx.inst.clock.deadline(ctx.inst.durations.guest_boot);
            }
            Ok(())
        },
    ))
}

/// The lock check of stop/shutdown, then whether there is anything to stop
/// (a stopped VM ends the task with OK at once).
fn needs_stop(ctx: &TaskCtx, vmid: u32, skiplock: bool) -> Result<bool, String> {
    task_lock_check(ctx, vmid, skiplock)?;
    Ok(is_running(ctx, vmid))
}

fn is_running(ctx: &TaskCtx, vmid: u32) -> bool {
    ctx.inst
        .cluster()
        .vms
        .get(&vmid)
        .is_some_and(|vm| vm.is_running())
}

/// Simulated time until the guest agent answers (zero once it is up).
fn agent_ready_in(ctx: &TaskCtx, vmid: u32) -> Duration {
    let cluster = ctx.inst.cluster();
    let ready = cluster
        .vms
        .get(&vmid)
        .and_then(|vm| vm.running.as_ref())
        .map(|r| r.agent_ready);
    let real = ready.map_or(Duration::ZERO, |r| {
        r.saturating_duration_since(Instant::now())
    });
    real.div_f64(ctx.inst.clock.scale())
}

fn set_stopped(ctx: &TaskCtx, vmid: u32) {
    if let Some(vm) = ctx.inst.cluster().vms.get_mut(&vmid) {
        vm.running = None;
    }
}
