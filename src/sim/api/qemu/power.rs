//! `POST .../status/{start,stop,shutdown,reboot}`: all async. Lock checks
//! and the flock happen inside the tasks, so a call during a create returns
//! a UPID whose task fails after the flock timeout.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{NODE_VMID, SKIPLOCK, assert_config_exists, check_root_only};
use crate::sim::clock::Clock;
use crate::sim::http::{ApiError, Call, Reply};
use crate::sim::instance::Instance;
use crate::sim::schema::{Param, propstr};
use crate::sim::state::Running;
use crate::sim::tasks::{self, TaskCtx};

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
fn precheck(inst: &Instance, call: &Call) -> Result<(String, u32), ApiError> {
    let node = call.params.node().to_owned();
    let vmid = call.params.vmid("vmid");
    inst.auth
        .check(&call.identity, &format!("/vms/{vmid}"), &["VM.PowerMgmt"])?;
    check_root_only(call, &["skiplock", "keepActive"])?;
    Ok((node, vmid))
}

/// The lock check of a task, honouring skiplock.
fn task_lock_check(ctx: &TaskCtx, vmid: u32, skiplock: bool) -> Result<(), String> {
    let cluster = ctx.inst.cluster();
    let vm = cluster
        .vm(&ctx.node, vmid)
        .map_err(|_| missing(&ctx.node, vmid))?;
    if skiplock { Ok(()) } else { vm.check_lock() }
}

fn missing(node: &str, vmid: u32) -> String {
    format!("Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
}

pub async fn start_handler(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let (node, vmid) = precheck(&inst, &call)?;
    let skiplock = call.params.flag("skiplock") == Some(true);
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmstart",
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
            start_locked(&ctx, vmid, skiplock).await
        },
    );
    Ok(Reply::data(upid))
}

/// A start task's work (also used by create's `start=1`).
pub async fn start(ctx: &TaskCtx, vmid: u32) -> Result<(), String> {
    let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
    start_locked(ctx, vmid, false).await
}

async fn start_locked(ctx: &TaskCtx, vmid: u32, skiplock: bool) -> Result<(), String> {
    let has_cloudinit = {
        let cluster = ctx.inst.cluster();
        let vm = cluster
            .vm(&ctx.node, vmid)
            .map_err(|_| missing(&ctx.node, vmid))?;
        if vm.is_template() {
            return Err("you can't start a vm if it's a template".into());
        }
        if !skiplock {
            vm.check_lock()?;
        }
        if vm.is_running() {
            return Err(format!("VM {vmid} already running"));
        }
        for (k, v) in vm.config.iter().filter(|(k, _)| k.starts_with("net")) {
            if let Some(bridge) = propstr::NET
                .parse(k, v)
                .ok()
                .and_then(|n| n.get("bridge").cloned())
                && bridge != "vmbr0"
            {
                return Err(format!("bridge '{bridge}' does not exist"));
            }
        }
        vm.config.values().any(|v| v.contains("-cloudinit"))
    };
    if has_cloudinit {
        ctx.log("generating cloud-init ISO");
    }
    ctx.sleep(ctx.inst.durations.start).await;
    ctx.checkpoint()?;
    let mut cluster = ctx.inst.cluster();
    let vm = cluster
        .vm_mut(&ctx.node, vmid)
        .map_err(|_| missing(&ctx.node, vmid))?;
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
pub fn apply_pending(vm: &mut crate::sim::state::Vm) {
    let pending = std::mem::take(&mut vm.pending);
    vm.config.extend(pending);
    for key in std::mem::take(&mut vm.pending_delete) {
        vm.config.remove(&key);
    }
}

pub async fn stop_handler(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let (node, vmid) = precheck(&inst, &call)?;
    let skiplock = call.params.flag("skiplock") == Some(true);
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmstop",
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
            task_lock_check(&ctx, vmid, skiplock)?;
            if !is_running(&ctx, vmid) {
                return Ok(());
            }
            ctx.sleep(ctx.inst.durations.stop).await;
            ctx.checkpoint()?;
            set_stopped(&ctx, vmid);
            Ok(())
        },
    );
    Ok(Reply::data(upid))
}

pub async fn shutdown_handler(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let (node, vmid) = precheck(&inst, &call)?;
    let skiplock = call.params.flag("skiplock") == Some(true);
    let force = call.params.flag("forceStop") == Some(true);
    let timeout = call
        .params
        .int("timeout")
        .map_or(inst.durations.shutdown_timeout, |t| {
            Duration::from_secs(t.max(0) as u64)
        });
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmshutdown",
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
            task_lock_check(&ctx, vmid, skiplock)?;
            if !is_running(&ctx, vmid) {
                return Ok(());
            }
            ctx.checkpoint()?;
            // A guest that is still booting acts on the ACPI request only once it is up.
            let booted_in = agent_ready_in(&ctx, vmid);
            let needed = ctx.inst.durations.shutdown + booted_in.unwrap_or(Duration::MAX / 4);
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
    );
    Ok(Reply::data(upid))
}

pub async fn reboot_handler(inst: Arc<Instance>, call: Call) -> Result<Reply, ApiError> {
    let (node, vmid) = precheck(&inst, &call)?;
    assert_config_exists(&inst, &node, vmid)?;
    if !inst.cluster().vm(&node, vmid)?.is_running() {
        return Err(ApiError::internal(format!("VM {vmid} not running")));
    }
    let upid = tasks::spawn(
        &inst,
        &call,
        &node,
        "qmreboot",
        &vmid.to_string(),
        move |ctx| async move {
            let _flock = ctx.flock(vmid, ctx.inst.durations.flock_timeout).await?;
            task_lock_check(&ctx, vmid, false)?;
            ctx.sleep(ctx.inst.durations.shutdown + ctx.inst.durations.start)
                .await;
            ctx.checkpoint()?;
            let mut cluster = ctx.inst.cluster();
            let vm = cluster
                .vm_mut(&ctx.node, vmid)
                .map_err(|_| missing(&ctx.node, vmid))?;
            apply_pending(vm);
            if let Some(run) = vm.running.as_mut() {
                run.agent_ready = ctx.inst.clock.deadline(ctx.inst.durations.guest_boot);
            }
            Ok(())
        },
    );
    Ok(Reply::data(upid))
}

fn is_running(ctx: &TaskCtx, vmid: u32) -> bool {
    ctx.inst
        .cluster()
        .vms
        .get(&vmid)
        .is_some_and(|vm| vm.is_running())
}

/// Simulated time until the guest agent answers (zero if up already).
fn agent_ready_in(ctx: &TaskCtx, vmid: u32) -> Option<Duration> {
    let cluster = ctx.inst.cluster();
    let run = cluster.vms.get(&vmid)?.running.as_ref()?;
    let real = run.agent_ready.saturating_duration_since(Instant::now());
    Some(real.div_f64(ctx.inst.clock.scale()))
}

fn set_stopped(ctx: &TaskCtx, vmid: u32) {
    if let Some(vm) = ctx.inst.cluster().vms.get_mut(&vmid) {
        vm.running = None;
    }
}
